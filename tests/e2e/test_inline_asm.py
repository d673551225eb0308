"""`tl.inline_asm_elementwise` (Triton 3.6's semantics): the user's PTX over tiles,
`pack` elements per execution, sub-32-bit elements packed into 32-bit registers,
several outputs. The PTX assembles for sm_80 and sm_90a (ptxas, no GPU needed); the
results are checked on a GPU; the interpreter, the CPU backend and the host emulator,
which cannot run PTX, refuse it with an error at the call's line — except the one-instruction
f32 approximations (`tanh.approx.f32 $0, $1;`, ...), which the interpreter and the CPU
backend run as the function approximated; a constraint string that does not match the
packing is an error naming both counts."""
from __future__ import annotations

import numpy as np
import pytest

import tegula as triton
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.runtime.source import ASTSource

# Triton's documentation example: u8 -> i32 and max(f32(a), b), four elements at a time
_U8_MAX = tl.constexpr("""
{
    .reg .b8 tmp<4>;
    mov.b32 {tmp0, tmp1, tmp2, tmp3}, $8;
    cvt.u32.u8 $0, tmp0;
    cvt.u32.u8 $1, tmp1;
    cvt.u32.u8 $2, tmp2;
    cvt.u32.u8 $3, tmp3;
}
cvt.rn.f32.s32 $4, $0;
cvt.rn.f32.s32 $5, $1;
cvt.rn.f32.s32 $6, $2;
cvt.rn.f32.s32 $7, $3;
max.f32 $4, $4, $9;
max.f32 $5, $5, $10;
max.f32 $6, $6, $11;
max.f32 $7, $7, $12;
""")


@triton.jit
def u8_max(a_ptr, b_ptr, c_ptr, d_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    c, d = tl.inline_asm_elementwise(asm=_U8_MAX, constraints="=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r",
                                     args=[a, b], dtype=(tl.int32, tl.float32), is_pure=True, pack=4)
    tl.store(c_ptr + offs, c, mask=m)
    tl.store(d_ptr + offs, d, mask=m)


# FLA's softplus (flash-linear-attention, fla/ops/utils/softplus.py): f32 in "r" registers
_SOFTPLUS = tl.constexpr(" ".join("""{ .reg .pred p; setp.gt.f32 p, $1, 20.; @p mov.f32 $0, $1;
@!p mul.f32 $0, $1, 1.4426950408889634; @!p ex2.approx.ftz.f32 $0, $0; @!p add.f32 $0, $0, 1.0;
@!p lg2.approx.ftz.f32 $0, $0; @!p mul.f32 $0, $0, 0.6931471805599453; }""".split("\n")))


@triton.jit
def softplus(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m) * scale
    y = tl.inline_asm_elementwise(_SOFTPLUS, "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(y_ptr + offs, y, mask=m)


@triton.jit
def half_pairs(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """f16 two to a register (pack 2): y = x * x + 1 by one f16x2 instruction each."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.inline_asm_elementwise("{ .reg .b32 one; mov.b32 one, 0x3C003C00; fma.rn.f16x2 $0, $1, $1, one; }",
                                  "=r,r", [x], dtype=tl.float16, is_pure=True, pack=2)
    tl.store(y_ptr + offs, y, mask=m)


@triton.jit
def bf16_negate(x_ptr, y_ptr, z_ptr, BLOCK: tl.constexpr):
    """bf16 one to a 16-bit register (pack 1, `h`) and two to a 32-bit one (pack 2)."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("xor.b16 $0, $1, 0x8000;", "=h,h", [x], dtype=tl.bfloat16, is_pure=True, pack=1)
    z = tl.inline_asm_elementwise("xor.b32 $0, $1, 0x80008000;", "=r,r", [x], dtype=tl.bfloat16, is_pure=True,
                                  pack=2)
    tl.store(y_ptr + offs, y)
    tl.store(z_ptr + offs, z)


@triton.jit
def acquire_loads(x_ptr, y_ptr, BLOCK: tl.constexpr):
    """A pointer argument (`l`, 64 bits), as kernels that load with acquire semantics
    write it; not pure: each execution reads memory."""
    offs = tl.arange(0, BLOCK)
    y = tl.inline_asm_elementwise("ld.global.acquire.gpu.b32 $0, [$1];", "=r,l", [x_ptr + offs],
                                  dtype=tl.int32, is_pure=False, pack=1)
    tl.store(y_ptr + offs, y)


@triton.jit
def wrong_constraints(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=2)
    tl.store(y_ptr + offs, y)


def _compile(fn, signature, constexprs, cap):
    return triton.compile(ASTSource(fn, signature, constexprs, {}), target=GPUTarget("cuda", cap, 32),
                          options={"num_warps": 4})


_SIGS = {
    "u8_max": (u8_max, {"a_ptr": "*u8", "b_ptr": "*fp32", "c_ptr": "*i32", "d_ptr": "*fp32", "n": "i32",
                        "BLOCK": "constexpr"}, {"BLOCK": 1024}),
    "softplus": (softplus, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "scale": "fp32", "BLOCK": "constexpr"},
                 {"BLOCK": 256}),
    "half_pairs": (half_pairs, {"x_ptr": "*fp16", "y_ptr": "*fp16", "n": "i32", "BLOCK": "constexpr"},
                   {"BLOCK": 1024}),
    "acquire_loads": (acquire_loads, {"x_ptr": "*i32", "y_ptr": "*i32", "BLOCK": "constexpr"}, {"BLOCK": 256}),
    "bf16_negate": (bf16_negate, {"x_ptr": "*bf16", "y_ptr": "*bf16", "z_ptr": "*bf16", "BLOCK": "constexpr"},
                    {"BLOCK": 512}),
}


@pytest.mark.parametrize("cap", [80, 90])
@pytest.mark.parametrize("name", sorted(_SIGS))
def test_the_assembly_is_in_the_ptx_and_assembles(name, cap):
    fn, sig, consts = _SIGS[name]
    k = _compile(fn, sig, consts, cap)
    ptx = k.asm["ptx"]
    marker = {"u8_max": "cvt.u32.u8", "softplus": "lg2.approx.ftz.f32", "half_pairs": "fma.rn.f16x2",
              "acquire_loads": "ld.global.acquire.gpu.b32", "bf16_negate": "xor.b16"}[name]
    assert marker in ptx
    if name == "u8_max":
        # 1024 elements over 128 threads: 8 per thread, two executions of four, each
        # taking the four bytes of `a` in one register (two outputs: one asm, merged)
        assert ptx.count("cvt.u32.u8") == 8
    if name == "half_pairs":
        assert ptx.count("fma.rn.f16x2") == 4  # 8 halves per thread, two per execution
    if name == "acquire_loads":
        assert ptx.count("ld.global.acquire.gpu.b32") == 2  # 256 over 128 threads, one each
    if name == "bf16_negate":  # 4 elements per thread: 4 executions of pack 1, 2 of pack 2
        assert ptx.count("xor.b16") == 4 and ptx.count("xor.b32") == 2
    if find_ptxas() is not None:
        assert k.asm["cubin"][:4] == b"\x7fELF"


def test_a_constraint_string_that_does_not_match_the_packing_names_both_counts():
    with pytest.raises(triton.CompilationError) as e:
        _compile(wrong_constraints, {"x_ptr": "*fp32", "y_ptr": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 128}, 90)
    msg = str(e.value)
    assert "test_inline_asm.py" in msg and "1 output and 1 input registers" in msg and "need 2" in msg


@pytest.mark.parametrize("host", ["interpreter", "cpu", "cuda-emulated"])
def test_hosts_that_cannot_run_ptx_refuse_it_at_the_call(host, monkeypatch):
    from emulated_backend import EmulatedCudaBackend

    from tegula.runtime import backend_registry

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    if host == "interpreter":
        monkeypatch.setenv("TEGULA_INTERPRET", "1")
    else:
        monkeypatch.delenv("TEGULA_INTERPRET", raising=False)
        monkeypatch.setenv("TEGULA_CPU_BACKEND", "1")
    if host == "cuda-emulated":
        original = backend_registry._FACTORIES["cpu"]
        backend_registry.register_backend("cpu", EmulatedCudaBackend)
    softplus.clear_cache()
    x = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    try:
        with pytest.raises(Exception) as e:
            softplus[(1,)](x, np.empty_like(x), 100, 1.0, BLOCK=128)
    finally:
        if host == "cuda-emulated":
            backend_registry.register_backend("cpu", original)
        softplus.clear_cache()
    msg = str(e.value)
    assert "inline_asm_elementwise" in msg and "NVIDIA GPU" in msg and "test_inline_asm.py" in msg


@triton.jit
def approx_f32(x_ptr, y_ptr, n, ASM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    y = tl.inline_asm_elementwise(ASM, constraints="=f,f", args=[x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(y_ptr + offs, y, mask=m)


_APPROX = {  # mamba-3's fast math (mamba_ssm/ops/triton/mamba3/utils.py) and kin
    "cos.approx.f32 $0, $1;": np.cos,
    "sin.approx.f32 $0, $1;": np.sin,
    "tanh.approx.f32 $0, $1;": np.tanh,
    "ex2.approx.ftz.f32 $0, $1;": np.exp2,
    "lg2.approx.f32 $0, $1;": np.log2,
    "rcp.approx.ftz.f32 $0, $1;": np.reciprocal,
    "sqrt.approx.f32 $0,$1": np.sqrt,
    "rsqrt.approx.f32 $0, $1;": lambda v: 1 / np.sqrt(v),
}


@pytest.mark.parametrize("host", ["interpreter", "cpu"])
@pytest.mark.parametrize("asm", list(_APPROX))
def test_hosts_run_one_instruction_approximations_as_the_function(host, asm, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("TEGULA_INTERPRET", "1" if host == "interpreter" else "0")
    monkeypatch.setenv("TEGULA_CPU_BACKEND", "1")
    approx_f32.clear_cache()
    rng = np.random.default_rng()
    x = rng.uniform(0.1, 3.0, 200).astype(np.float32) * rng.choice([-1, 1], 200).astype(np.float32)
    if "lg2" in asm or "sqrt" in asm:
        x = np.abs(x)
    y = np.empty_like(x)
    try:
        approx_f32[(2,)](x, y, 200, ASM=asm, BLOCK=128)
    finally:
        approx_f32.clear_cache()
    np.testing.assert_allclose(y, _APPROX[asm](x.astype(np.float64)), rtol=2e-6, atol=1e-7)


def test_several_outputs_with_side_effects_are_refused():
    @triton.jit
    def impure(x_ptr, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        a, b = tl.inline_asm_elementwise("mov.b32 $0, $2; mov.b32 $1, $2;", "=r,=r,r", [x],
                                         dtype=(tl.float32, tl.float32), is_pure=False, pack=1)
        tl.store(x_ptr + tl.arange(0, BLOCK), a + b)

    with pytest.raises(triton.CompilationError, match="is_pure=False"):
        _compile(impure, {"x_ptr": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 128}, 90)


def test_results_on_the_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")

    class on:  # noqa: N801  (the e2e fixture's interface, CUDA only)
        def __new__(cls, a):
            return torch.from_numpy(a).cuda()

        @staticmethod
        def back(x):
            return x.cpu().numpy()
    rng = np.random.default_rng(1)
    n = 1000  # not a multiple of the block, nor of a thread's four-element packs
    a = rng.integers(0, 256, n).astype(np.uint8)
    b = (rng.standard_normal(n) * 200).astype(np.float32)
    c, d = on(np.zeros(n, np.int32)), on(np.zeros(n, np.float32))
    u8_max[(triton.cdiv(n, 256),)](on(a), on(b), c, d, n, BLOCK=256)
    np.testing.assert_array_equal(on.back(c), a.astype(np.int32))
    np.testing.assert_array_equal(on.back(d), np.maximum(a.astype(np.float32), b))

    x = rng.standard_normal(n).astype(np.float32)
    y = on(np.zeros(n, np.float32))
    softplus[(triton.cdiv(n, 128),)](on(x), y, n, 15.0, BLOCK=128)
    xs = x.astype(np.float64) * 15.0
    want = np.where(xs > 20, xs, np.log1p(np.exp(xs)))
    np.testing.assert_allclose(on.back(y), want, rtol=2e-6, atol=1e-6)

    v = rng.integers(-1000, 1000, 256).astype(np.int32)
    got = on(np.zeros(256, np.int32))
    acquire_loads[(1,)](on(v), got, BLOCK=256)
    np.testing.assert_array_equal(on.back(got), v)

    bf = torch.randn(512, dtype=torch.bfloat16, device="cuda")
    neg1, neg2 = torch.empty_like(bf), torch.empty_like(bf)
    bf16_negate[(1,)](bf, neg1, neg2, BLOCK=512)
    assert torch.equal(neg1, -bf) and torch.equal(neg2, -bf)

    h = rng.standard_normal(n).astype(np.float16)
    out = on(np.zeros(n, np.float16))
    half_pairs[(triton.cdiv(n, 512),)](on(h), out, n, BLOCK=512)
    np.testing.assert_array_equal(on.back(out), (h.astype(np.float32) ** 2 + 1).astype(np.float16))
