"""`tl.rand`, `tl.randint`, `tl.randn` and friends: the counter-based Philox 4x32 (or
4x64) generator, unrolled at compile time into integer IR ops.

The constants, the round function and the int -> float conversions are Triton's, so a
kernel draws the same numbers for the same (seed, offset) as it does under Triton.
"""
from __future__ import annotations

from . import dtypes as T
from .constexpr import unwrap_constexpr
from .core import PropagateNan, builtin

U = unwrap_constexpr
N_ROUNDS_DEFAULT = 10

# (key increment A, key increment B, round multiplier A, round multiplier B) per width
_PHILOX = {
    32: (0x9E3779B9, 0xBB67AE85, 0xD2511F53, 0xCD9E8D57),
    64: (0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B, 0xD2E7470EE14C6C93, 0xCA5A826395121157),
}


def _philox_rounds(sem, c0, c1, c2, c3, k0, k1, n_rounds: int):
    if c0.dtype not in (T.uint32, T.uint64):
        raise TypeError(f"philox_impl needs uint32 or uint64 counters, got {c0.dtype}")
    key_a, key_b, round_a, round_b = _PHILOX[c0.dtype.primitive_bitwidth]
    for _ in range(n_rounds):
        old_c0, old_c2 = c0, c2
        c0 = sem.xor_(sem.xor_(sem.umulhi(sem.to_tensor(round_b), old_c2), c1), k0)
        c2 = sem.xor_(sem.xor_(sem.umulhi(sem.to_tensor(round_a), old_c0), c3), k1)
        c1 = sem.mul(round_b, old_c2, sanitize_overflow=False)
        c3 = sem.mul(round_a, old_c0, sanitize_overflow=False)
        k0 = sem.add(k0, key_a, sanitize_overflow=False)
        k1 = sem.add(k1, key_b, sanitize_overflow=False)
    return c0, c1, c2, c3


@builtin
def philox_impl(sem, c0, c1, c2, c3, k0, k1, n_rounds=N_ROUNDS_DEFAULT):
    """`n_rounds` Philox rounds over counters (c0..c3) with key (k0, k1)."""
    args = [sem.to_tensor(U(a)) for a in (c0, c1, c2, c3, k0, k1)]
    return _philox_rounds(sem, *args, int(U(n_rounds)))


@builtin
def philox(sem, seed, c0, c1, c2, c3, n_rounds=N_ROUNDS_DEFAULT):
    """Philox of counters (c0..c3) keyed by the integer `seed`."""
    seed = sem.to_tensor(U(seed))
    if not seed.dtype.is_int():
        raise TypeError(f"philox's seed must be an integer, got {seed.dtype}")
    seed = sem.cast(seed, T.uint64)
    cs = [sem.to_tensor(U(c)) for c in (c0, c1, c2, c3)]
    width = cs[0].dtype.primitive_bitwidth
    if width == 32:
        int_dtype = T.uint32
        seed_hi = sem.cast(sem.and_(sem.rshift(seed, 32, False), 0xFFFFFFFF), T.uint32)
        seed_lo = sem.cast(sem.and_(seed, 0xFFFFFFFF), T.uint32)
    elif width == 64:
        int_dtype = T.uint64
        seed_hi, seed_lo = sem.scalar_constant(0, T.uint64), seed
    else:
        raise TypeError(f"philox supports 32- or 64-bit counters, got {cs[0].dtype}")
    cs = [sem.bitcast(c, int_dtype) for c in cs]
    return _philox_rounds(sem, *cs, seed_lo, seed_hi, int(U(n_rounds)))


def _randint4x(sem, seed, offset, n_rounds):
    offset = sem.to_tensor(U(offset))
    offset_lo = sem.cast(offset, T.uint32)
    zero = sem.mul(offset_lo, 0)
    if offset.dtype.primitive_bitwidth > 32:
        offset_hi = sem.cast(sem.rshift(offset, 32, offset.dtype.is_int_signed()), T.uint32)
    else:
        offset_hi = zero
    return philox.impl(sem, seed, offset_lo, offset_hi, zero, zero, n_rounds)


def _to_uniform(sem, x):
    if x.dtype in (T.uint32, T.int32):
        x, scale = sem.bitcast(x, T.int32), 4.6566127342e-10
    elif x.dtype in (T.uint64, T.int64):
        x, scale = sem.bitcast(x, T.int64), 1.0842020432385337e-19
    else:
        raise TypeError(f"uint_to_uniform_float needs a 32- or 64-bit integer, got {x.dtype}")
    x = sem.where(sem.less_than(x, 0), sem.sub(sem.minus(x), 1), x)
    return sem.mul(x, scale)


def _box_muller(sem, u1, u2):
    from .math import cos, log, sin, sqrt

    u1 = sem.maximum(sem.to_tensor(1.0e-7), u1, PropagateNan.NONE)
    th = sem.mul(6.283185307179586, u2)
    r = sqrt.impl(sem, sem.mul(-2.0, log.impl(sem, u1)))
    return sem.mul(r, cos.impl(sem, th)), sem.mul(r, sin.impl(sem, th))


@builtin
def randint4x(sem, seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """Four blocks of random uint32 for the `offset` block."""
    return _randint4x(sem, seed, offset, n_rounds)


@builtin
def randint(sem, seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """A block of random uint32 for the `offset` block."""
    return _randint4x(sem, seed, offset, n_rounds)[0]


@builtin
def uint_to_uniform_float(sem, x):
    """A random integer mapped to a float uniformly distributed in [0, 1)."""
    return _to_uniform(sem, sem.to_tensor(U(x)))


@builtin
def rand(sem, seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """A block of random float32 uniform in [0, 1)."""
    return _to_uniform(sem, _randint4x(sem, seed, offset, n_rounds)[0])


@builtin
def rand4x(sem, seed, offsets, n_rounds=N_ROUNDS_DEFAULT):
    """Four blocks of random float32 uniform in [0, 1)."""
    return tuple(_to_uniform(sem, i) for i in _randint4x(sem, seed, offsets, n_rounds))


@builtin
def pair_uniform_to_normal(sem, u1, u2):
    """Box-Muller: two uniform blocks -> two standard normal blocks."""
    return _box_muller(sem, sem.to_tensor(U(u1)), sem.to_tensor(U(u2)))


@builtin
def randn(sem, seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """A block of random float32 from N(0, 1)."""
    i1, i2, _, _ = _randint4x(sem, seed, offset, n_rounds)
    return _box_muller(sem, _to_uniform(sem, i1), _to_uniform(sem, i2))[0]


@builtin
def randn4x(sem, seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """Four blocks of random float32 from N(0, 1)."""
    u1, u2, u3, u4 = (_to_uniform(sem, i) for i in _randint4x(sem, seed, offset, n_rounds))
    n1, n2 = _box_muller(sem, u1, u2)
    n3, n4 = _box_muller(sem, u3, u4)
    return n1, n2, n3, n4
