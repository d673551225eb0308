"""Kernel arguments made of several values: tuples, namedtuples and host-side tensor
descriptors (`triton.tools.tensor_descriptor.TensorDescriptor`), as Triton 3.6 passes them.

Such an argument is *flattened*: each leaf (a tensor, an int, a float, None, a
constexpr, a @jit function) is specialized like a parameter of its own, and the
compiler sees one parameter per leaf, named by its path (`t.1.0` is `t[1][0]`; a
descriptor `d` has leaves `d.0` = base, then its shape, then its strides). Inside the
kernel the frontend rebuilds the value from its leaves (`tree`), so the kernel sees a
`tl.tuple`, the same namedtuple class, or a `tl.tensor_descriptor`.

- spec of a tuple value: `("tuple", (leaf specs...), cls)` where cls is the namedtuple
  class or `tuple`; of a descriptor: `("tensordesc", (leaf specs...), (dtype, block_shape,
  padding))`. Both are hashable, so they are cache-key atoms as they are.
- a tree (what `ASTSource.arg_trees` holds and the frontend reads): a leaf is its dotted
  name (str); a node is `("tuple", cls_or_None, children)` or
  `("tensordesc", (block_shape, padding), children)`.
- signature text of a tree (ASTSource's input, Triton's AOT form): a nested tuple of
  type strings (a namedtuple instance keeps its class) or `tensordesc<fp16[64, 64]>`
  (`tensordesc<fp32[64, 64],nan>` for NaN padding).
"""
from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Sequence

from ..errors import KernelArgumentError

TUPLE, DESC = "tuple", "tensordesc"


def is_tree_spec(spec: tuple) -> bool:
    return spec[0] in (TUPLE, DESC)


def is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def is_host_descriptor(x: Any) -> bool:
    return getattr(type(x), "_tegula_host_descriptor", False)


# ---------------------------------------------------------------------------- specs

def spec_tuple(x: tuple, specialize: bool, align: bool, spec_value: Callable) -> tuple:
    cls = type(x) if is_namedtuple(type(x)) else tuple
    return (TUPLE, tuple(_leaf_spec(v, i, specialize, align, spec_value) for i, v in enumerate(x)), cls)


def _leaf_spec(v: Any, i: int, specialize: bool, align: bool, spec_value: Callable) -> tuple:
    from .specialization import UnsupportedArgument, describe_value

    try:
        return spec_value(v, specialize, align)
    except UnsupportedArgument as e:
        path = [i, *getattr(e, "tree_path", ())]
        leaf = getattr(e, "tree_leaf", v)
        inner = getattr(e, "leaf_why", e.why)
        why = f"its element {''.join(f'[{k}]' for k in path)} is a {describe_value(leaf)}"
        err = type(e)(v, why + (f" ({inner})" if inner else ""))  # an overflow stays one
        err.tree_path, err.tree_leaf, err.leaf_why = path, leaf, inner
        raise err from None


# the power-of-two divisor (up to 16) of an int by its low four bits (16 for a multiple
# of 16): specialization.pow2_divisor as a table, for the launch path below
_DIVISOR_BY_LOW_BITS = tuple(16 if i == 0 else i & -i for i in range(16))
_LAST_STRIDE = ("constexpr", 1, int)


def spec_descriptor(d: Any, specialize: bool, align: bool, spec_value: Callable) -> tuple:
    """A host TensorDescriptor: base pointer, shape as i32, strides as i64 (the last
    one, 1 by construction, as the constexpr 1). On every launch of a kernel taking
    descriptors (the generated launcher's slow path): kept to table lookups."""
    base = spec_value(d.base, specialize, align)
    if specialize and align:
        div = _DIVISOR_BY_LOW_BITS
        ints = [("i32", div[int(x) & 15], None) for x in d.shape]
        ints += [("i64", div[int(x) & 15], None) for x in d.strides[:-1]]
    else:
        ints = [("i32", 1, None) for _ in d.shape]
        ints += [("i64", 1, None) for _ in d.strides[:-1]]
    ints.append(_LAST_STRIDE)
    return (DESC, (base, *ints), (base[0][1:], tuple(map(int, d.block_shape)), d.padding))


# ---------------------------------------------------------------------------- specs -> signature

def signature_of(spec: tuple) -> Any:
    """The signature entry (nested type text) of a tree spec."""
    if spec[0] == DESC:
        dtype, block, padding = spec[2]
        pad = ",nan" if padding == "nan" else ""
        return f"tensordesc<{dtype}[{', '.join(map(str, block))}]{pad}>"
    if spec[0] == TUPLE:
        children = [signature_of(s) for s in spec[1]]
        cls = spec[2]
        return cls(*children) if cls is not tuple else tuple(children)
    return spec[0]


def leaf_specs(name: str, spec: tuple) -> Iterable[tuple[str, tuple]]:
    """(dotted name, spec) of every leaf of a tree spec, in order."""
    if not is_tree_spec(spec):
        yield name, spec
        return
    for i, s in enumerate(spec[1]):
        yield from leaf_specs(f"{name}.{i}", s)


def leaf_values(value: Any) -> Iterable[Any]:
    """The leaves of a tuple / descriptor argument, in the order of its tree."""
    if is_host_descriptor(value):
        yield value.base
        yield from value.shape
        yield from value.strides
    elif isinstance(value, tuple):
        for v in value:
            yield from leaf_values(v)
    else:
        yield value


# ---------------------------------------------------------------------------- signature -> tree

_DESC_RE = re.compile(r"^tensordesc<\s*(\*?\w+)\s*\[([\d,\s]*)\]\s*(?:,\s*(zero|nan)\s*)?>$")


def parse_descriptor_type(text: str) -> tuple[str, tuple[int, ...], str]:
    m = _DESC_RE.match(text.strip())
    if not m:
        raise KernelArgumentError(f"cannot read the descriptor type {text!r} "
                                  "(expected e.g. 'tensordesc<fp16[64, 64]>')")
    block = tuple(int(b) for b in m.group(2).split(",") if b.strip())
    return m.group(1), block, m.group(3) or "zero"


def is_tree_type(t: Any) -> bool:
    return isinstance(t, (tuple, list)) or (isinstance(t, str) and t.strip().startswith("tensordesc<"))


def expand_type(name: str, t: Any) -> tuple[Any, list[tuple[str, str]]]:
    """(tree, [(leaf name, leaf type text)]) of parameter `name` declared as `t`."""
    leaves: list[tuple[str, str]] = []

    def walk(path: str, t: Any) -> Any:
        if isinstance(t, str) and t.strip().startswith("tensordesc<"):
            dtype, block, padding = parse_descriptor_type(t)
            n = len(block)
            kinds = ["*" + dtype.lstrip("*")] + ["i32"] * n + ["i64"] * (n - 1) + ["constexpr"]
            names = [f"{path}.{i}" for i in range(len(kinds))]
            leaves.extend(zip(names, kinds))
            return (DESC, (block, padding), tuple(names))
        if isinstance(t, (tuple, list)):
            cls = type(t) if is_namedtuple(type(t)) else None
            return (TUPLE, cls, tuple(walk(f"{path}.{i}", c) for i, c in enumerate(t)))
        leaves.append((path, t))
        return path

    return walk(name, t), leaves


def tree_leaves(tree: Any) -> Iterable[str]:
    if isinstance(tree, str):
        yield tree
    else:
        for c in tree[2]:
            yield from tree_leaves(c)


def tree_text(tree: Any) -> str:
    """A process-independent text of a tree (for cache keys)."""
    if isinstance(tree, str):
        return tree
    info = tree[1]
    if isinstance(info, type):
        info = f"{info.__module__}.{info.__qualname__}{info._fields}"
    return f"{tree[0]}[{info}]({','.join(tree_text(c) for c in tree[2])})"


# ---------------------------------------------------------------------------- launching

def flattener(param_names: Sequence[str], trees: dict[str, Any]) -> Callable[[Sequence[Any]], list]:
    """A function from the values of the kernel's parameters to its flat leaf values."""
    flat = [name in trees for name in param_names]

    def flatten(values: Sequence[Any]) -> list:
        out: list = []
        for is_tree, v in zip(flat, values):
            if is_tree:
                out.extend(leaf_values(v))
            else:
                out.append(v)
        return out

    return flatten
