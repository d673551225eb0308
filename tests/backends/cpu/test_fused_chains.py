"""How far the CPU backend fuses chains of cheap elementwise ops into their users: a
value each user recomputes is stored once when its chain grows past `_FUSED_OPS` ops
and several users read it. Inductor's bitonic sort reads each stage's swap condition
(~30 cheap ops over the stage's sums) twice and each stage's values in the next: fused
all the way, its kernel over 256 values lowered to 87k element ops and spent 38 s in
LLVM (8.8 s for the whole compile now)."""
import importlib

import numpy as np

import tegula
import tegula.language as tl

# the module (the package exports its `lower` function under the same name)
cpu_lower = importlib.import_module("tegula.backends.cpu.lower")


@tegula.jit
def three_reductions_of_a_chain(x_ptr, out_ptr, N: tl.constexpr, OPS: tl.constexpr):
    """v: OPS cheap ops on x (each reads the last and x), read by three reductions."""
    x = tl.load(x_ptr + tl.arange(0, N))
    v = x
    for k in tl.static_range(OPS):
        v = (v ^ x) + k
    tl.store(out_ptr, tl.sum(v, 0))
    tl.store(out_ptr + 1, tl.max(v, 0))
    tl.store(out_ptr + 2, tl.sum(v * v, 0))


def _run(ops: int, x: np.ndarray) -> str:
    out = np.zeros(3, np.int64)
    three_reductions_of_a_chain.clear_cache()  # compiled again under the current limit
    compiled = three_reductions_of_a_chain[(1,)](x, out, N=x.size, OPS=ops)
    v = x.copy()
    for k in range(ops):
        v = (v ^ x) + k
    np.testing.assert_array_equal(out, [v.sum(), v.max(), (v * v).sum()])
    return compiled.asm["llir"]


def test_a_long_chain_with_several_users_is_computed_once(cpu, monkeypatch):
    monkeypatch.setenv("TEGULA_ALWAYS_COMPILE", "1")
    x = np.random.default_rng(5).integers(0, 1 << 20, 64).astype(np.int64)
    ops = 2 * cpu_lower._FUSED_OPS
    # each xor emitted once (stored by the first user), not once per user (the module
    # has a couple of xors of its own: bf16 rounding)
    assert ops <= _run(ops, x).count(" = xor ") < ops + 8
    monkeypatch.setattr(cpu_lower, "_FUSED_OPS", 10 ** 9)  # fused into each of the three reductions
    assert _run(ops, x).count(" = xor ") > 2 * ops


def test_short_chains_stay_fused(cpu, monkeypatch):
    """Below the limit the code is what it was without one."""
    monkeypatch.setenv("TEGULA_ALWAYS_COMPILE", "1")
    x = np.arange(64, dtype=np.int64)
    limited = _run(4, x)
    monkeypatch.setattr(cpu_lower, "_FUSED_OPS", 10 ** 9)
    assert _run(4, x) == limited
