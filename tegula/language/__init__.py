"""`tegula.language`, imported by kernels as `tl`: dtypes, `constexpr`, `tensor`, the
builtins (Triton 3.6 names and signatures) and the loop iterators.

Builtins are `Builtin` objects; the frontend calls `fn.impl(sem, *args, **kwargs)` with
a `Semantic` (see `tegula.language.semantic`). `tl.math` holds the math functions, which
are also exported here.
"""
from __future__ import annotations

from . import extra, math, random
from .atomics import atomic_add, atomic_and, atomic_cas, atomic_max, atomic_min, atomic_or, atomic_xchg, atomic_xor
from .block_pointers import advance, block_ptr, make_block_ptr
from .constexpr import constexpr, is_power_of_two, unwrap_constexpr
from .core import (
    Builtin,
    PropagateNan,
    builtin,
    condition,
    const,
    extern,
    extern_elementwise,
    is_builtin,
    range,
    static_range,
)
from .core_builtins import (
    add,
    arange,
    broadcast,
    broadcast_to,
    builtin_max,
    builtin_min,
    cast,
    cat,
    clamp,
    dot,
    expand_dims,
    full,
    item,
    join,
    load,
    maximum,
    minimum,
    mul,
    num_programs,
    permute,
    program_id,
    reshape,
    split,
    store,
    sub,
    trans,
    view,
    where,
)
from .debug import (
    assume,
    debug_barrier,
    device_assert,
    device_print,
    max_constancy,
    max_contiguous,
    multiple_of,
    static_assert,
    static_print,
)
from .dtypes import (
    TRITON_MAX_TENSOR_NUMEL,
    bfloat16,
    block_type,
    dtype,
    float8e4b8,
    float8e4b15,
    float8e4nv,
    float8e5,
    float8e5b16,
    float16,
    float32,
    float64,
    get_int_dtype,
    int1,
    int8,
    int16,
    int32,
    int64,
    pi32_t,
    pointer_type,
    str_to_ty,
    uint8,
    uint16,
    uint32,
    uint64,
    void,
)
from .indexing import gather, histogram
from .inline_asm import inline_asm_elementwise
from .math import (
    abs,
    ceil,
    cos,
    div_rn,
    erf,
    exp,
    exp2,
    fdiv,
    floor,
    fma,
    log,
    log2,
    rsqrt,
    sin,
    sqrt,
    sqrt_rn,
    umulhi,
)
from .random import (
    pair_uniform_to_normal,
    philox,
    philox_impl,
    rand,
    rand4x,
    randint,
    randint4x,
    randn,
    randn4x,
    uint_to_uniform_float,
)
from .reductions import (
    argmax,
    argmin,
    associative_scan,
    cumprod,
    cumsum,
    max,
    min,
    reduce,
    reduce_or,
    sum,
    xor_sum,
)
from .semantic import Semantic
from .sorting import bitonic_merge, flip, sort, topk
from .standard import cdiv, interleave, ravel, sigmoid, softmax, swizzle2d, zeros, zeros_like
from .tensor import tensor
from .tensor_descriptors import (
    load_tensor_descriptor,
    make_tensor_descriptor,
    store_tensor_descriptor,
    tensor_descriptor,
)
from .tuples import tuple
from .unsupported import (
    dot_scaled,
    map_elementwise,
)

__all__ = [
    "pair_uniform_to_normal", "philox", "philox_impl", "rand", "rand4x", "randint", "randint4x", "randn",
    "randn4x", "uint_to_uniform_float", "random",
    "Builtin", "PropagateNan", "Semantic", "TRITON_MAX_TENSOR_NUMEL", "abs", "add", "advance", "arange",
    "argmax", "argmin", "associative_scan", "assume", "atomic_add", "atomic_and", "atomic_cas",
    "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor", "bfloat16", "bitonic_merge",
    "block_ptr", "block_type", "broadcast", "broadcast_to", "builtin", "builtin_max", "builtin_min", "cast", "cat",
    "cdiv", "ceil", "clamp", "condition", "const", "constexpr", "cos", "cumprod", "cumsum", "debug_barrier",
    "device_assert", "device_print", "div_rn", "dot", "dot_scaled", "dtype", "erf", "exp", "exp2",
    "expand_dims", "extern", "extern_elementwise", "extra",
    "fdiv", "flip", "float16", "float32", "float64", "float8e4b15", "float8e4b8",
    "float8e4nv", "float8e5", "float8e5b16", "floor", "fma", "full", "gather", "get_int_dtype", "histogram",
    "inline_asm_elementwise", "int1", "int16", "int32", "int64", "int8", "interleave", "is_builtin",
    "is_power_of_two", "item", "join", "load", "load_tensor_descriptor", "log", "log2", "make_block_ptr",
    "make_tensor_descriptor", "map_elementwise", "math", "max", "max_constancy", "max_contiguous",
    "maximum", "min", "minimum", "mul", "multiple_of", "num_programs", "permute", "pi32_t", "pointer_type",
    "program_id", "range", "ravel", "reduce", "reduce_or", "reshape", "rsqrt", "sigmoid", "sin", "softmax",
    "sort", "split", "sqrt", "sqrt_rn", "static_assert", "static_print", "static_range", "store",
    "store_tensor_descriptor", "str_to_ty", "sub", "sum", "swizzle2d", "tensor", "tensor_descriptor", "topk",
    "trans", "tuple", "uint16",
    "uint32", "uint64", "uint8", "umulhi", "unwrap_constexpr", "view", "void", "where", "xor_sum", "zeros",
    "zeros_like",
]
