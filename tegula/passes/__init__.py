"""Target-independent passes over the tile IR and the analyses backends read.

Transformations are plain functions `pass_fn(kernel, ctx) -> kernel` run by
`run_pipeline` from named pipelines (`PIPELINES`): `canonicalize`, `cse`, `dce`,
`licm`, `carried_ranges` (index tiles a loop only shifts by a scalar carried as
that scalar), `descriptors_to_pointers` (tensor-descriptor ops as pointer code, for
backends without a native lowering; `lower_descriptors` runs it with the cleanup) and
`block_pointers_to_pointers` (block pointers as their parts and pointer code, for every
compiled backend; `lower_block_pointers` runs it with the cleanup).
Analyses leave the IR alone: `axis_info` (divisibility / contiguity /
constancy per value, with `vector_width` and `contiguity_order` for the GPU backend),
`written_arguments` (pointer arguments a kernel may store through) and
`pointer_table_arguments` (arguments holding addresses the kernel uses as pointers).
This package never imports `tegula.frontend`.
"""
from .axis_analysis import axis_info
from .axis_info import AxisInfo, bound_width, contiguity_order, vector_width
from .block_pointers_to_pointers import block_pointers_to_pointers, has_block_pointers, lower_block_pointers
from .canonicalize import canonicalize
from .cse import cse
from .dce import dce
from .descriptors_to_pointers import descriptors_to_pointers, has_descriptors, lower_descriptors
from .licm import licm
from .manager import PASSES, PassContext, PassError, register_pass, run_pipeline
from .pipelines import PIPELINES, register_pipeline
from .pointer_tables import pointer_table_arguments
from .written_args import read_arguments, written_arguments

__all__ = [
    "AxisInfo", "PASSES", "bound_width", "PIPELINES", "PassContext", "PassError", "axis_info",
    "block_pointers_to_pointers", "canonicalize", "contiguity_order", "cse", "dce", "descriptors_to_pointers",
    "has_block_pointers", "has_descriptors", "licm", "lower_block_pointers", "lower_descriptors",
    "pointer_table_arguments", "register_pass", "read_arguments", "register_pipeline", "run_pipeline",
    "vector_width", "written_arguments",
]
