"""Random programs of integer tile arithmetic: every fact axis analysis claims must hold
of the concrete values (evaluated here with the op table's numpy functions)."""
from __future__ import annotations

import numpy as np
import pytest

from tegula.ir import attrs as A
from tegula.ir.builder import Builder, new_kernel
from tegula.ir.core import ArgAttrs
from tegula.ir.ops import OP_INFO, Op
from tegula.ir.types import I1, I32, I64, TileType
from tegula.ir.verifier import verify
from tegula.passes import axis_info

N = 32
BINARY = [Op.ADD, Op.SUB, Op.MUL, Op.IDIV, Op.REM, Op.SHL, Op.SHR, Op.AND, Op.OR, Op.XOR,
          Op.MAXIMUM, Op.MINIMUM]
CMPS = [Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE]


def _facts_hold(values: np.ndarray, info) -> bool:
    values = np.asarray(values, dtype=np.int64)
    for d in range(values.ndim):
        moved = np.moveaxis(values, d, -1)
        n = moved.shape[-1]
        k, c, div = info.contiguity[d], info.constancy[d], info.divisibility[d]
        for s in range(0, n, k):
            run = moved[..., s:s + k]
            if not (np.diff(run, axis=-1) == 1).all() or not (run[..., 0] % div == 0).all():
                return False
        for s in range(0, n, c):
            blk = moved[..., s:s + c]
            if not (blk == blk[..., :1]).all():
                return False
    if info.constant is not None and not (values == info.constant).all():
        return False
    return not info.nonnegative or bool((values >= 0).all())


def random_program(seed: int):
    """A kernel over (arg0: i32 {div}, arg1: i32 {div}), the concrete argument values
    and program id, and a reference evaluation of every value."""
    rng = np.random.default_rng(seed)
    divs = [int(rng.choice([1, 2, 16])) for _ in range(2)]
    arg_vals = [int(rng.integers(-20, 20)) * d for d in divs]
    pid = int(rng.integers(0, 9))
    k = new_kernel("fuzz", [I32, I32], ["a0", "a1"])
    k.arg_attrs = [ArgAttrs(d) for d in divs]
    b = Builder(k.body)
    env: dict = {k.args[0]: np.int32(arg_vals[0]), k.args[1]: np.int32(arg_vals[1])}
    tiles: list = []

    def emit(op, operands, attrs=None, type=None):
        v = b.op1(op, *operands, attrs=attrs, type=type)
        ins = v.owner
        if op is Op.CONSTANT:
            env[v] = np.full(v.type.shape, attrs.value, np.int32) if isinstance(v.type, TileType) \
                else np.int32(attrs.value)
        elif op is Op.PROGRAM_ID:
            env[v] = np.int32(pid)
        elif op is Op.ARANGE:
            env[v] = np.arange(attrs.start, attrs.end, dtype=np.int32)
        elif op is Op.SPLAT:
            env[v] = np.full(v.type.shape, env[operands[0]], dtype=env[operands[0]].dtype)
        elif op is Op.CAST:
            env[v] = np.asarray(env[operands[0]]).astype(np.int64 if type.element == I64 else np.int32)
        else:
            kwargs = {"propagate_nan": False} if op in (Op.MAXIMUM, Op.MINIMUM) else {}
            with np.errstate(all="ignore"):
                env[v] = np.asarray(OP_INFO[op].numpy(*[env[o] for o in operands], **kwargs))
        del ins
        return v

    # sources
    start = int(rng.integers(0, 3)) * int(rng.choice([1, 8, 32]))
    tiles.append(emit(Op.ARANGE, [], A.RangeAttrs(start, start + N)))
    scale = emit(Op.CONSTANT, [], A.ConstantAttrs(int(rng.choice([1, 4, 32, 24]))), I32)
    s = emit(Op.MUL, [emit(Op.PROGRAM_ID, [], A.AxisAttrs(0)), scale])
    tiles.append(emit(Op.SPLAT, [s], type=TileType((N,), I32)))
    for a in k.args:
        tiles.append(emit(Op.SPLAT, [a], type=TileType((N,), I32)))
    for _ in range(3):
        lit = int(rng.choice([0, 1, 2, 3, 4, 8, 16, -16, 5]))
        tiles.append(emit(Op.CONSTANT, [], A.ConstantAttrs(lit), TileType((N,), I32)))
    for _ in range(int(rng.integers(4, 12))):
        x, y = (tiles[int(i)] for i in rng.integers(0, len(tiles), 2))
        r = rng.random()
        if r < 0.7:
            op = BINARY[int(rng.integers(0, len(BINARY)))]
            attrs = A.NanAttrs(False) if op in (Op.MAXIMUM, Op.MINIMUM) else None
            if op in (Op.SHL, Op.SHR):  # keep shift amounts in range more often than not
                y = tiles[int(rng.integers(len(tiles) - 3, len(tiles)))] if rng.random() < 0.7 else y
            tiles.append(emit(op, [x, y], attrs))
        elif r < 0.85:
            cmp = CMPS[int(rng.integers(0, len(CMPS)))]
            c = emit(cmp, [x, y], type=TileType((N,), I1))
            z = tiles[int(rng.integers(0, len(tiles)))]
            tiles.append(emit(Op.SELECT, [c, x, z]))
        else:
            wide = emit(Op.CAST, [x], A.CastAttrs(), TileType((N,), I64))
            tiles.append(emit(Op.CAST, [wide], A.CastAttrs(), TileType((N,), I32)))
    b.create(Op.RETURN, [], result_types=[])
    verify(k)
    return k, env


@pytest.mark.parametrize("seed", range(60))
def test_random_programs_satisfy_their_axis_info(seed):
    k, env = random_program(seed)
    info = axis_info(k)
    for v, values in env.items():
        assert _facts_hold(values, info[v]), (seed, v.owner, info[v], values)
