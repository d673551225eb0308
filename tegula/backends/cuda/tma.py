"""Which tensor-descriptor loads the CUDA backend copies with TMA (sm_90a), and what the
launcher needs to encode each descriptor's tensor map on the host.

A descriptor load goes through TMA when
- it is a 2-D block of 16-bit elements (f16, bf16), or of 8-bit ones (fp8, int8)
  whose contiguous dimension is the dot's K (an [M, K] A, an [N, K] B read through
  `.T`: wgmma transposes 16-bit operands only), read only by dots that run on
  wgmma, in a loop the pipeliner takes (`pipeline_candidates`): its slot then has the
  NVMMA swizzled layout wgmma reads (`lower_wgmma.wgmma_operand_offsets`), which is
  exactly what a TMA copy with the same swizzle writes — one copy per box of
  `swizzle` bytes along the block's contiguous (last) dimension, all rows;
- its `make_tensor_descriptor` can be evaluated on the host at launch: base, shape and
  strides are kernel arguments, constants, or sums and products of those (a host
  `TensorDescriptor` argument always is; so is a device-side
  `tl.make_tensor_descriptor(ptr, [Z * H * N_CTX, D], [D, 1], ...)`, tutorial 06's),
  with the base 16-byte aligned and the strides multiples of 16 bytes as the
  specialization proves (TMA's rules; a host `TensorDescriptor` asserts them);
- `TEGULA_TMA` is on and the kernel is not compiled in checked mode.
A descriptor store goes through TMA when its descriptor's map can be encoded and its
rows are known to span a multiple of 16 bytes (`tma_stores`). Every other descriptor
access is rewritten into pointer code (`passes.descriptors_to_pointers`). A
device-side descriptor whose parts are computed in the kernel keeps the pointer path
(a tensor map in global scratch is future work).

`TensorMapSpec` is the launcher's recipe for one map (JSON in the metadata): where
base, shape and strides come from (an argument index or a constant), the element
type, the box (innermost first), the swizzle and the out-of-bounds fill (zero, or NaN
for a "nan" descriptor: TMA's NaN-request fill).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from ...config import knobs
from ...errors import CompilationError
from ...ir.core import Instr, Kernel, Value
from ...ir.ops import Op
from ...ir.types import PointerType, ScalarType, TensorDescType
from ...passes.ir_utils import users_of
from .lower_wgmma import swizzle_bytes

MAX_BOX = 256  # TMA's largest box extent
# element types the launcher encodes maps of, and their bytes; 8-bit ones move as bytes
# (UINT8, as Triton encodes them), which have no NaN fill
ENCODABLE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f8e4m3": 1, "f8e5m2": 1, "i8": 1, "u8": 1}
ENCODABLE = tuple(ENCODABLE_BYTES)

Source = tuple  # ("arg", index), ("const", value), or ("add" | "mul", Source, Source)
_ARITHMETIC = {Op.ADD: "add", Op.MUL: "mul"}


@dataclass(frozen=True)
class TensorMapSpec:
    base: Source
    shape: tuple[Source, ...]     # outermost first, as the descriptor's
    strides: tuple[Source, ...]   # in elements, outermost first (the last is 1)
    element: str                  # IR scalar type name
    box: tuple[int, ...]          # innermost first, as cuTensorMapEncodeTiled takes it
    swizzle: int                  # bytes: 32, 64 or 128
    nan_fill: bool
    inner: int                    # the block's contiguous extent (a multiple of box[0])

    def to_json(self) -> dict[str, Any]:
        return {"base": list(self.base), "shape": [list(s) for s in self.shape],
                "strides": [list(s) for s in self.strides], "element": self.element, "box": list(self.box),
                "swizzle": self.swizzle, "nan_fill": self.nan_fill, "inner": self.inner}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "TensorMapSpec":
        return TensorMapSpec(_as_source(d["base"]), tuple(_as_source(s) for s in d["shape"]),
                             tuple(_as_source(s) for s in d["strides"]), d["element"], tuple(d["box"]),
                             int(d["swizzle"]), bool(d["nan_fill"]), int(d["inner"]))

    @property
    def copies(self) -> int:
        """TMA copies per block: boxes along the contiguous dimension."""
        return self.inner // self.box[0]


def _as_source(s: Any) -> Source:
    """A source read back from JSON (nested lists) as nested tuples."""
    return tuple(_as_source(x) if isinstance(x, list) else x for x in s)


def evaluate(src: Source, arg: Callable[[int], int]) -> int:
    """A descriptor part's value at launch, `arg(i)` being argument i's."""
    kind = src[0]
    if kind == "arg":
        return int(arg(int(src[1])))
    if kind == "const":
        return int(src[1])
    a, b = evaluate(src[1], arg), evaluate(src[2], arg)
    return a + b if kind == "add" else a * b


def source_text(src: Source, arg_text: Callable[[int], str]) -> str:
    """Python source of `evaluate(src, ...)`, argument i being the expression `arg_text(i)`."""
    kind = src[0]
    if kind == "arg":
        return arg_text(int(src[1]))
    if kind == "const":
        return repr(int(src[1]))
    return f"({source_text(src[1], arg_text)} {'+' if kind == 'add' else '*'} {source_text(src[2], arg_text)})"


def _source(v: Value, kernel: Kernel) -> Optional[Source]:
    """Where the launcher finds the value of a descriptor part, or None when the kernel
    computes it otherwise: an argument, a constant, a widening integer cast of one, or
    the sum or product of two such (scalar code: the same in every program)."""
    if v in kernel.args:
        return ("arg", kernel.args.index(v))
    owner = v.owner
    if isinstance(owner, Instr) and owner.op is Op.CONSTANT and isinstance(owner.attrs.value, int):
        return ("const", int(owner.attrs.value))
    if isinstance(owner, Instr) and owner.op is Op.BITCAST and _drops_const(owner.operands[0].type, v.type):
        return _source(owner.operands[0], kernel)  # a `tl.const` argument as a descriptor's base
    if isinstance(owner, Instr) and owner.op is Op.CAST:
        src, dst = owner.operands[0].type, v.type
        if (isinstance(src, ScalarType) and isinstance(dst, ScalarType) and src.is_int and dst.is_int
                and src.is_signed and dst.bits >= src.bits):
            return _source(owner.operands[0], kernel)
    if isinstance(owner, Instr) and owner.op in _ARITHMETIC and isinstance(v.type, ScalarType) and v.type.is_int:
        a, b = (_source(x, kernel) for x in owner.operands)
        if a is not None and b is not None:
            return (_ARITHMETIC[owner.op], a, b)
    return None


def _drops_const(src: Any, dst: Any) -> bool:
    """A bitcast from a const pointer to the same pointer without the const: the same address."""
    return (isinstance(src, PointerType) and isinstance(dst, PointerType) and src.const
            and replace(src, const=False) == dst)


def _divisibility(src: Source, kernel: Kernel) -> int:
    """The power of two (at most 16) the value is known to be a multiple of."""
    if src[0] == "const":
        v = abs(int(src[1]))
        return 16 if v == 0 else min(16, v & -v)
    if src[0] == "add":
        return min(_divisibility(src[1], kernel), _divisibility(src[2], kernel))
    if src[0] == "mul":
        return min(16, _divisibility(src[1], kernel) * _divisibility(src[2], kernel))
    attrs = kernel.arg_attrs[src[1]] if src[1] < len(kernel.arg_attrs) else None
    return attrs.divisibility if attrs is not None else 1


def tensormap_spec(make: Instr, kernel: Kernel) -> Optional[TensorMapSpec]:
    """The host recipe of a `make_tensor_descriptor` whose 2-D blocks TMA can copy into
    NVMMA-swizzled slots (f16, bf16, f32 and 8-bit elements), or None."""
    desc: TensorDescType = make.results[0].type
    eb = desc.element.bytes
    if desc.rank != 2 or desc.element.name not in ENCODABLE or (eb == 1 and desc.padding == "nan"):
        return None
    sources = [_source(v, kernel) for v in make.operands]
    if any(s is None for s in sources):
        return None
    base, shape, strides = sources[0], tuple(sources[1:3]), tuple(sources[3:5])
    if base[0] != "arg" or _divisibility(base, kernel) < 16:
        return None
    if strides[1] != ("const", 1) or _divisibility(strides[0], kernel) * eb < 16:
        return None
    rows, cols = desc.block
    swizzle = swizzle_bytes(cols * eb)
    if not swizzle or rows > MAX_BOX or rows < 8:
        return None
    return TensorMapSpec(base, shape, strides, desc.element.name, (swizzle // eb, rows), swizzle,
                         desc.padding == "nan", cols)


def tma_enabled(capability: int, checked: bool) -> bool:
    return capability >= 90 and bool(knobs.tma) and bool(knobs.wgmma) and not checked


def tma_loads(kernel: Kernel, num_warps: int, capability: int) -> set[Instr]:
    """The descriptor loads the pipeliner will turn into TMA rings (see the module
    docstring); the rest of the kernel's descriptor accesses become pointer code."""
    from .pipeline_candidates import feeds_wgmma_only

    out: set[Instr] = set()
    uses = users_of(kernel.body)
    for loop in kernel.walk():
        if loop.op is not Op.FOR:
            continue
        body = loop.regions[0]
        for ins in body.instrs:
            if ins.op is not Op.DESCRIPTOR_LOAD:
                continue
            make = ins.operands[0].owner
            eb = ins.operands[0].type.element.bytes
            if eb not in (1, 2) or tensormap_spec(make, kernel) is None:
                continue
            if eb == 1 and not _read_k_major(ins, body, uses):
                continue  # an 8-bit box along N or M: staged and transposed by the cp.async path
            if feeds_wgmma_only(ins, body, uses, num_warps, capability):
                out.add(ins)
    return out


def _read_k_major(load: Instr, body, uses: dict) -> bool:
    """Whether every dot reading a descriptor block takes it with its contiguous (last)
    dimension as K: directly as A ([M, K]) or through a transpose as B (an [N, K] block,
    tutorial 09's), the layouts an 8-bit wgmma operand's slot must have."""
    from .pipeline_candidates import transposed_by

    res = load.results[0]
    perm = transposed_by(res, body, uses)
    value, operand = (perm.results[0], 1) if perm is not None else (res, 0)
    readers = uses.get(value, [])
    return bool(readers) and all(u.op is Op.DOT and u.operands[operand] is value
                                 and u.operands[1 - operand] is not value for u in readers)


def tma_stores(kernel: Kernel) -> set[Instr]:
    """The descriptor stores TMA writes (sm_90a): 2-D blocks of a descriptor the host can
    encode a map of (`tensormap_spec`). The block goes through shared-memory scratch in
    the map's swizzled layout, from which one thread issues the bulk copies (see
    `lower_tma.lower_descriptor_store`); the parts outside the tensor are not written,
    as a descriptor store's are not."""
    out: set[Instr] = set()
    for ins in kernel.walk():
        if ins.op is not Op.DESCRIPTOR_STORE:
            continue
        spec = tensormap_spec(ins.operands[0].owner, kernel)
        # the tensor's rows must be known to end on a 16-byte boundary: on the H200 a
        # box crossing a row end elsewhere (45 f32 columns) wrote the elements past it
        # up to the next 16 bytes (tests/e2e/test_tensor_descriptors.py)
        eb = ins.operands[0].type.element.bytes
        if spec is not None and _divisibility(spec.shape[-1], kernel) * eb >= 16:
            out.add(ins)
    return out


def tensormap_params(kernel: Kernel) -> list[tuple[Instr, TensorMapSpec]]:
    """The `make_tensor_descriptor`s of a tgir kernel (those left for TMA), in order,
    each with its host recipe: the kernel's tensor-map parameters, after its own (and
    checked mode's)."""
    out = []
    for ins in kernel.walk():
        if ins.op is Op.MAKE_TENSOR_DESCRIPTOR:
            spec = tensormap_spec(ins, kernel)
            if spec is None:
                raise CompilationError("a tensor descriptor left for TMA has parts the host cannot compute",
                                       ins.loc)
            out.append((ins, spec))
    return out
