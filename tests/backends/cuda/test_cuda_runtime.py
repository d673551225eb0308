"""The CUDA backend behind the runtime: `tegula.compile(ASTSource(...), target=
GPUTarget("cuda", ...))` of a Python kernel yields every stage (tir → tgir → llir →
ptx → cubin) and the metadata the launcher needs, on a machine without a GPU."""
from __future__ import annotations

import pytest

import tegula
import tegula.language as tl
from tegula.backends.compiler import GPUTarget
from tegula.backends.cuda import CudaBackend
from tegula.backends.cuda.ptxas import find_ptxas
from tegula.runtime import backend_registry
from tegula.runtime.source import ASTSource


@tegula.jit
def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.exp(x) * alpha + tl.sum(x, axis=0), mask=mask)


class _CompileOnlyCuda(CudaBackend):
    def available(self):
        return self.compile_available()


@pytest.fixture
def cuda_backend(monkeypatch):
    original = backend_registry._FACTORIES["cuda"]
    backend_registry.register_backend("cuda", _CompileOnlyCuda)
    yield
    backend_registry.register_backend("cuda", original)


@pytest.mark.parametrize("arch", [80, 90])
def test_ahead_of_time_compile(cuda_backend, arch):
    src = ASTSource(scale_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "alpha": "fp32"},
                    constexprs={"BLOCK": 512})
    k = tegula.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": 4})
    for stage in ("tir", "tir_opt", "tgir", "llir", "ptx"):
        assert k.asm[stage], stage
    assert ".entry scale_kernel(" in k.asm["ptx"]
    assert "__nv_expf" not in k.asm["ptx"]
    md = k.metadata
    assert md.num_warps == 4 and md.arg_types == ["ptr<f32>", "ptr<f32>", "i32", "f32"]
    assert md.shared > 0  # the sum across 4 warps goes through shared memory
    if find_ptxas():
        assert k.asm["cubin"][:4] == b"\x7fELF" and md.n_regs > 0


@pytest.mark.parametrize("causal", [False, True])
def test_attention_loop_moves_no_data_through_shared_memory(cuda_backend, causal):
    """The flash-attention example: row statistics (max, sum) and the rescaled
    accumulator stay in the layouts their uses want; only the epilogue converts."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[3] / "examples" / "06_attention_forward.py"
    spec = importlib.util.spec_from_file_location("tegula_cuda_attention_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = module.attention_fwd_kernel.fn  # the JITFunction under the autotuner
    sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "out_ptr": "*fp16", "sm_scale": "fp32",
           "stride_z": "i32", "stride_h": "i32", "stride_n": "i32", "stride_d": "constexpr",
           "H": "i32", "N_CTX": "i32"}
    consts = {"stride_d": 1, "HEAD_DIM": 64, "CAUSAL": causal, "BLOCK_M": 64, "BLOCK_N": 32}
    src = ASTSource(fn, sig, constexprs=consts, attrs={n: 16 for n in sig if n.endswith("_ptr")})
    k = tegula.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    from tegula.backends.cuda.encode_layouts import conversion_kind
    from tegula.ir.ops import Op
    from tegula.ir.parser import parse_ir

    loops = [ins for ins in parse_ir(k.asm["tgir"]).walk() if ins.op is Op.FOR]
    assert loops, "the kernel has its loop"
    in_loop = [ins for loop in loops for ins in loop.regions[0].walk() if ins.op is Op.CONVERT_LAYOUT]
    assert not [ins for ins in in_loop if conversion_kind(ins) == "smem"], in_loop
