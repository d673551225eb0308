"""Sample kernels for the IR tests, built with `ir.builder.Builder`: one that uses every
op (with attributes, regions, multi-results, pointers, tiles, fp8/bf16), and a small one
for golden text."""
from __future__ import annotations

from tegula.backends.cuda.encodings import BlockedEncoding  # registers the CUDA encodings' text forms
from tegula.ir import attrs as A
from tegula.ir.builder import Builder, new_kernel
from tegula.ir.core import ArgAttrs, Block, Kernel, Loc, Value
from tegula.ir.ops import Op
from tegula.ir.types import (
    BF16,
    F8E4M3,
    F8E5M2,
    F16,
    F32,
    I1,
    I32,
    I64,
    U32,
    BlockPtrType,
    PointerType,
    SmemType,
    TensorDescType,
    TileType,
)

SRC = "/tmp/tegula_samples/kernel.py"


def tile(elem, *shape):
    return TileType(tuple(shape), elem)


def build_for(b: Builder, lb: Value, ub: Value, step: Value, inits: list[Value], body_fn,
              attrs=None) -> list[Value]:
    """A `for` whose body is produced by `body_fn(b, iv, iters) -> yielded values`."""
    body = Block()
    iv = body.add_arg(lb.type)
    iters = [body.add_arg(v.type) for v in inits]
    ins = b.create(Op.FOR, [lb, ub, step, *inits], attrs=attrs, regions=[body])
    with b.at_end_of(body):
        b.yield_(body_fn(b, iv, iters))
    return ins.results


def build_small_kernel() -> Kernel:
    """out[i] = x[i] + y[i] for one 128-wide block, the add kernel of the docs."""
    k = new_kernel("add_kernel", [PointerType(F32), PointerType(F32), PointerType(F32), I32],
                   ["x_ptr", "y_ptr", "out_ptr", "n"])
    k.arg_attrs = [ArgAttrs(16), ArgAttrs(16), ArgAttrs(16), ArgAttrs()]
    x, y, out, n = k.args
    b = Builder(k.body)
    pid = b.op1(Op.PROGRAM_ID, attrs=A.AxisAttrs(0))
    block = b.constant(128, I32)
    start = b.op1(Op.MUL, pid, block)
    offs = b.op1(Op.ADD, b.splat(start, (128,)), b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 128)))
    mask = b.op1(Op.LT, offs, b.splat(n, (128,)))
    vals = []
    for p in (x, y):
        ptrs = b.op1(Op.ADDPTR, b.splat(p, (128,)), offs)
        vals.append(b.op1(Op.LOAD, ptrs, mask, attrs=A.LoadAttrs(has_mask=True)))
    total = b.op1(Op.ADD, *vals)
    optrs = b.op1(Op.ADDPTR, b.splat(out, (128,)), offs)
    b.create(Op.STORE, [optrs, total, mask], attrs=A.StoreAttrs(has_mask=True))
    b.create(Op.RETURN, [])
    return k


def _combine_region(elem_types, body_fn) -> Block:
    region = Block()
    args = [region.add_arg(t) for t in list(elem_types) * 2]
    b = Builder(region)
    b.yield_(body_fn(b, args))
    return region


def _tma_ops(b: Builder, desc: Value, slot: Value, pid: Value, n: Value, col: Value) -> None:
    """TMA copies of a descriptor's block (transposed) into a two-slot ring, on mbarriers, a
    warp-specialized loop's hand-over ops: a warp role, one arrival per warp on an
    `empty` mbarrier of four arrivals, and a TMA store through its own buffer (tgir)."""
    tring = b.op1(Op.LOCAL_ALLOC, type=SmemType((2, 16, 8), F32))
    tring.owner.smem = (1024, 1024)
    bars = b.op1(Op.LOCAL_ALLOC, type=SmemType((2, 1), I64))
    bars.owner.smem = (2048, 16)
    b.create(Op.MBARRIER_INIT, [bars])
    b.create(Op.TMA_LOAD, [tring, slot, bars, b.op1(Op.LT, pid, n), desc, pid, col], A.TmaLoadAttrs(True))
    b.create(Op.MBARRIER_WAIT, [bars, slot, col])
    b.op1(Op.LOCAL_LOAD, tring, slot)
    empty = b.op1(Op.LOCAL_ALLOC, type=SmemType((2, 1), I64))
    empty.owner.smem = (2176, 16)
    b.create(Op.MBARRIER_INIT, [empty], A.MbarrierInitAttrs(count=4))
    b.op1(Op.WARP_ROLE, attrs=A.WarpRoleAttrs(4, 40, 232))
    b.create(Op.WARPGROUP_TURN, [], A.WarpgroupTurnAttrs("wait", 2, 2))
    b.create(Op.MBARRIER_ARRIVE, [empty, slot])
    b.create(Op.MBARRIER_INVAL, [empty])
    b.create(Op.LOCAL_DEALLOC, [empty])
    b.create(Op.MBARRIER_INVAL, [bars])
    b.create(Op.LOCAL_DEALLOC, [bars])
    b.create(Op.LOCAL_DEALLOC, [tring])
    # a store through a buffer of its own, and the wait for the copy engine's read
    staging = b.op1(Op.LOCAL_ALLOC, type=SmemType((1, 8, 16), F32))
    staging.owner.smem = (3072, 512)
    blk = b.op1(Op.DESCRIPTOR_LOAD, desc, pid, col)
    b.create(Op.TMA_STORE, [staging, desc, pid, col, blk])
    b.create(Op.BULK_WAIT, [], A.AsyncWaitAttrs(0))
    b.create(Op.LOCAL_DEALLOC, [staging])


def build_all_ops_kernel(tma: bool = True, inline_asm: bool = True) -> Kernel:
    """A valid kernel that contains every op of the table at least once (but the TMA
    ops, which only sm_90 has, when `tma` is False, and the inline PTX, which only a GPU
    runs, when `inline_asm` is False)."""
    k = new_kernel("all_ops", [PointerType(F32), PointerType(BF16), PointerType(F8E4M3), I32, F32,
                               PointerType(F16, 3)],
                   ["x", "y", "z", "n", "alpha", "smem"], loc=Loc(SRC, 1, 0))
    k.arg_attrs = [ArgAttrs(16), ArgAttrs(), ArgAttrs(8), ArgAttrs(), ArgAttrs(), ArgAttrs()]
    x, y, z, n, alpha, _smem = k.args
    b = Builder(k.body)
    b.loc = Loc(SRC, 3, 4, 30)
    pid = b.op1(Op.PROGRAM_ID, attrs=A.AxisAttrs(0))
    b.op1(Op.NUM_PROGRAMS, attrs=A.AxisAttrs(1))
    b.op1(Op.SMID)
    b.op1(Op.GLOBALTIMER)
    offs = b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 128))
    start = b.op1(Op.MUL, pid, b.constant(128, I32))
    idx = b.op1(Op.ADD, b.splat(start, (128,)), offs)
    mask = b.op1(Op.LT, idx, b.splat(n, (128,)))
    b.loc = Loc(SRC, 5, 8)
    xp = b.op1(Op.ADDPTR, b.splat(x, (128,)), idx)
    other = b.constant(0.0, tile(F32, 128))
    xv = b.op1(Op.LOAD, xp, mask, other,
               attrs=A.LoadAttrs(True, True, ".cg", "evict_last", False))
    # a two-slot shared-memory ring (tgir): copy the masked tile into slot 1, read it back
    ring = b.op1(Op.LOCAL_ALLOC, type=SmemType((2, 128), F32))
    ring.owner.smem = (0, 1024)  # its placement, as the CUDA backend's allocator writes it
    slot = b.constant(1, I32)
    b.create(Op.ASYNC_COPY, [ring, slot, xp, mask], A.AsyncCopyAttrs(True))
    b.create(Op.ASYNC_COMMIT, [])
    b.create(Op.ASYNC_WAIT, [], A.AsyncWaitAttrs(0))
    b.create(Op.BARRIER, [])
    # slot 1 copied to slot 0 (tgir; the CUDA backend's transposing copy) and read there
    b.create(Op.LOCAL_COPY, [ring, slot, ring, b.constant(0, I32)])
    # the loaded tile written from registers into slot 1 (tgir; `stage_registers`): the
    # same values the copy put there
    b.create(Op.LOCAL_STORE, [ring, slot, xv])
    staged = b.op1(Op.LOCAL_LOAD, ring, b.constant(0, I32))
    b.create(Op.LOCAL_DEALLOC, [ring])
    # an explicit layout conversion (tgir) there and back
    moved = b.op1(Op.CONVERT_LAYOUT, staged, type=TileType((128,), F32, BlockedEncoding((4,), (32,), (4,), (0,))))
    staged = b.op1(Op.CONVERT_LAYOUT, moved, type=tile(F32, 128))
    # unary float chain
    v = b.op1(Op.ADD, xv, staged)
    for op in (Op.NEG, Op.ABS, Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.SIN, Op.COS, Op.SQRT,
               Op.SQRT_RN, Op.RSQRT, Op.ERF, Op.CEIL, Op.FLOOR):
        v = b.op1(op, v)
    for op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.REM):
        v = b.op1(op, v, xv)
    v = b.op1(Op.FDIV, v, xv, attrs=A.FDivAttrs(True))
    v = b.op1(Op.MAXIMUM, v, xv, attrs=A.NanAttrs(True))
    v = b.op1(Op.MINIMUM, v, xv, attrs=A.NanAttrs(False))
    v = b.op1(Op.FMA, v, xv, b.splat(alpha, (128,)))
    # integer ops
    w = idx
    for op in (Op.IDIV, Op.REM, Op.AND, Op.OR, Op.XOR, Op.SHL, Op.SHR):
        w = b.op1(op, w, idx)
    w = b.op1(Op.NOT, w)
    uw = b.cast(w, U32)
    b.op1(Op.UMULHI, uw, uw)
    # a library function: int32 popcount of a uint32 tile (its own signature)
    b.op1(Op.EXTERN_ELEMENTWISE, uw, attrs=A.ExternAttrs("__nv_popc"), type=tile(I32, 128))
    if inline_asm:
        # inline PTX whose text holds quotes, a newline and a brace (the printer escapes them)
        b.op1(Op.INLINE_ASM, uw, attrs=A.InlineAsmAttrs("{ // 'x'\n popc.b32 $0, $1; }", "=r,r", 1, True, ("i32",)),
              type=tile(I32, 128))
    cmps = [b.op1(op, idx, w) for op in (Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE)]
    v = b.op1(Op.SELECT, cmps[2], v, xv)
    # conversions, incl. bf16 and fp8
    yp = b.op1(Op.ADDPTR, b.splat(y, (128,)), idx)
    yv = b.op1(Op.LOAD, yp, attrs=A.LoadAttrs())
    v = b.op1(Op.ADD, v, b.cast(yv, F32))
    bits = b.op1(Op.BITCAST, v, type=tile(I32, 128))
    ints = b.op1(Op.PTR_TO_INT, xp, type=tile(I64, 128))
    b.op1(Op.INT_TO_PTR, ints, type=tile(PointerType(F32), 128))
    f8 = b.cast(v, F8E4M3, rounding="rtz")
    zp = b.op1(Op.ADDPTR, b.splat(z, (128,)), bits)
    b.create(Op.STORE, [zp, f8, mask], attrs=A.StoreAttrs(True, ".wb", "evict_first"))
    # atomics (the old values are results)
    b.op1(Op.ATOMIC_RMW, xp, v, mask, attrs=A.AtomicAttrs("fadd", True, "relaxed", "cta"))
    ip = b.op1(Op.BITCAST, xp, type=tile(PointerType(I32), 128))
    b.op1(Op.ATOMIC_CAS, ip, idx, idx, attrs=A.AtomicCasAttrs("acquire", "sys"))
    # tensor descriptors: a 2-D view of x, a block load, a store and an atomic update of it
    col = b.constant(0, I32)
    desc = b.op1(Op.MAKE_TENSOR_DESCRIPTOR, x, n, n, b.constant(64, I64), b.constant(1, I64),
                 type=TensorDescType((8, 16), F32))
    blk = b.op1(Op.DESCRIPTOR_LOAD, desc, pid, col)
    b.create(Op.DESCRIPTOR_STORE, [desc, pid, col, blk])
    b.create(Op.DESCRIPTOR_REDUCE, [desc, pid, col, blk], A.DescriptorReduceAttrs("add"))
    if tma:
        _tma_ops(b, desc, slot, pid, n, col)
    # block pointers: an 8x16 window of x advanced by a row, loaded (dim 1 checked, NaN
    # padding) and stored back (both dims checked)
    n64 = b.cast(n, I64)
    bp = b.op1(Op.MAKE_BLOCK_PTR, x, n64, n64, b.constant(64, I64), b.constant(1, I64), pid, col,
               type=BlockPtrType((8, 16), F32, (1, 0)))
    bp = b.op1(Op.ADVANCE, bp, b.constant(1, I32), col)
    bblk = b.op1(Op.BLOCK_LOAD, bp, attrs=A.BlockLoadAttrs((1,), "nan", ".ca", "evict_first"))
    b.create(Op.BLOCK_STORE, [bp, bblk], A.BlockStoreAttrs((0, 1)))
    # shape ops
    row = b.op1(Op.EXPAND_DIMS, v, attrs=A.ExpandDimsAttrs(0))            # 1x128
    wide = b.broadcast(row, (4, 128))                                      # 4x128
    flat = b.op1(Op.RESHAPE, wide, attrs=A.ShapeAttrs((512,), True))
    b.op1(Op.PERMUTE, wide, attrs=A.PermuteAttrs((1, 0)))
    pair = b.op1(Op.JOIN, v, xv)
    lo, hi = b.create(Op.SPLIT, [pair]).results
    # a gather along the 128 positions of a row, at the positions in `offs` reversed
    rev = b.op1(Op.EXPAND_DIMS, b.op1(Op.SUB, b.splat(b.constant(127, I32), (128,)), offs),
                attrs=A.ExpandDimsAttrs(0))
    b.op1(Op.GATHER, row, rev, attrs=A.GatherAttrs(1))
    # reductions and scans (one with two operands and two results)
    total = b.create(Op.REDUCE, [flat], A.ReduceAttrs(0),
                     regions=[_combine_region([F32], lambda rb, a: [rb.op1(Op.ADD, a[0], a[1])])]).result

    def argmax(rb, a):
        gt = rb.op1(Op.GT, a[2], a[0])
        return [rb.op1(Op.SELECT, gt, a[2], a[0]), rb.op1(Op.SELECT, gt, a[3], a[1])]
    best = b.create(Op.REDUCE, [lo, idx], A.ReduceAttrs(-1),
                    regions=[_combine_region([F32, I32], argmax)]).results
    b.create(Op.SCAN, [hi], A.ScanAttrs(0, reverse=True),
             regions=[_combine_region([F32], lambda rb, a: [rb.op1(Op.MUL, a[0], a[1])])])
    # dots, one on fp8 operands
    a16 = b.constant(1.0, tile(F16, 16, 32))
    b16 = b.constant(0.5, tile(F16, 32, 16))
    acc = b.constant(0.0, tile(F32, 16, 16))
    acc = b.create(Op.DOT, [a16, b16, acc], A.DotAttrs("tf32", 32)).result
    e4 = b.constant(2.0, tile(F8E4M3, 16, 32))
    e5 = b.constant(-1.5, tile(F8E5M2, 32, 16))
    acc = b.create(Op.DOT, [e4, e5, acc], A.DotAttrs()).result
    acc = b.op1(Op.DOT_WAIT, acc, attrs=A.AsyncWaitAttrs(0))
    # structured control flow
    zero, one = b.constant(0, I32), b.constant(1, I32)

    def loop_body(lb, iv, iters):
        s = lb.op1(Op.ADD, iters[0], total)
        cond = lb.op1(Op.LT, iv, n)
        ifi = lb.create(Op.IF, [cond], result_types=[F32], regions=[Block(), Block()])
        with lb.at_end_of(ifi.regions[0]):
            lb.yield_([s])
        with lb.at_end_of(ifi.regions[1]):
            lb.yield_([iters[0]])
        return [ifi.result, iters[1]]
    fsum, facc = build_for(b, zero, n, one, [best[0], acc], loop_body,
                           attrs=A.LoopAttrs(num_stages=2, warp_specialize=True))
    before, after = Block(), Block()
    bi = before.add_arg(I32)
    bf = before.add_arg(F32)
    wl = b.create(Op.WHILE, [zero, fsum], result_types=[I32, F32], regions=[before, after])
    with b.at_end_of(before):
        c = b.op1(Op.LT, bi, n)
        b.create(Op.CONDITION, [c, bi, bf])
    ai, af = after.add_arg(I32), after.add_arg(F32)
    with b.at_end_of(after):
        b.yield_([b.op1(Op.ADD, ai, one), af])
    # an if without results
    flag = b.op1(Op.GT, wl.results[0], zero)
    b.create(Op.IF, [flag], result_types=[], regions=[Block(), Block()])
    with b.at_end_of(b.block.instrs[-1].regions[0]):
        b.create(Op.DEBUG_BARRIER, [])
        b.create(Op.GDC_WAIT, [])
        b.create(Op.GDC_LAUNCH_DEPENDENTS, [])
        b.yield_([])
    with b.at_end_of(b.block.instrs[-1].regions[1]):
        b.yield_([])
    # meta ops
    b.create(Op.DEVICE_PRINT, [wl.results[1], facc], A.PrintAttrs("acc = \"x\"\n", hex=True))
    b.create(Op.DEVICE_ASSERT, [mask], A.AssertAttrs("index out of range: 'n'"))
    b.create(Op.ASSUME, [flag])
    b.op1(Op.HINT, idx, attrs=A.HintAttrs("multiple_of", (16,)))
    b.op1(Op.CONSTANT, attrs=A.ConstantAttrs(True), type=I1)
    b.op1(Op.CONSTANT, attrs=A.ConstantAttrs(float("-inf")), type=F32)
    b.op1(Op.CONSTANT, attrs=A.ConstantAttrs(float("nan")), type=BF16)
    b.op1(Op.CONSTANT, attrs=A.ConstantAttrs(-0.0), type=F32)
    b.create(Op.RETURN, [])
    return k
