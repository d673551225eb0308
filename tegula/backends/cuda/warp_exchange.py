"""Layout conversions inside a warp through shuffles, when every warp holds the same
elements in both layouts: no shared memory, no CTA barrier.

The case that needs it: attention's P in fp8 feeds the second dot as wgmma's register
A operand, whose fragment packs four consecutive k in a register (`k_width` 4), while
the first dot's accumulator gives each thread pairs of consecutive columns. Through
shared memory that conversion cost a store, a barrier and a load in every iteration of
the fp8 forward (and kept the two warpgroups in lockstep). Here each thread instead
packs its elements into 32-bit words, fetches the (at most two) words its destination
word draws from with `shfl.sync.idx`, and picks its bytes with one `prmt`.

`plan_exchange` decides, from the two `LinearLayout`s alone, whether and how:
- the warp bases agree (each warp's elements are the same set), so every element a
  thread needs is in a register of a lane of its own warp;
- destination registers are grouped `P` to a 32-bit word (P = 32 / element bits) and the
  source registers any destination word draws from — over all lanes — form one source
  word of at most P registers (words of different destination words equal or disjoint),
  so every sender sends the same word for a given destination word;
- a destination word draws from at most two lanes, and which lane, as a function of the
  receiving lane, is XOR-affine (computed with a few selects on lane bits);
- the byte selector of the `prmt` depends on at most three lane bits.
32-bit elements (one a word) need no common source word: a destination register draws
on each lane from one register of one lane, and `_plan_picks` covers those pairs with
at most two shuffles, each sender choosing the register it sends (a select on its lane
bits) and each receiver the shuffle it keeps. mma.sync's tf32 A fragment from an
accumulator is such a case: lanes 2q and 2q+1 read the same sender for its two
registers (fla's in-register triangular solves chain 16x16 tf32 dots this way).
Where any of that fails the conversion goes through shared memory as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Optional

import llvmlite.ir as ir

from ..llvm.types import I32, byte_size
from .linear_layout import LinearLayout, rank_of, solve

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

LANES = 32
MAX_SOURCES = 2        # shuffles per destination word
MAX_SELECTOR_BITS = 3  # lane bits the byte selector may depend on
_OWN_LANE = tuple(range(LANES))


@dataclass(frozen=True)
class WordPlan:
    """How one destination word is assembled."""
    source_word: int                  # index into Exchange.source_words
    lanes: tuple[tuple[int, ...], ...]  # per shuffle q: the source lane for each receiving lane
    selector: tuple[int, ...]          # per receiving lane: the prmt selector (nibble p = byte p's source)


@dataclass(frozen=True)
class Fetch:
    """One `shfl.sync.idx` of a 32-bit destination register: sending lane u sends its
    source register `sent[u]`; receiving lane l reads lane `lanes[l]`."""
    sent: tuple[int, ...]
    lanes: tuple[int, ...]


@dataclass(frozen=True)
class PickPlan:
    """A 32-bit destination register: its fetches, and per receiving lane the index of
    the fetch that brings its element."""
    fetches: tuple[Fetch, ...]
    pick: tuple[int, ...]


@dataclass(frozen=True)
class Exchange:
    per_word: int                                 # elements in a 32-bit word (P)
    source_words: tuple[tuple[int, ...], ...]     # source registers packed in each word
    words: tuple[WordPlan, ...]                   # one per destination word
    picks: tuple[PickPlan, ...] = ()              # per destination register, for 32-bit elements (P = 1)


def _lane_part(lay: LinearLayout, lane: int) -> int:
    out = 0
    for i, b in enumerate(lay.lane):
        if lane >> i & 1:
            out ^= b
    return out


def _is_affine(values: tuple[int, ...]) -> bool:
    """Whether lane → value is c XOR (a linear function of the lane bits)."""
    c = values[0]
    return all(values[lane] == c ^ _xor_of(values, c, lane) for lane in range(LANES))


def _xor_of(values: tuple[int, ...], c: int, lane: int) -> int:
    out = 0
    for i in range(5):
        if lane >> i & 1:
            out ^= values[1 << i] ^ c
    return out


def _depends_on(values: tuple[int, ...]) -> list[int]:
    return [i for i in range(5) if any(values[lane] != values[lane ^ (1 << i)] for lane in range(LANES))]


def _sources(bases: tuple[int, ...], dst: LinearLayout) -> Callable[[int, int], Optional[int]]:
    """`(r, lane) -> solve(bases, element of dst's register r in lane)`. With independent
    bases the solution is unique, hence linear: the register's and the lane's parts are
    solved once each and combined by XOR (a 128x128 tile on one warp: 544 eliminations
    instead of 16384, 0.5 s of its compile). A part outside the bases' span (the sum may
    still be inside) and dependent bases solve each pair as it comes."""
    if rank_of(bases) < len(bases):
        return lambda r, lane: solve(bases, dst.reg_element(r) ^ _lane_part(dst, lane))
    by_reg = [solve(bases, dst.reg_element(r)) for r in range(dst.n_regs)]
    by_lane = [solve(bases, _lane_part(dst, lane)) for lane in range(LANES)]

    def source(r: int, lane: int) -> Optional[int]:
        if by_reg[r] is None or by_lane[lane] is None:
            return solve(bases, dst.reg_element(r) ^ _lane_part(dst, lane))
        return by_reg[r] ^ by_lane[lane]
    return source


@lru_cache(maxsize=256)
def plan_exchange(src: LinearLayout, dst: LinearLayout, elem_bits: int) -> Optional[Exchange]:
    """The shuffle plan converting `src` to `dst` for elements of `elem_bits` bits, or
    None where the conversion needs shared memory (see the module docstring)."""
    if elem_bits not in (8, 16, 32) or src.shape != dst.shape or src.warp != dst.warp:
        return None
    if len(src.lane) != 5 or len(dst.lane) != 5 or src == dst:
        return None
    per = 32 // elem_bits
    if dst.n_regs % per:
        per = 1
    if per > 1 and src.n_regs < per:
        return None
    bases = src.reg + src.lane
    n_reg_bits = len(src.reg)
    # where each (destination register, lane) finds its element: (source register, lane)
    where: dict[tuple[int, int], tuple[int, int]] = {}
    sources = _sources(bases, dst)
    for r in range(dst.n_regs):
        for lane in range(LANES):
            x = sources(r, lane)
            if x is None:
                return None  # held by another warp, or by nobody
            where[r, lane] = (x & ((1 << n_reg_bits) - 1), x >> n_reg_bits)
    if all(where[r, lane][1] == lane for r in range(dst.n_regs) for lane in range(LANES)):
        return None  # registers only: `local_register_map`'s case (or not linear)
    if elem_bits == 32:
        picks = _plan_picks(where, dst.n_regs)
        return None if picks is None else Exchange(1, (), (), picks)
    source_words: list[tuple[int, ...]] = []
    word_of_reg: dict[int, int] = {}
    words = []
    for w in range(dst.n_regs // per):
        regs = sorted({where[w * per + p, lane][0] for p in range(per) for lane in range(LANES)})
        if len(regs) > per:
            return None
        existing = {word_of_reg[r] for r in regs if r in word_of_reg}
        if not existing:
            sw = len(source_words)
            word_of_reg.update({r: sw for r in regs})
            source_words.append(tuple(regs) + (regs[0],) * (per - len(regs)))
        elif len(existing) == 1 and set(source_words[min(existing)]) == set(regs):
            sw = min(existing)
        else:
            return None  # destination words would need overlapping source words
        packed = source_words[sw]
        lanes_of: list[list[int]] = [[] for _ in range(LANES)]
        selector = []
        for lane in range(LANES):
            sel = 0
            for p in range(per):
                reg, from_lane = where[w * per + p, lane]
                if from_lane not in lanes_of[lane]:
                    lanes_of[lane].append(from_lane)
                q = lanes_of[lane].index(from_lane)
                byte = packed.index(reg) * (4 // per)
                for k in range(4 // per):  # every byte of the element
                    sel |= (4 * q + byte + k) << (4 * (p * (4 // per) + k))
            selector.append(sel)
        shuffles = max(len(ls) for ls in lanes_of)
        if shuffles > MAX_SOURCES:
            return None
        lanes = tuple(tuple(ls[q] if q < len(ls) else ls[0] for ls in lanes_of) for q in range(shuffles))
        if not all(_is_affine(ls) for ls in lanes) or len(_depends_on(tuple(selector))) > MAX_SELECTOR_BITS:
            return None
        words.append(WordPlan(sw, lanes, tuple(selector)))
    return Exchange(per, tuple(source_words), tuple(words))


def _plan_picks(where: dict[tuple[int, int], tuple[int, int]], n_regs: int) -> Optional[tuple[PickPlan, ...]]:
    """Fetches for 32-bit elements, destination register by register: a receiving lane
    joins the first fetch in which its sender sends (or may still be told to send) the
    register it needs, else opens another. None where a register needs more than
    `MAX_SOURCES` fetches, or a lane map is not XOR-affine, or a sender's register or a
    receiver's pick depends on more than `MAX_SELECTOR_BITS` lane bits."""
    out = []
    for r in range(n_regs):
        sends: list[dict[int, int]] = []  # per fetch: sending lane -> register it sends
        pick = []
        for lane in range(LANES):
            reg, sender = where[r, lane]
            q = next((q for q, sent in enumerate(sends) if sent.get(sender, reg) == reg), len(sends))
            if q == len(sends):
                sends.append({})
            sends[q][sender] = reg
            pick.append(q)
        lanes = tuple(where[r, lane][1] for lane in range(LANES))
        if len(sends) > MAX_SOURCES or not _is_affine(lanes) or len(_depends_on(tuple(pick))) > MAX_SELECTOR_BITS:
            return None
        fetches = []
        for sent in sends:
            # lanes no receiver reads send what most senders do (fewer selects)
            common = max(set(sent.values()), key=list(sent.values()).count)
            regs = tuple(sent.get(u, common) for u in range(LANES))
            if len(_depends_on(regs)) > MAX_SELECTOR_BITS:
                return None
            fetches.append(Fetch(regs, lanes))
        out.append(PickPlan(tuple(fetches), tuple(pick)))
    return tuple(out)


def _lane_function(b: ir.IRBuilder, lane: ir.Value, values: tuple[int, ...]) -> ir.Value:
    """An XOR-affine function of the lane (c XOR the images of the set lane bits)."""
    c = values[0]
    out: ir.Value = ir.Constant(I32, c)
    for i in range(5):
        img = values[1 << i] ^ c
        if img:
            bit = b.and_(b.lshr(lane, ir.Constant(I32, i)), ir.Constant(I32, 1))
            out = b.xor(out, b.mul(bit, ir.Constant(I32, img)))
    return out


def _lane_table(b: ir.IRBuilder, lane: ir.Value, values: tuple[int, ...]) -> ir.Value:
    """Any function of the lane that depends on a few lane bits: a select tree."""
    return _lane_choice(b, lane, values, lambda x: ir.Constant(I32, x))


def _lane_choice(b: ir.IRBuilder, lane: ir.Value, keys: tuple[int, ...],
                 value_of: Callable[[int], ir.Value]) -> ir.Value:
    """`value_of(keys[lane])` for this thread's lane, `keys` depending on a few lane
    bits: a select tree over those bits."""
    bits = _depends_on(keys)

    def pick(fixed: int, depth: int) -> tuple[int, ...]:
        if depth == len(bits):
            return (keys[fixed],)
        i = bits[depth]
        low, high = pick(fixed, depth + 1), pick(fixed | 1 << i, depth + 1)
        return low if low == high else (i, low, high)

    def emit(tree: tuple) -> ir.Value:
        if len(tree) == 1:
            return value_of(tree[0])
        i, low, high = tree
        on = b.icmp_unsigned("!=", b.and_(lane, ir.Constant(I32, 1 << i)), ir.Constant(I32, 0))
        return b.select(on, emit(high), emit(low))
    return emit(pick(0, 0))


def _to_word(b: ir.IRBuilder, vals: list[ir.Value], elem: Any) -> ir.Value:
    """`vals` (one element each, the first in the low bits) packed into an i32, element
    p in the p-th slot of 32 / len(vals) bits (a slot is wider than its element where
    the plan puts fewer elements in a word than fit: `per = 1` for 8- or 16-bit ones)."""
    bits, slot = 8 * byte_size(elem), 32 // len(vals)
    it = ir.IntType(bits)
    out: Optional[ir.Value] = None
    for p, v in enumerate(vals):
        raw = v if v.type == it else b.bitcast(v, it)
        x = b.zext(raw, I32) if bits < 32 else raw
        if p:
            x = b.shl(x, ir.Constant(I32, slot * p))
        out = x if out is None else b.or_(out, x)
    return out


def _from_word(b: ir.IRBuilder, word: ir.Value, per: int, elem: Any, like: ir.Type) -> list[ir.Value]:
    """The `per` elements of `word`, laid out as `_to_word` packs them."""
    bits, slot = 8 * byte_size(elem), 32 // per
    out = []
    for p in range(per):
        x = b.lshr(word, ir.Constant(I32, slot * p)) if p else word
        if bits < 32:
            x = b.trunc(x, ir.IntType(bits))
        out.append(x if x.type == like else b.bitcast(x, like))
    return out


def exchange(lw: "KernelLowering", regs: list[ir.Value], plan: Exchange, elem: Any) -> list[ir.Value]:
    """Carry out `plan` on this thread's registers `regs` (source layout order)."""
    b = lw.b
    like = regs[0].type
    if plan.picks:
        return _exchange_picks(lw, regs, plan.picks, elem)
    src_words = [_to_word(b, [regs[r] for r in sw], elem) for sw in plan.source_words]
    out: list[ir.Value] = []
    for wp in plan.words:
        word = src_words[wp.source_word]
        fetched = [word if lanes == _OWN_LANE else lw.dev.shfl_i32(b, "idx", word, _lane_function(b, lw.lane, lanes))
                   for lanes in wp.lanes]
        if len(fetched) == 1:
            fetched.append(fetched[0])
        word = lw.dev.prmt(b, fetched[0], fetched[1], _lane_table(b, lw.lane, wp.selector))
        out += _from_word(b, word, plan.per_word, elem, like)
    return out


def _exchange_picks(lw: "KernelLowering", regs: list[ir.Value], picks: tuple[PickPlan, ...],
                    elem: Any) -> list[ir.Value]:
    b = lw.b
    like = regs[0].type
    words = [_to_word(b, [r], elem) for r in regs]
    lane_maps: dict[tuple[int, ...], ir.Value] = {}
    out = []
    for pp in picks:
        fetched = []
        for f in pp.fetches:
            sent = _lane_choice(b, lw.lane, f.sent, words.__getitem__)
            if f.lanes == _OWN_LANE:
                fetched.append(sent)
                continue
            if f.lanes not in lane_maps:
                lane_maps[f.lanes] = _lane_function(b, lw.lane, f.lanes)
            fetched.append(lw.dev.shfl_i32(b, "idx", sent, lane_maps[f.lanes]))
        word = _lane_choice(b, lw.lane, pp.pick, fetched.__getitem__)
        out += _from_word(b, word, 1, elem, like)
    return out
