"""LLVM IR code shared by the compiled backends (cuda now, cpu later): IR types to
llvmlite types, constants, intrinsic declarations, the lowering of every scalar op from
the op table (`scalar_ops`) and of conversions (`casts`). Target differences (which math
library, which conversion instructions) come in through a `ScalarTarget` object, so the
same code serves NVPTX and the host."""
