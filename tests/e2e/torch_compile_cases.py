"""torch.compile cases run with `import triton` resolving to tegula; driven by
tests/e2e/test_torch_compile.py as

    python -m tegula.compat tests/e2e/torch_compile_cases.py DEVICE CASE [CASE ...]

Each case compiles a small function, runs it and compares with eager PyTorch; the
script prints one line per case, `CASE <name> ok <seconds>` or `CASE <name> FAIL
<error>`, and goes on with the next. On the CPU, `torch._inductor.config.cpu_backend =
"triton"` makes Inductor generate Triton kernels, which tegula runs (its interpreter, or
its CPU backend with TEGULA_CPU_BACKEND=1).

FlexAttention on CPU tensors: PyTorch 2.13 refuses its backward on the CPU and lowers
its forward to a C++ template that does not write the logsumexp the backward needs.
`_flex_attention_via_triton_on_cpu` lifts both restrictions for this test only, so the
forward and backward run Inductor's Triton templates (on tegula) as they do on GPUs.
"""
from __future__ import annotations

import inspect
import sys
import textwrap
import time
import traceback

import torch
import torch._inductor.config as inductor_config


def _flex_attention_via_triton_on_cpu() -> None:
    import torch._inductor.kernel.flex.flex_attention as lowering
    import torch.nn.attention.flex_attention as fa
    from torch._inductor.lowering import register_lowering

    fa._validate_device = lambda *args: None  # the "no backward on CPU" check
    src = textwrap.dedent(inspect.getsource(lowering.flex_attention))
    src = src[src.index("def flex_attention("):]
    branch = '    if query.get_device().type == "cpu":'
    assert branch in src, "FlexAttention's lowering changed: update the test shim"
    src = src.replace(branch, branch + '\n        kernel_options = {**kernel_options, "OUTPUT_LOGSUMEXP": True}'
                      '\n    if False:', 1)
    ns = dict(vars(lowering))
    exec(compile(src, lowering.__file__, "exec"), ns)
    register_lowering(torch.ops.higher_order.flex_attention, type_promotion_kind=None)(ns["flex_attention"])


def _close(out, ref, tol=1e-4):
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)


def case_eager_backend(dev):
    f = lambda x: torch.sin(x) * 2 + x.sum()  # noqa: E731
    x = torch.randn(16, device=dev)
    _close(torch.compile(f, backend="eager")(x), f(x))


def case_pointwise(dev):
    f = lambda x, y: torch.sigmoid(x) * y + torch.erf(x) - torch.tanh(y) ** 2  # noqa: E731
    x, y = torch.randn(37, 5, device=dev), torch.randn(37, 5, device=dev)
    _close(torch.compile(f)(x, y), f(x, y))


def case_reductions(dev):
    f = lambda x: (x.sum(1), x.mean(0), x.amax(-1))  # noqa: E731
    x = torch.randn(9, 67, device=dev)
    _close(torch.compile(f)(x), f(x))


def case_softmax(dev):
    f = lambda x: torch.softmax(x, -1)  # noqa: E731
    x = torch.randn(6, 129, device=dev)
    _close(torch.compile(f)(x), f(x))


def case_sort(dev):
    """Inductor's bitonic `sort_with_index` over 256 values a row: on the CPU, the
    kernel LLVM's X86 code generator aborted on (host_jit's poison-lane rewrite) and
    whose cheap-op chains, fused into every reader, took 65 s to compile (session 15;
    `tests/backends/cpu/test_fused_chains.py`)."""
    x = torch.randn(37, 256, device=dev)
    x[3, 7] = x[3, 9]  # a tie: the stable sort keeps the first index first
    got = torch.compile(lambda t: torch.sort(t, dim=-1, stable=True))(x)
    want = torch.sort(x, dim=-1, stable=True)
    assert torch.equal(got.values, want.values) and torch.equal(got.indices, want.indices)


def case_layer_norm(dev):
    ln = torch.nn.LayerNorm(48).to(dev)
    x = torch.randn(5, 48, device=dev)
    _close(torch.compile(ln)(x), ln(x))


def case_mlp_forward_backward(dev):
    m = torch.nn.Sequential(torch.nn.Linear(24, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).to(dev)
    x = torch.randn(16, 24, device=dev)

    def step(x):
        loss = m(x).pow(2).mean()
        return (loss, *torch.autograd.grad(loss, list(m.parameters())))

    _close(torch.compile(step)(x), step(x))


def case_flex_attention(dev):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    if dev == "cpu":
        _flex_attention_via_triton_on_cpu()
    B, H, S, D = 1, 2, 128, 16
    q, k, v = (torch.randn(B, H, S, D, device=dev, requires_grad=True) for _ in range(3))
    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, S, S, device=dev)

    def causal_score(score, b, h, qi, ki):
        return torch.where(qi >= ki, score, -float("inf"))

    def attend(q, k, v):
        out = flex_attention(q, k, v, score_mod=causal_score, block_mask=mask)
        return (out, *torch.autograd.grad(out.sum(), (q, k, v)))

    def reference(q, k, v):
        s = (q @ k.transpose(-1, -2)) / D ** 0.5
        s = s.masked_fill(~torch.ones(S, S, dtype=torch.bool, device=dev).tril(), -float("inf"))
        out = torch.softmax(s, -1) @ v
        return (out, *torch.autograd.grad(out.sum(), (q, k, v)))

    _close(torch.compile(attend)(q, k, v), reference(q, k, v), tol=2e-4 if dev == "cpu" else 2e-2)


def case_compile_workers(dev):
    """Inductor's compile workers (separate processes) compile the kernels and send them
    back pickled: they must resolve `triton` to tegula, and JITFunctions and
    CompiledKernels must cross the pickle."""
    from torch._inductor.async_compile import AsyncCompile

    with inductor_config.patch(compile_threads=2):
        AsyncCompile.use_process_pool()
        AsyncCompile._ready_future.result(timeout=300)
        assert AsyncCompile.use_process_pool(), "the worker pool did not start"
        f = lambda x: torch.cos(x) * torch.exp(-x * x) + x.mean()  # noqa: E731
        x = torch.randn(21, 13, device=dev)
        _close(torch.compile(f)(x), f(x))


def case_cuda_ahead_of_time(dev):
    """The kernels Inductor generated (softmax, layer norm, a pointwise chain) also
    compile for NVIDIA GPUs (sm_90 and sm_80) with tegula's CUDA backend, no GPU needed."""
    import triton
    from triton.backends.compiler import GPUTarget

    compiled = []
    original = triton.compile

    def recording_compile(src, target=None, options=None, **kwargs):
        compiled.append((src, options))
        return original(src, target=target, options=options, **kwargs)

    triton.compile = recording_compile
    try:  # compiled in this process (not in workers), not taken from a cache
        with inductor_config.patch(compile_threads=1, force_disable_caches=True):
            torch.compile(lambda x: torch.softmax(x, -1))(torch.randn(6, 129, device=dev))
            torch.compile(torch.nn.LayerNorm(40).to(dev))(torch.randn(3, 40, device=dev))
            torch.compile(lambda x: torch.tanh(x) * torch.sigmoid(x + 2))(torch.randn(77, device=dev))
    finally:
        triton.compile = original
    assert len(compiled) >= 3, compiled
    for src, options in compiled:
        for arch in (90, 80):
            kernel = original(src, target=GPUTarget("cuda", arch, 32), options=options)
            assert f".entry {src.name}" in kernel.asm["ptx"], (src.name, arch)


def case_user_kernel(dev):
    """A @triton.jit kernel launched inside a compiled function (Dynamo wraps it)."""
    import triton
    import triton.language as tl

    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)

    def f(x):
        out = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), 3.0, BLOCK=64)
        return out + 1

    x = torch.randn(100, device=dev)
    _close(torch.compile(f, fullgraph=True)(x), x * 3 + 1)


def case_user_kernel_mutation_analysis(dev):
    """PyTorch's analysis of which arguments a user kernel writes (it clones those for
    functionalization) gets tegula's exact answer, not "every input"."""
    import torch._higher_order_ops.triton_kernel_wrap as wrap
    import triton
    import triton.language as tl

    @triton.jit
    def axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, alpha * x + y, mask=mask)

    t = [torch.empty(64, device=dev) for _ in range(3)]
    kwargs = {"x_ptr": t[0], "y_ptr": t[1], "out_ptr": t[2], "n": 64, "alpha": 2.0, "BLOCK": 16}
    if hasattr(wrap, "identify_accessed_tensors"):  # torch >= 2.13: reads and writes
        accesses = wrap.identify_accessed_tensors(axpy, kwargs, {})
        writes = sorted(d.name for d in accesses.read_writes.writes)
        reads = sorted(d.name for d in accesses.read_writes.reads)
        assert writes == ["out_ptr"] and reads == ["x_ptr", "y_ptr"], (writes, reads)
    else:  # older torch asks for the written arguments only
        import inspect

        extra = [{}] * (len(inspect.signature(wrap.identify_mutated_tensors).parameters) - 2)
        writes = sorted(wrap.identify_mutated_tensors(axpy, kwargs, *extra))
        assert writes == ["out_ptr"], writes


def main(argv: list[str]) -> int:
    dev, names = argv[0], argv[1:]
    inductor_config.cpu_backend = "triton"
    torch.manual_seed(0)
    for name in names:
        t0 = time.perf_counter()
        try:
            globals()[f"case_{name}"](dev)
        except Exception as e:  # report and go on with the next case
            detail = traceback.format_exc().strip().splitlines()[-1]
            print(f"CASE {name} FAIL {type(e).__name__}: {detail}", flush=True)
            traceback.print_exc()
            continue
        print(f"CASE {name} ok {time.perf_counter() - t0:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
