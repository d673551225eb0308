"""Occupancy arithmetic, register caps in the PTX (`maxnreg` and the occupancy cap),
and the compiler keeping a capped cubin only when it does not spill."""
from __future__ import annotations

import cuda_kernels as ck
import pytest

import tegula
import tegula.language as tl
from tegula.backends.cuda import compile_kernel, compiler, occupancy
from tegula.backends.cuda.ptxas import find_ptxas, with_register_cap

HAVE_PTXAS = find_ptxas() is not None


def test_ctas_per_sm_takes_the_least_of_registers_shared_memory_and_threads():
    # 256 threads: 130 registers allocate as 136 -> one CTA; 128 -> two
    assert occupancy.ctas_per_sm(130, 256, 49664, 90) == 1
    assert occupancy.ctas_per_sm(128, 256, 49664, 90) == 2
    # shared memory bound: 100 KB per CTA on a 228 KB SM
    assert occupancy.ctas_per_sm(32, 128, 100 * 1024, 90) == 2
    # thread bound: 1024 threads, few registers
    assert occupancy.ctas_per_sm(16, 1024, 0, 90) == 2
    # an sm_86 SM has 1536 threads and 100 KB
    assert occupancy.ctas_per_sm(32, 512, 0, 86) == 3


def test_register_target_only_when_registers_alone_cost_a_cta_and_the_cut_is_small():
    assert occupancy.register_target(130, 256, 49664, 90) == 128
    assert occupancy.register_target(153, 256, 51224, 90) == 128   # the causal D64 forward: 1 -> 2 CTAs
    assert occupancy.register_target(160, 256, 51224, 90) is None   # a cut of 32: over 1/6
    assert occupancy.register_target(128, 256, 49664, 90) is None   # already two
    assert occupancy.register_target(189, 256, 98816, 90) is None   # 128 would cut 61
    assert occupancy.register_target(130, 256, 150 * 1024, 90) is None  # shared memory allows one anyway
    assert occupancy.register_target(180, 128, 0, 90) == 168        # 2 -> 3 CTAs of 4 warps
    assert occupancy.register_target(70, 128, 0, 90) is None        # 7 -> 8: too little to gain


def test_with_register_cap_puts_one_directive_on_each_entry():
    ptx = ".visible .entry k(\n\t.param .u64 k_param_0\n)\n.reqntid 128\n{\n\tret;\n}\n"
    capped = with_register_cap(ptx, 64)
    assert capped.count(".maxnreg 64") == 1 and capped.index(".maxnreg 64") < capped.index("{")
    again = with_register_cap(capped, 32)
    assert ".maxnreg 64" not in again and again.count(".maxnreg 32") == 1


@pytest.mark.skipif(not HAVE_PTXAS, reason="ptxas is not installed")
def test_maxnreg_option_caps_the_registers_ptxas_uses():
    """Triton's `maxnreg` launch option (ptxas ignores --maxrregcount for `.reqntid` entries)."""
    case = next(c for c in ck.all_cases() if c.name == "softmax_4096_w8")
    _asm, free = compile_kernel(case.kernel, {"num_warps": 8}, 90)
    asm, capped = compile_kernel(case.kernel, {"num_warps": 8, "maxnreg": 40}, 90)
    assert free["n_regs"] > 40 >= capped["n_regs"]
    assert ".maxnreg 40" in asm["ptx"]


@pytest.mark.skipif(not HAVE_PTXAS, reason="ptxas is not installed")
def test_the_occupancy_cap_is_kept_when_it_does_not_spill_and_dropped_when_it_does(monkeypatch):
    case = next(c for c in ck.all_cases() if c.name == "softmax_4096_w8")
    _asm, free = compile_kernel(case.kernel, {"num_warps": 8}, 90)
    assert "occupancy_maxnreg" not in free  # 64 registers: nothing to gain
    monkeypatch.setattr(occupancy, "register_target", lambda regs, *a: regs - 8)
    asm, md = compile_kernel(case.kernel, {"num_warps": 8}, 90)
    assert md["occupancy_maxnreg"] == free["n_regs"] - 8 and md["n_regs"] <= free["n_regs"] - 8
    assert md["n_spills"] == 0 and f".maxnreg {free['n_regs'] - 8}" in asm["ptx"]
    monkeypatch.setattr(occupancy, "register_target", lambda regs, *a: 16)  # forces spills
    asm, md = compile_kernel(case.kernel, {"num_warps": 8}, 90)
    assert "occupancy_maxnreg" not in md and md["n_regs"] == free["n_regs"] and ".maxnreg" not in asm["ptx"]
    assert compiler.occupancy is occupancy


@pytest.mark.skipif(not HAVE_PTXAS, reason="ptxas is not installed")
def test_a_cap_ptxas_refuses_keeps_the_uncapped_cubin(monkeypatch):
    """ptxas stops with "Insufficient registers" (not a spill) when one instruction, such
    as a wgmma with its accumulators, needs more than the cap: the first cubin stays."""
    from tegula.backends.cuda import ptxas
    from tegula.errors import CompilationError

    case = next(c for c in ck.all_cases() if c.name == "softmax_4096_w8")
    real = ptxas.assemble

    def refusing(ptx, arch, **kw):
        if ".maxnreg" in ptx:
            raise CompilationError("ptxas failed: Insufficient registers")
        return real(ptx, arch, **kw)

    monkeypatch.setattr(ptxas, "assemble", refusing)
    monkeypatch.setattr(occupancy, "register_target", lambda regs, *a: regs - 8)
    asm, md = compile_kernel(case.kernel, {"num_warps": 8}, 90)
    assert "occupancy_maxnreg" not in md and ".maxnreg" not in asm["ptx"] and md["n_regs"] > 0


def test_register_file_share_of_a_cta():
    assert occupancy.register_file_share(256) == 255   # 8 warps: the per-thread maximum
    assert occupancy.register_file_share(384) == 168   # 12 warps
    assert occupancy.register_file_share(512) == 128


@pytest.mark.parametrize("first_regs, second_spills, kept",
                         [(128, 2656, True), (128, 9000, False), (255, 0, False)],
                         ids=["fewer-spills", "more-spills", "already-whole"])
def test_a_kernel_spilling_short_of_its_register_share_gets_it(monkeypatch, first_regs, second_spills, kept):
    """ptxas stubbed: left alone it used `first_regs` registers and spilled 5728 bytes
    (attention's D128 dK/dV kernel, 8 warps, used 128); given `.maxnreg 255` it spills
    `second_spills`. The capped cubin and PTX are kept only if they spill less, and not
    tried at all when ptxas already used the CTA's whole share."""
    from tegula.backends.cuda import ptxas

    case = next(c for c in ck.all_cases() if c.name == "softmax_4096_w8")
    seen: list[str] = []

    def assemble(ptx, arch, **kw):
        seen.append(ptx)
        capped = ".maxnreg" in ptx
        regs, spills = (255, second_spills) if capped else (first_regs, 5728)
        return b"capped" if capped else b"free", {"n_regs": regs, "n_spills": spills, "spill_loads": spills,
                                                  "static_shared": 0, "stack": spills}, ""

    monkeypatch.setattr(ptxas, "find_ptxas", lambda: "/stub/ptxas")
    monkeypatch.setattr(ptxas, "ptxas_version", lambda path: "stub")
    monkeypatch.setattr(ptxas, "assemble", assemble)
    asm, md = compile_kernel(case.kernel, {"num_warps": 8}, 90)
    assert len(seen) == (1 if first_regs == 255 else 2)
    assert (asm["cubin"] == b"capped") is kept and (".maxnreg 255" in asm["ptx"]) is kept
    assert md.get("spill_maxnreg") == (255 if kept else None)
    assert md["n_spills"] == (second_spills if kept else 5728)


def test_shared_memory_budget_only_where_shared_memory_sets_the_occupancy():
    # 96 KB of rings, 4 warps: two CTAs per SM; 128 registers would allow four
    assert occupancy.shared_memory_budget(128, 128, 96 * 1024, 90) == 255
    # 64 KB: three CTAs fit, and 168 registers allow exactly three: nothing to give
    assert occupancy.shared_memory_budget(168, 128, 64 * 1024, 90) is None
    # 8 warps, 48 KB: four CTAs by shared memory, 128 registers allow two already
    assert occupancy.shared_memory_budget(128, 256, 48 * 1024, 90) is None
    # 8 warps, 112 KB: two CTAs by shared memory; 112 registers allow two; 96 allow
    # two too (allocated per warp): nothing to give either
    assert occupancy.shared_memory_budget(96, 256, 112 * 1024, 90) is None
    # 8 warps, 128 KB: one CTA; 118 registers would allow two -> the whole share
    assert occupancy.shared_memory_budget(118, 256, 128 * 1024, 90) == 255
    # little or no shared memory: the thread limit (16 CTAs of 4 warps) sets it, however
    # few registers (an elementwise kernel is not assembled twice)
    assert occupancy.shared_memory_budget(24, 128, 0, 90) is None
    assert occupancy.shared_memory_budget(24, 128, 8 * 1024, 90) is None


@pytest.mark.parametrize("raised_regs, raised_spills, kept",
                         [(154, 0, True), (128, 0, False), (200, 64, False)],
                         ids=["more-registers", "same-registers", "spills"])
def test_a_kernel_short_of_its_shared_memory_budget_gets_it(monkeypatch, raised_regs, raised_spills, kept):
    """ptxas stubbed: left alone it used 128 registers for a kernel whose shared memory
    lets two CTAs of 4 warps reside; given `.maxnreg 255` it uses `raised_regs`. The
    raised cubin and PTX are kept only if ptxas used more registers and spilled nothing."""
    from tegula.backends.cuda import ptxas

    case = next(c for c in ck.all_cases() if c.name == "softmax_4096_w8")
    seen: list[str] = []

    def assemble(ptx, arch, **kw):
        seen.append(ptx)
        raised = ".maxnreg" in ptx
        regs, spills = (raised_regs, raised_spills) if raised else (128, 0)
        return b"raised" if raised else b"free", {"n_regs": regs, "n_spills": spills, "spill_loads": spills,
                                                  "static_shared": 0, "stack": spills}, ""

    monkeypatch.setattr(ptxas, "find_ptxas", lambda: "/stub/ptxas")
    monkeypatch.setattr(ptxas, "ptxas_version", lambda path: "stub")
    monkeypatch.setattr(ptxas, "assemble", assemble)
    monkeypatch.setattr(compiler, "shared_bytes", lambda kernel: 96 * 1024)
    asm, md = compile_kernel(case.kernel, {"num_warps": 4}, 90)
    assert len(seen) == 2 and ".maxnreg 255" in seen[1]
    assert (asm["cubin"] == b"raised") is kept and (".maxnreg 255" in asm["ptx"]) is kept
    assert md.get("shared_memory_maxnreg") == (255 if kept else None)


def test_loop_carried_registers_count_each_threads_share_of_the_carried_tiles():
    """loop_sum's carried f32 accumulator of 8192 elements: 256 registers per thread on
    one warp, 64 on four; a kernel without loops carries nothing."""
    from tegula.backends.cuda.register_pressure import loop_carried_registers

    kernel = ck.loop_sum(block=8192).kernel
    one_warp, _plan = compiler.to_tgir(kernel, 1, 3, 90, False)
    four_warps, _plan = compiler.to_tgir(kernel, 4, 3, 90, False)
    assert loop_carried_registers(one_warp) == 256
    assert loop_carried_registers(four_warps) == 64
    flat, _plan = compiler.to_tgir(ck.vector_add().kernel, 4, 3, 90, False)
    assert loop_carried_registers(flat) == 0


@tegula.jit
def advanced_pointer_tiles(a_ptr, s_ptr, out_ptr, K, stride, BM: tl.constexpr, BK: tl.constexpr):
    """Two carried pointer tiles: `a_ptrs` advanced by one offset for all its elements
    (a matmul's `a_ptrs += BLOCK_K * stride_ak`), `s_ptrs` by an offset per element."""
    rm, rk = tl.arange(0, BM), tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride + rk[None, :]
    s_ptrs = s_ptr + rm[:, None] * stride + rk[None, :]
    acc = tl.zeros((BM, BK), dtype=tl.float32)
    for _k in range(0, K, BK):
        acc += tl.load(a_ptrs) + tl.load(s_ptrs)
        a_ptrs += BK
        s_ptrs += rm[:, None] + rk[None, :]
    tl.store(out_ptr + rm[:, None] * BK + rk[None, :], acc)


def test_a_pointer_tile_advanced_by_one_offset_carries_only_its_base():
    """Of the loop's carried tiles (64x64 on four warps: 32 elements a thread), the f32
    accumulator holds 32 registers and the pointer tile advanced by a per-element offset
    64 (32 addresses of 8 bytes); the one advanced by a single offset carries one 64-bit
    base, its elements' distances from it being the same every iteration. Counted per
    element, the 128x256x64 matmul's pointer tiles made it look bound to spill (322
    registers a thread), and each compile assembled it twice."""
    from test_pipeline_loops import tir_opt

    from tegula.backends.cuda.register_pressure import loop_carried_registers

    sig = {"a_ptr": "*fp32", "s_ptr": "*fp32", "out_ptr": "*fp32", "K": "i32", "stride": "i32",
           "BM": "constexpr", "BK": "constexpr"}
    kernel = tir_opt(advanced_pointer_tiles, sig, {"BM": 64, "BK": 64}, num_stages=1)
    tgir, _plan = compiler.to_tgir(kernel, 4, 1, 90, False)
    assert loop_carried_registers(tgir) == 32 + 64 + 2


@pytest.mark.parametrize("warps, capped_spills, runs, kept",
                         [(1, 4096, [True], True), (1, 0, [True, False, True], True), (4, 0, [False], False)],
                         ids=["bound-to-spill", "fits-after-all", "fits"])
def test_a_kernel_bound_to_spill_is_assembled_with_its_register_share_first(monkeypatch, warps, capped_spills,
                                                                             runs, kept):
    """ptxas stubbed (left alone: 64 registers, 24 KB of spills, as it gave fla's
    chunk_fwd_kernel_h on one warp). loop_sum carrying 256 registers per thread on one
    warp spills whatever ptxas does: assembled once, with `.maxnreg 255`, not first
    uncapped and then again. Should the capped run spill nothing after all, the kernel
    is assembled as before (uncapped, then capped since that spilled): the guess cost
    one run; on four warps (64 carried registers) nothing changes."""
    from tegula.backends.cuda import ptxas

    kernel = ck.loop_sum(block=8192).kernel
    seen: list[bool] = []

    def assemble(ptx, arch, **kw):
        capped = ".maxnreg" in ptx
        seen.append(capped)
        regs, spills = (255, capped_spills) if capped else (64, 24688 if warps == 1 else 0)
        return b"capped" if capped else b"free", {"n_regs": regs, "n_spills": spills, "spill_loads": spills,
                                                  "static_shared": 0, "stack": spills}, ""

    monkeypatch.setattr(ptxas, "find_ptxas", lambda: "/stub/ptxas")
    monkeypatch.setattr(ptxas, "ptxas_version", lambda path: "stub")
    monkeypatch.setattr(ptxas, "assemble", assemble)
    asm, md = compile_kernel(kernel, {"num_warps": warps}, 90)
    assert seen == runs
    assert (asm["cubin"] == b"capped") is kept and (".maxnreg 255" in asm["ptx"]) is kept
    assert md.get("spill_maxnreg") == (255 if kept else None)
