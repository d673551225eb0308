"""Every hand-built kernel compiles through the CUDA backend: the layout stage prints,
the LLVM IR verifies, PTX is produced with line info, and ptxas assembles it for
sm_80 and sm_90a (the ptxas part skips only when ptxas is missing)."""
from __future__ import annotations

import re

import cuda_kernels as ck
import pytest

from tegula.backends.cuda import compile_kernel
from tegula.backends.cuda.encode_layouts import conversions
from tegula.backends.cuda.ptxas import find_ptxas, parse_report
from tegula.ir.core import ArgAttrs
from tegula.ir.parser import parse_ir
from tegula.ir.printer import print_ir
from tegula.ir.types import TileType


def converts(tgir: str, kind: str = "") -> list:
    """The convert_layout ops of a tgir text (of one kind: local, remat or smem)."""
    return [ins for ins, k in conversions(parse_ir(tgir)) if not kind or k == kind]

CASES = ck.all_cases() + [ck.out_of_bounds()]
HAVE_PTXAS = find_ptxas() is not None


@pytest.mark.parametrize("cap", [80, 90])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_compiles(case, cap):
    asm, md = compile_kernel(case.kernel, {"num_warps": case.num_warps}, cap)
    # the GPU stage is IR text that reads back as it was printed, every tile encoded
    tgir = parse_ir(asm["tgir"])
    assert print_ir(tgir, locs=True) == asm["tgir"]
    tiles = [r.type for ins in tgir.walk() for r in ins.results if isinstance(r.type, TileType)]
    assert all(t.encoding is not None for t in tiles)
    ptx = asm["ptx"]
    assert f".entry {case.kernel.name}(" in ptx
    assert f".target sm_{cap}{'a' if cap == 90 else ''}" in ptx
    assert re.search(r"\.loc\s+\d+ \d+ \d+", ptx), "PTX carries line info"
    assert md["name"] == case.kernel.name and md["num_warps"] == case.num_warps
    if not HAVE_PTXAS:
        pytest.skip("ptxas not found")
    assert asm["cubin"][:4] == b"\x7fELF"
    assert md["n_regs"] > 0 and md["n_spills"] == 0


def _ptx(case, cap=90, **opts):
    return compile_kernel(case.kernel, {"num_warps": case.num_warps, **opts}, cap)


def test_aligned_vector_add_uses_16_byte_accesses():
    case = ck.vector_add()
    case.kernel.arg_attrs[3] = ArgAttrs(16)  # n % 16 == 0: the mask is constant over 4 elements
    asm, _ = _ptx(case)
    assert "ld.global.v4.b32" in asm["ptx"] and "st.global.v4.b32" in asm["ptx"]
    assert "convert_layout" not in asm["tgir"]


def test_half_precision_vectors_pack_eight_elements():
    case = ck.vector_add(dtype=ck.F16, n=4096)
    case.kernel.arg_attrs[3] = ArgAttrs(16)
    asm, _ = _ptx(case)
    assert "ld.global.v4.b32" in asm["ptx"]


def test_unaligned_mask_falls_back_to_scalar_but_coalesced_accesses():
    asm, _ = _ptx(ck.vector_add())  # n has no known divisibility
    assert "ld.global.b32" in asm["ptx"] and "v4" not in asm["ptx"]


def test_reduction_uses_warp_shuffles_and_shared_memory_across_warps():
    asm, md = _ptx(ck.softmax())
    assert "shfl.sync.bfly.b32" in asm["ptx"]
    assert "bar.sync" in asm["ptx"] and md["shared"] > 0


def test_single_warp_reduction_needs_no_shared_memory():
    asm, md = _ptx(ck.softmax(cols=100, block=128, num_warps=1))
    assert "bar.sync" not in asm["ptx"] and md["shared"] == 0


def test_transpose_converts_through_shared_memory_once():
    asm, _ = _ptx(ck.transpose())
    assert len(converts(asm["tgir"], "smem")) == 1


def test_index_math_is_built_in_the_layout_of_its_use():
    # the row/col offsets of a 2-D tile are built in the load's layout directly, and the
    # 16 row sums (fewer than the threads) are stored where the reduction left them,
    # their pointers built there too: no conversion at all
    asm, _ = _ptx(ck.row_sum_2d(16, 64, 1))
    assert len(converts(asm["tgir"])) == 0
    # 64 column sums of 4 warps' tiles (fewer than 128 threads): the same
    asm, _ = _ptx(ck.row_sum_2d(16, 64, 0))
    assert len(converts(asm["tgir"], "smem")) == 0


def test_libdevice_is_linked_and_stripped():
    asm, _ = _ptx(ck.math_ops())
    assert "__nv_expf" not in asm["ptx"]  # inlined
    assert len(asm["ptx"]) < 200_000


def test_fp8_conversions_use_hardware_on_sm90_and_software_on_sm80():
    asm90, _ = _ptx(ck.casts(), 90)
    asm80, _ = _ptx(ck.casts(), 80)
    assert "cvt.rn.satfinite.e4m3x2.f32" in asm90["ptx"]
    assert "e4m3" not in asm80["ptx"]


def test_checked_mode_adds_bounds_checks():
    asm, md = _ptx(ck.vector_add(), checked=True)
    assert md["checked"] and md["checked_sites"]
    assert re.search(r"atom\.[.\w]*cas\.b64", asm["ptx"])


def test_debug_alone_is_tritons_debug_not_checked_mode():
    """`debug=True` (what Inductor passes to every compile) turns device asserts on
    and nothing else: no bounds checks, no error buffer, no sync after launches."""
    asm, md = _ptx(ck.vector_add(), debug=True)
    assert md["debug"] and not md["checked"] and not md["checked_sites"]
    assert not re.search(r"atom\.[.\w]*cas\.b64", asm["ptx"])


def test_ptxas_report_parsing():
    log = ("ptxas info    : Function properties for k\n"
           "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
           "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem\n")
    info = parse_report(log)
    assert info["n_regs"] == 40 and info["n_spills"] == 4 and info["spill_loads"] == 12
    assert info["static_shared"] == 2048 and info["stack"] == 8


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("cap", [80, 90])
def test_the_ir_tests_every_op_kernel_compiles(cap, debug):
    """The IR tests' kernel that uses every op of the table at least once."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ir"))
    try:
        import ir_test_kernels
    finally:
        sys.path.pop(0)
    # TMA exists from sm_90 on
    asm, md = compile_kernel(ir_test_kernels.build_all_ops_kernel(tma=cap >= 90), {"debug": debug, "checked": debug},
                             cap)
    assert ".entry all_ops(" in asm["ptx"]
    assert md["checked"] == debug


def test_every_op_has_a_cuda_lowering():
    from tegula.backends.cuda import lower_kernel  # noqa: F401  (registers the lowerings)
    from tegula.backends.cuda.registry import HANDLERS, REWRITTEN_BEFORE_LOWERING
    from tegula.ir.ops import Op
    lowered = set(HANDLERS) | REWRITTEN_BEFORE_LOWERING
    assert set(Op) <= lowered, sorted(op.value for op in set(Op) - lowered)


@pytest.mark.parametrize("cap", [80, 90])
def test_ops_without_a_handler_are_rewritten_before_lowering(cap):
    """The all-ops kernel's descriptor ops reach the lowering only where it has a handler."""
    import sys
    from pathlib import Path

    from tegula.backends.cuda.compiler import to_tgir
    from tegula.backends.cuda.registry import HANDLERS, REWRITTEN_BEFORE_LOWERING
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ir"))
    try:
        import ir_test_kernels
    finally:
        sys.path.pop(0)
    kernel = ir_test_kernels.build_all_ops_kernel()
    assert {i.op for i in kernel.walk()} >= REWRITTEN_BEFORE_LOWERING
    staged, _plan = to_tgir(kernel, 4, 3, cap, checked=False)
    left = {i.op for i in staged.walk()} & REWRITTEN_BEFORE_LOWERING
    assert left <= set(HANDLERS)
