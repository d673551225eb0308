"""The architecture a kernel is lowered for: the device's, or the one the `arch` launch
option (or TRITON_OVERRIDE_ARCH) names, as in Triton 3.6.

Triton's meaning, kept: `arch="sm80"` on an sm_90 device lowers the kernel as for
sm_80 — mma.sync and cp.async, no wgmma, TMA, setmaxnreg or griddepcontrol — and the
PTX and cubin are still made for the device (`.target sm_90a`), so the kernel runs
there. An arch newer than the device's would use instructions it lacks, and one tegula
does not know would be guessed at: both are refused with a clear error.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from ...errors import LaunchOptionValueError

# the NVIDIA compute capabilities tegula lowers for (Volta on: below 80 dots run on FMAs)
KNOWN_CAPABILITIES = (70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121)


def lowering_capability(arch: Optional[Any], device_capability: int) -> int:
    """The capability to lower for: `device_capability`, or that of `arch` ("sm80", as
    `CompileOptions` normalizes it)."""
    if arch is None or arch == "":
        return device_capability
    m = re.fullmatch(r"sm_?(\d+)a?", str(arch).strip().lower())
    if m is None:
        raise LaunchOptionValueError(f"arch must have the form sm<capability> (sm80, sm90, ...), got {arch!r}")
    cap = int(m.group(1))
    if cap not in KNOWN_CAPABILITIES:
        known = ", ".join(f"sm{c}" for c in KNOWN_CAPABILITIES)
        raise LaunchOptionValueError(f"arch={arch!r}: tegula's CUDA backend compiles for {known}")
    if cap > device_capability:
        raise LaunchOptionValueError(
            f"arch={arch!r} asks for the instructions of sm_{cap}, which the target sm_{device_capability} "
            "lacks; an arch may only be the target's or an older one")
    return cap
