"""FlexAttention-style modifications: ScoreMod, MaskMod and block-sparse BlockMask.

A *score_mod* rewrites each score, `score_mod(score, b, h, q_idx, kv_idx, *args)`; a
*mask_mod* says which pairs attend, `mask_mod(b, h, q_idx, kv_idx, *args)`. Both are
`@triton.jit` functions the attention kernels receive as `tl.constexpr` arguments and
call inside their inner loop; `args` is a tuple of extra kernel arguments (tensors,
scalars) forwarded to the mod after the indices, so a mod can read per-token data.

Backward needs d score_mod / d score: a ScoreMod carries it as `grad` (a jit function
with score_mod's signature, evaluated at the unmodified score), or `grad="identity"` for
mods that add a bias independent of the score. Masks need no gradient.

A BlockMask is the sparse schedule: for each (batch, head, Q block) the KV blocks to
visit, split into *full* blocks (every pair attends: no mask_mod is evaluated) and
*partial* ones (mask_mod applied); blocks where nothing attends are never visited. It
also keeps the transposed lists (per KV block, the Q blocks) for the dK/dV kernel. The
kernels walk the lists as *spans* of consecutive visited blocks, each holding at most one
run of full blocks (`_spans`; a sliding window is one span per row): a loop over one
span has addresses that depend on its counter only, which the compiler
software-pipelines; per-entry indirection would defeat that.
`create_block_mask` builds one by evaluating the mask_mod on every block with a tegula
kernel (on the tensors' device), then compacting the block states with torch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import tegula as triton
import tegula.language as tl
from tegula.kernels.attention_common import allowed_of

# A block's state in `_block_states_kernel`'s output.
EMPTY, PARTIAL, FULL = 0, 1, 2


@dataclass(frozen=True)
class ScoreMod:
    """A score modification: `fn(score, b, h, q_idx, kv_idx, *args) -> score`.

    `grad` is d fn / d score as a jit function of the same arguments, `"identity"` when fn
    adds a term that does not depend on score, or None (forward only). `reference` is an
    optional torch version of fn on broadcast index tensors, for dense checks."""
    fn: Any
    grad: Union[Any, str, None] = None
    args: tuple = ()
    reference: Optional[Callable] = None


@dataclass(frozen=True)
class MaskMod:
    """A mask: `fn(b, h, q_idx, kv_idx, *args) -> bool tile` (True: the pair attends).
    `reference` is an optional torch version on broadcast index tensors."""
    fn: Any
    args: tuple = ()
    reference: Optional[Callable] = None


def as_score_mod(mod) -> Optional[ScoreMod]:
    return mod if mod is None or isinstance(mod, ScoreMod) else ScoreMod(mod)


def as_mask_mod(mod) -> Optional[MaskMod]:
    return mod if mod is None or isinstance(mod, MaskMod) else MaskMod(mod)


@dataclass
class BlockMask:
    """Per-(b, h, block) lists of blocks to visit. Counts are [B, H, n_blocks] int32,
    indices [B, H, n_blocks, n_other_blocks] int32 (the first `count` entries valid);
    B and H may be 1 (the same mask for every batch entry or head)."""
    n_ctx: int
    q_block: int
    kv_block: int
    kv_num_blocks: Any
    kv_indices: Any
    full_kv_num_blocks: Any
    full_kv_indices: Any
    q_num_blocks: Any
    q_indices: Any
    full_q_num_blocks: Any
    full_q_indices: Any
    states: Any = None  # [B, H, n_q_blocks, n_kv_blocks] int8: EMPTY / PARTIAL / FULL
    mask_mod: Optional[MaskMod] = None
    causal: bool = False
    _kernel_args: dict = field(default_factory=dict, repr=False)  # per (Z, H, transposed)
    _most_spans: dict = field(default_factory=dict, repr=False)   # per (Z, H, transposed)

    @classmethod
    def from_block_states(cls, states, n_ctx: int, q_block: int, kv_block: int,
                          mask_mod: Optional[MaskMod] = None, causal: bool = False) -> "BlockMask":
        """From a [B, H, n_q_blocks, n_kv_blocks] tensor of EMPTY / PARTIAL / FULL."""
        kv_num, kv_idx = _compact(states == PARTIAL)
        full_kv_num, full_kv_idx = _compact(states == FULL)
        q_num, q_idx = _compact((states == PARTIAL).transpose(-1, -2))
        full_q_num, full_q_idx = _compact((states == FULL).transpose(-1, -2))
        return cls(n_ctx, q_block, kv_block, kv_num, kv_idx, full_kv_num, full_kv_idx,
                   q_num, q_idx, full_q_num, full_q_idx, states, mask_mod, causal)

    @classmethod
    def from_dense(cls, allowed, q_block: Optional[int] = None, kv_block: Optional[int] = None,
                   mask_mod=None, causal: bool = False) -> "BlockMask":
        """From a dense mask evaluated with torch: `allowed` [B, H, N, N] (bool; B and H may
        be 1). Block states come from counting it per block; partial blocks are masked in
        the kernels by `mask_mod`, by default `mods.dense(allowed)`, which reads `allowed`."""
        import torch
        B, H, N, n_kv = allowed.shape
        if N != n_kv:
            raise ValueError(f"a dense mask must be [B, H, N, N], got {tuple(allowed.shape)}")
        q_block = q_block or default_sparse_block(allowed.device)
        kv_block = kv_block or default_sparse_block(allowed.device)
        n_q, n_k = triton.cdiv(N, q_block), triton.cdiv(N, kv_block)
        attends = allowed.bool()
        if causal:
            attends = attends & torch.ones(N, N, dtype=torch.bool, device=allowed.device).tril()
        padded = torch.zeros((B, H, n_q * q_block, n_k * kv_block), dtype=torch.int32, device=allowed.device)
        padded[..., :N, :N] = attends
        counts = padded.view(B, H, n_q, q_block, n_k, kv_block).sum(dim=(3, 5))
        states = torch.where(counts == 0, EMPTY, torch.where(counts == q_block * kv_block, FULL, PARTIAL))
        if mask_mod is None:
            from tegula.kernels.mods import dense  # mods builds on this module
            mask_mod = dense(allowed)
        return cls.from_block_states(states.to(torch.int8), N, q_block, kv_block, as_mask_mod(mask_mod), causal)

    def visited_fraction(self) -> float:
        """The fraction of (Q block, KV block) pairs the kernels visit (1.0: dense)."""
        total = self.kv_indices.shape[-1] * self.kv_indices.shape[-2] * self.kv_indices.shape[0] \
            * self.kv_indices.shape[1]
        visited = int(self.kv_num_blocks.sum()) + int(self.full_kv_num_blocks.sum())
        return visited / total

    def kernel_args(self, Z: int, H: int, transposed: bool) -> tuple:
        """What the kernels walk: per Q block (forward, dQ) or per KV block (dK/dV,
        `transposed`), the spans of consecutive visited blocks (`_spans`), broadcast to
        [Z, H, ...] (stride 0 where B or H is 1): (span count, span first blocks, full
        first blocks, full end blocks, span end blocks, count strides z, h, span strides
        z, h, row)."""
        B, Hm = self.kv_num_blocks.shape[:2]
        if B not in (1, Z) or Hm not in (1, H):
            raise ValueError(f"block mask for B={B}, H={Hm} does not fit Z={Z}, H={H}")
        key = (Z, H, transposed)
        if key not in self._kernel_args:
            states = self.states.transpose(-1, -2) if transposed else self.states
            spans = [t.expand(Z, H, *t.shape[2:]) for t in _spans(states)]
            count, first = spans[0], spans[1]
            self._kernel_args[key] = (*spans, count.stride(0), count.stride(1),
                                      first.stride(0), first.stride(1), first.stride(2))
        return self._kernel_args[key]

    def most_spans(self, Z: int, H: int, transposed: bool) -> int:
        """The most spans any block walks (`kernel_args`; read once, then cached): a mask
        of at most one per block lets the forward walk it as its dense loops."""
        key = (Z, H, transposed)
        if key not in self._most_spans:
            self._most_spans[key] = int(self.kernel_args(Z, H, transposed)[0].max())
        return self._most_spans[key]


def _spans(states):
    """int8 [..., n] block states -> the spans a kernel walks, each one pipelined loop:
    (count [...], first, full_first, full_end, end [..., n]) int32, the first `count`
    entries valid. A span is a run of consecutive visited blocks holding at most one run
    of FULL blocks, [full_first, full_end) (empty: full_first == full_end == first); the
    kernels mask the span's other blocks. A visited run with several full runs is split
    at each full run after its first, so only PARTIAL blocks are ever masked."""
    import torch
    import torch.nn.functional as F

    def before(t):  # t shifted one block later: the previous block's flag
        return F.pad(t[..., :-1], (1, 0))

    def after(t):
        return F.pad(t[..., 1:], (0, 1))

    visited, full = states != EMPTY, states == FULL
    run_start = visited & ~before(visited)
    full_start = full & ~before(full)
    full_starts = full_start.to(torch.int32).cumsum(-1)
    # full runs begun in this visited run so far: the count minus the count at its start
    # (a running maximum carries the start's count forward: counts never decrease)
    at_run_start = torch.where(run_start, full_starts - full_start.to(torch.int32), 0).cummax(-1).values
    begin = run_start | (full_start & (full_starts - at_run_start >= 2))
    last = visited & (~after(visited) | after(begin))
    count, first = _compact(begin)
    _, last_at = _compact(last)
    end = (last_at + 1).to(torch.int32)
    # each block's span (valid on visited blocks); one spare slot takes the others
    n = states.shape[-1]
    span = begin.to(torch.int64).cumsum(-1) - 1
    position = torch.arange(n, device=states.device, dtype=torch.int32).expand_as(span)
    spare = torch.full_like(span, n)
    empty_full = torch.cat([first, first[..., :1]], -1)  # a span without full blocks: [first, first)
    full_first = empty_full.scatter(-1, torch.where(full_start, span, spare), position)
    full_end = empty_full.scatter(-1, torch.where(full & ~after(full), span, spare), position + 1)
    return count, first, full_first[..., :n].contiguous(), full_end[..., :n].contiguous(), end


def _compact(flags):
    """bool [..., n] -> (count [...] int32, indices [..., n] int32 with the True positions
    first, in increasing order)."""
    import torch
    counts = flags.sum(-1, dtype=torch.int32).contiguous()
    order = torch.argsort((~flags).to(torch.int8), dim=-1, stable=True)
    return counts, order.to(torch.int32).contiguous()


@triton.jit
def _block_states_kernel(state_ptr, N_CTX, H, n_q_blocks, n_kv_blocks,
                         MASK_MOD: tl.constexpr, mask_args, CAUSAL: tl.constexpr,
                         Q_BLOCK: tl.constexpr, KV_BLOCK: tl.constexpr):
    q_blk = tl.program_id(0)
    kv_blk = tl.program_id(1)
    bh = tl.program_id(2)
    q_idx = q_blk * Q_BLOCK + tl.arange(0, Q_BLOCK)[:, None]
    kv_idx = kv_blk * KV_BLOCK + tl.arange(0, KV_BLOCK)[None, :]
    allowed = allowed_of(bh // H, bh % H, q_idx, kv_idx, N_CTX, CAUSAL, MASK_MOD, mask_args, False)
    n_allowed = tl.sum(tl.sum(allowed.to(tl.int32), 1), 0)
    # A block reaching past N_CTX is never FULL: full blocks are visited without any
    # masking, bounds checks included.
    state = tl.where(n_allowed == 0, 0, tl.where(n_allowed == Q_BLOCK * KV_BLOCK, 2, 1))
    tl.store(state_ptr + (bh * n_q_blocks + q_blk) * n_kv_blocks + kv_blk, state.to(tl.int8))


def default_sparse_block(device) -> int:
    """FlexAttention's 128 on GPUs; 32 on the host, where sizes are small."""
    return 128 if getattr(device, "type", str(device)) == "cuda" else 32


def create_block_mask(mask_mod, B: int, H: int, n_ctx: int, device="cpu", *, causal: bool = False,
                      q_block: Optional[int] = None, kv_block: Optional[int] = None) -> BlockMask:
    """Evaluate `mask_mod` (a MaskMod or jit function; None for `causal` alone) on every
    (b, h, Q block, KV block) and return the BlockMask. Use B=1 / H=1 when the mask does
    not depend on the batch entry / head."""
    import torch
    mask_mod = as_mask_mod(mask_mod)
    device = torch.device(device)
    q_block = q_block or default_sparse_block(device)
    kv_block = kv_block or default_sparse_block(device)
    n_q, n_kv = triton.cdiv(n_ctx, q_block), triton.cdiv(n_ctx, kv_block)
    states = torch.empty((B, H, n_q, n_kv), dtype=torch.int8, device=device)
    _block_states_kernel[(n_q, n_kv, B * H)](
        states, n_ctx, H, n_q, n_kv, MASK_MOD=None if mask_mod is None else mask_mod.fn,
        mask_args=() if mask_mod is None else tuple(mask_mod.args), CAUSAL=causal,
        Q_BLOCK=q_block, KV_BLOCK=kv_block)
    return BlockMask.from_block_states(states, n_ctx, q_block, kv_block, mask_mod, causal)
