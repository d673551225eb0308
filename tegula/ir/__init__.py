"""tegula's tile IR: types, the op table, instructions and blocks, builder, printer,
parser and verifier. Plain Python; no other tegula package is imported from here."""
from .core import UNKNOWN_LOC, ArgAttrs, Block, Instr, Kernel, Loc, Value  # noqa: F401
from .ops import OP_INFO, Kind, Op, OpInfo  # noqa: F401
from .parser import IRParseError, parse_ir  # noqa: F401
from .printer import print_ir  # noqa: F401
from .types import (  # noqa: F401
    BF16,
    F8E4M3,
    F8E5M2,
    F16,
    F32,
    F64,
    I1,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    BlockPtrType,
    PointerType,
    ScalarType,
    TensorDescType,
    TileType,
    Type,
    element_of,
    parse_type,
    shape_of,
)
from .verifier import VerificationError, verify  # noqa: F401
