"""What Python prints for a failing launch: the user's call line, their kernel's `def`
line and the located message, with no tegula-internal frame between them, whatever the
entry point (`kernel[grid]`, `warmup`, `run`, an autotuned kernel) — unless
TEGULA_DEBUG_FRONTEND=1. Each case runs a fresh script in a subprocess, as a user would."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from errors_test_utils import TEGULA_DIR

REPO = os.path.dirname(TEGULA_DIR)

KERNEL = '''\
import numpy as np
import tegula as triton
import tegula.language as tl


@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y = tl.load(x_ptr + offs, mask=offs < n) * factor
    tl.store(x_ptr + offs, y, mask=offs < n)


tuned = triton.autotune(configs=[triton.Config({"BLOCK": 16})], key=["n"])(scale)
x = np.ones(16, dtype=np.float32)
'''

CALLS = {
    "launch": "scale[(1,)](x, 16, BLOCK=16)",
    "warmup": "scale.warmup(x, 16, BLOCK=16, grid=(1,))",
    "run": "scale.run(x, 16, BLOCK=16, grid=(1,))",
    "autotuned": "tuned[(1,)](x, 16)",
}


def _run(tmp_path, call: str, debug: bool = False, kernel: str = KERNEL) -> tuple[str, str]:
    script = tmp_path / "user_script.py"
    script.write_text(kernel + call + "\n")
    env = {**os.environ, "PYTHONPATH": REPO, "TEGULA_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TEGULA_DEBUG_FRONTEND", None)
    if debug:
        env["TEGULA_DEBUG_FRONTEND"] = "1"
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    return str(script), proc.stderr


@pytest.mark.parametrize("entry", sorted(CALLS))
def test_failing_launch_shows_only_user_frames(tmp_path, entry):
    script, err = _run(tmp_path, CALLS[entry])
    frames = [line for line in err.splitlines() if line.startswith('  File "')]
    assert frames == [f'  File "{script}", line 15, in <module>', f'  File "{script}", line 7, in scale'], err
    assert TEGULA_DIR + os.sep not in err
    assert f"    {CALLS[entry]}\n" in err
    assert "    def scale(x_ptr, n, BLOCK: tl.constexpr):\n" in err
    assert err.endswith(f"{script}:9:48: error: 'factor' is not defined\n"
                        "    y = tl.load(x_ptr + offs, mask=offs < n) * factor\n"
                        + " " * 47 + "^~~~~~\n")


def test_debug_frontend_keeps_internal_frames(tmp_path):
    _, err = _run(tmp_path, CALLS["launch"], debug=True)
    assert TEGULA_DIR + os.sep in err
    assert "error: 'factor' is not defined" in err


def test_error_in_a_user_callback_keeps_the_users_frames_only(tmp_path):
    # the grid callable is the user's code: its frame stays, tegula's around it go
    call = 'scale[lambda meta: (meta["BLOK"],)](x, 16, BLOCK=16)'
    script, err = _run(tmp_path, call, kernel=KERNEL.replace("* factor", "* 2.0"))
    frames = [line for line in err.splitlines() if line.startswith('  File "')]
    assert frames == [f'  File "{script}", line 15, in <module>', f'  File "{script}", line 7, in scale',
                      f'  File "{script}", line 15, in <lambda>'], err
    assert err.rstrip().endswith("KeyError: 'BLOK'")
