"""Autotuning configs of the attention kernels and the rules that prune them.

Each kernel gets one list holding host configs (small blocks; the first valid one is
taken without timing, since timing on the interpreter would cost more than it saves)
and GPU configs (BLOCK_M 64/128, BLOCK_N 32/64/128, 2-4 stages, 4/8 warps, timed).
The kernels take an `ON_GPU` constexpr so host and GPU runs never share a tuning-cache
entry and pick from their own list. Pruning keeps the configs whose blocks fit the
call: the causal diagonal needs the outer block to be a multiple of the inner one, a
BlockMask needs the kernel's blocks to divide its blocks, and head dim 256 keeps the
shared-memory rings small.

The forward's list also holds warp-specialized twins of its 128-row 8-warp configs (for
Hopper's descriptor path, dense or one span per Q block; pruned elsewhere), and
persistent twins of the 2-stage ones (`persistent_twin`). Its GPU configs carry a
pre-hook that gives its tensor descriptors (the DESC path, attention.py) the config's
blocks, as Triton's tutorial 06 does.
"""
import itertools

import tegula as triton

_HOST = [(32, 16), (16, 16)]  # outer blocks below 64: the pruner tells the lists apart by that
_GPU = [(bm, bn, s, w) for bm, bn, s, w in itertools.product((64, 128), (32, 64, 128), (2, 3, 4), (4, 8))]
# A length that is a multiple of this is a multiple of every config's blocks: the kernels
# then need no bounds masks (IN_RANGE) and the forward may read rows by descriptor.
LARGEST_BLOCK = 128
assert all(bm >= 64 for bm, *_ in _GPU) and all(max(pair) < 64 for pair in _HOST)
assert all(LARGEST_BLOCK % block == 0 for bm, bn, _s, _w in _GPU + [(*p, 0, 0) for p in _HOST] for block in (bm, bn))


def descriptor_blocks(nargs) -> None:
    """The forward kernel's descriptors read and write blocks of the config's shape."""
    if nargs.get("DESC"):
        bm, bn, d = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["HEAD_DIM"]
        nargs["q_ptr"].block_shape = [bm, d]
        nargs["out_ptr"].block_shape = [bm, d]
        nargs["k_ptr"].block_shape = [bn, d]
        nargs["v_ptr"].block_shape = [bn, d]


def _configs(host_pairs, gpu, swap=False, pre_hook=None):
    host = [triton.Config({"BLOCK_M": n if swap else m, "BLOCK_N": m if swap else n}, num_warps=4, num_stages=2,
                          pre_hook=pre_hook)
            for m, n in host_pairs]
    dev = [triton.Config({"BLOCK_M": bn if swap else bm, "BLOCK_N": bm if swap else bn}, num_stages=s, num_warps=w,
                         pre_hook=pre_hook)
           for bm, bn, s, w in gpu]
    return host, dev


FWD_HOST, FWD_GPU = _configs(_HOST, _GPU, pre_hook=descriptor_blocks)
# The forward's warp-specialized twins of its two-warpgroup 128-row configs: on Hopper's
# descriptor path a producer warpgroup issues the dense loops' TMA copies, so the two
# consumer warpgroups never wait for each other's slot releases (the WARP_SPECIALIZE
# constexpr). Measured on an H200 (session 16, Z4 H32 N4096): D128 128x128/2/8 541.7-552.2
# TFLOP/s against 524.3 unspecialized, causal 475.7-489.4 against 459.1; D64 at 128x64/3/8
# it loses (365-373 against 428), so the autotuner, not a rule, decides.
# The twins walk a causal or block-sparse span on one loop (ONE_LOOP): on the H200
# (session 17) the sliding window at 128x128/2/8 390.0 TFLOP/s against 359.6 (its three
# loops each began on an exposed copy latency), D128 causal 495.0 against 480.4; the
# unspecialized 128x64/3/8 lost with it (D64 causal 370.6 against 384.4), so only they.
FWD_GPU += [triton.Config({**c.kwargs, "WARP_SPECIALIZE": True, "ONE_LOOP": True}, num_stages=c.num_stages,
                          num_warps=c.num_warps,
                          pre_hook=c.pre_hook)
            for c in FWD_GPU if c.kwargs["BLOCK_M"] == 128 and c.kwargs["BLOCK_N"] >= 64 and c.num_warps == 8]


def persistent_twin(config):
    """`config` (a warp-specialized forward config) with PERSISTENT=True: one program
    per SM walking the tiles, the KV rings turning across tiles (the producer fills the
    next tile's first slots during this one's epilogue), each tile's Q block copied
    during the tile before and its last V block under its KV loop (`tile_prefetch`). Benchmarks spell it `...wsp`."""
    return triton.Config({**config.kwargs, "PERSISTENT": True}, num_stages=config.num_stages,
                         num_warps=config.num_warps, pre_hook=config.pre_hook)


# The persistent twins of the 2-stage warp-specialized configs (deeper rings would only
# hold more shared memory for the whole kernel). Measured on the H200 (session 20, Z4
# H32 N4096, 6 rounds in rotating order after a warm-up, medians, against the same
# config not persistent): D128 128x128/2/8 551.1 TFLOP/s against 549.6, causal 484.5
# against 473.4; the autotuner decides (D64's configs run 2 CTAs per SM, which one
# program per SM gives up). Session 21 (its TMA stores buffered across tiles, the
# scale folded into the exponent): tuned D128 and D128 causal took 128x128/2/8 wsolp.
FWD_GPU += [persistent_twin(c) for c in FWD_GPU if c.kwargs.get("WARP_SPECIALIZE") and c.num_stages == 2]

DQ_HOST, DQ_GPU = _configs(_HOST, _GPU)
# dK/dV owns the key block (the outer one) and steps over queries: BLOCK_N outer.
DKDV_HOST, DKDV_GPU = _configs(_HOST, _GPU, swap=True)


def _fits(c, a, outer: str, inner: str) -> bool:
    kw = c.kwargs
    if kw.get("WARP_SPECIALIZE") and (not a.get("DESC") or (a["SPARSE"] and not a.get("ONE_SPAN"))):
        return False  # only the descriptor path's dense-style loops specialize: a twin would repeat its config
    if kw.get("PERSISTENT") and a["SPARSE"]:
        # a tile's block-mask spans are loaded after the last tile's output stores, so no
        # producer may load ahead of them (warp_specialize refuses): an unspecialized twin
        return False
    if a["CAUSAL"] and not a["SPARSE"] and kw[outer] % kw[inner]:
        return False
    if a["SPARSE"] and (a["SPARSE_Q"] % kw["BLOCK_M"] or a["SPARSE_KV"] % kw["BLOCK_N"]):
        return False
    if a["HEAD_DIM"] >= 256 and (kw["BLOCK_M"] > 64 or kw["BLOCK_N"] > 64 or c.num_stages > 2):
        return False
    return True


def _pruner(outer, inner):
    def prune(configs, nargs, **kwargs):
        # filters the autotuner's current list, so a caller may narrow `kernel.configs`
        # (or put copies with other kwargs in it): a config is a GPU one by its outer
        # block (64 or 128; the host list's are 16 and 32), not by identity
        a = {**nargs, **kwargs}
        if a["ON_GPU"]:
            return [c for c in configs if c.kwargs[outer] >= 64 and _fits(c, a, outer, inner)]
        valid = [c for c in configs if c.kwargs[outer] < 64 and _fits(c, a, outer, inner)]
        return valid[:1]
    return {"early_config_prune": prune}


FWD_PRUNE = _pruner("BLOCK_M", "BLOCK_N")
DQ_PRUNE = _pruner("BLOCK_M", "BLOCK_N")
DKDV_PRUNE = _pruner("BLOCK_N", "BLOCK_M")
# The mods are not in the key: a config tuned for one shape serves every mod on it (a mod
# adds elementwise work, it does not move the best tile shape much), so a model with a
# few variants tunes once per shape rather than once per variant.
TUNING_KEY = ["N_CTX", "HEAD_DIM", "CAUSAL", "SPARSE", "SPARSE_Q", "SPARSE_KV", "ON_GPU"]
# the forward's descriptor path (TMA on Hopper) may prefer other blocks than its pointer path
FWD_TUNING_KEY = TUNING_KEY + ["DESC"]
