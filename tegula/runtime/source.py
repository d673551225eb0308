"""What `compile()` compiles: `ASTSource` (a @jit function and its specialization, as
Triton's `triton.compiler.ASTSource`) or `IRSource` (a `.tir` / `.tir_opt` text file).

Both normalize their inputs to the compiler's form: dicts keyed by parameter name, in
parameter order. ASTSource accepts Triton's spellings too: keys given as parameter
indices or 1-tuples of indices (`{(2,): 16}`), attributes given as
`[["tt.divisibility", 16]]`, and the bool type `u1`.
"""
from __future__ import annotations

import hashlib
import os
import re
from typing import Any, Mapping, NamedTuple, Optional

from ..errors import KernelArgumentError
from ..ir.core import ArgAttrs
from .arg_trees import expand_type, is_tree_type, tree_text
from .cache import stable_repr


def _param_name(key: Any, names: list[str], what: str) -> str:
    if isinstance(key, tuple) and len(key) == 1:
        key = key[0]
    elif isinstance(key, tuple) and key and all(isinstance(k, int) for k in key) and 0 <= key[0] < len(names):
        key = ".".join([names[key[0]], *map(str, key[1:])])  # Triton's path of a tuple leaf
    if isinstance(key, int) and not isinstance(key, bool):
        if 0 <= key < len(names):
            return names[key]
    elif isinstance(key, str) and key in names:
        return key
    raise KernelArgumentError(f"{what} names no parameter {key!r} (parameters: {', '.join(names)})")


def _by_name(mapping: Optional[Mapping[Any, Any]], names: list[str], what: str) -> dict[str, Any]:
    return {_param_name(k, names, what): v for k, v in (mapping or {}).items()}


def _type_text(t: Any) -> str:
    if not isinstance(t, str):
        t = str(getattr(t, "name", t))
    t = t.strip()
    return {"u1": "i1", "*u1": "*i1"}.get(t, t)


def _unwrap(v: Any) -> Any:
    return getattr(v, "value", v) if type(v).__name__ == "constexpr" else v


def _attrs(value: Any, name: str) -> ArgAttrs:
    if isinstance(value, ArgAttrs):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return ArgAttrs(divisibility=value)
    if value == "D":  # Triton's specialization key for "divisible by 16"
        return ArgAttrs(divisibility=16)
    if isinstance(value, Mapping):
        div = value.get("divisibility", value.get("tt.divisibility", 1))
        return ArgAttrs(divisibility=int(div))
    if isinstance(value, (list, tuple)):
        div = 1
        for pair in value:
            if len(pair) == 2 and pair[0] in ("tt.divisibility", "divisibility"):
                div = int(pair[1])
        return ArgAttrs(divisibility=div)
    raise KernelArgumentError(f"cannot read attributes {value!r} of parameter '{name}'")


class SpecializationProxy(NamedTuple):
    """What `@jit(repr=fn)` is called with (Triton's `SpecializationProxy`): `constants`,
    the parameters bound at compile time (constexprs, ints specialized because they
    equal 1, None) by name, and `signature`, every parameter's type string by name
    (`i32`, `u64`, `*fp32`, `*kfp32` for a `tl.const` pointer, `constexpr`)."""

    constants: dict
    signature: dict


_PTX_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def _kernel_name(fn: Any, raw_sig: Mapping[str, Any], signature: Mapping[str, str],
                 constexprs: Mapping[str, Any]) -> str:
    """The compiled kernel's name: the Python function's, or what its `@jit(repr=...)`
    callable makes of the specialization (as Triton 3.6 names the kernel function, and
    so `CompiledKernel.name` and the PTX entry, after `fn.repr(proxy)`)."""
    make = getattr(fn, "_repr", None)
    if make is None:
        return fn.__name__
    params = [p.name for p in fn.params]
    constants = {n: constexprs[n] for n in params if n in constexprs}
    sig = {n: signature.get(n, raw_sig.get(n)) for n in params}
    name = make(SpecializationProxy(constants, sig))
    if not isinstance(name, str) or not _PTX_NAME.fullmatch(name):
        raise KernelArgumentError(
            f"repr= of kernel '{fn.__name__}' returned {name!r}; a kernel name must be a string of "
            "letters, digits, '_' and '$', not starting with a digit (it names the compiled function)")
    return name


class ASTSource:
    """A @jit function specialized by `signature` (param → `*fp32`, `i32`, `constexpr`, ...,
    or for a tuple parameter a nested tuple of those, for a host tensor descriptor
    `tensordesc<fp16[64, 64]>`), `constexprs` (param or leaf → value) and `attrs` (param or
    leaf → ArgAttrs or Triton's form). Leaves of tuple parameters are named by their
    path, `t.1.0`, or keyed by Triton's index paths `(i, 1, 0)` (see `arg_trees`)."""

    def __init__(self, fn: Any, signature: Mapping[Any, Any], constexprs: Optional[Mapping[Any, Any]] = None,
                 attrs: Optional[Mapping[Any, Any]] = None):
        if not getattr(fn, "_tegula_jit", False):
            raise TypeError(f"ASTSource needs a @jit function, got {type(fn).__name__}")
        self.fn = fn
        self.name: str = fn.__name__
        names = list(fn.arg_names)
        raw_sig = _by_name(signature, names, "signature")
        # tuple / descriptor parameters expand into leaves, each a parameter of its own
        self.arg_trees: dict[str, Any] = {}
        leaf_types: dict[str, list[tuple[str, str]]] = {}
        for n, t in raw_sig.items():
            if is_tree_type(t):
                self.arg_trees[n], leaf_types[n] = expand_type(n, t)
        all_names = names + [leaf for leaves in leaf_types.values() for leaf, _ in leaves]
        sig = {n: _type_text(t) for n, t in raw_sig.items() if n not in self.arg_trees}
        for leaves in leaf_types.values():
            sig.update((leaf, _type_text(t)) for leaf, t in leaves)
        cx = {n: _unwrap(v) for n, v in _by_name(constexprs, all_names, "constexprs").items()}
        raw_attrs = _by_name(attrs, all_names, "attrs")
        self.param_names: list[str] = []
        self.signature: dict[str, str] = {}
        self.constexprs: dict[str, Any] = {}
        self.attrs: dict[str, ArgAttrs] = {}
        missing = []
        for p in fn.params:
            entries = ([(leaf, False, False, None) for leaf, _ in leaf_types[p.name]] if p.name in self.arg_trees
                       else [(p.name, p.is_constexpr, p.has_default, p.default)])
            for n, is_cx, has_default, default in entries:
                self.param_names.append(n)
                declared = sig.get(n)
                if n in cx or declared == "constexpr" or (declared is None and is_cx):
                    if n in cx:
                        self.constexprs[n] = cx[n]
                    elif has_default:
                        self.constexprs[n] = _unwrap(default)
                    elif self.arg_trees.get(n.rsplit(".", 1)[0], ("",))[0] == "tensordesc":
                        self.constexprs[n] = 1  # a host descriptor's last stride
                    else:
                        missing.append(f"{n} (a constexpr: give its value in constexprs)")
                        continue
                    self.signature[n] = "constexpr"
                elif declared is None:
                    missing.append(n)
                else:
                    self.signature[n] = declared
                    self.attrs[n] = _attrs(raw_attrs.get(n, 1), n)
        if missing:
            raise KernelArgumentError(f"ASTSource for '{self.name}' lacks the type of: {', '.join(missing)}")
        self.name = _kernel_name(fn, raw_sig, self.signature, self.constexprs)

    @property
    def constants(self) -> dict[tuple, Any]:
        """The constexpr values as Triton's ASTSource keeps them: keyed by index path,
        `(i,)` for parameter i, `(i, 1, 0)` for a leaf of a tuple parameter. PyTorch's
        static launcher leaves these out of the arguments it passes to the cubin."""
        names = list(self.fn.arg_names)
        out: dict[tuple, Any] = {}
        for n, v in self.constexprs.items():
            root, *path = n.split(".")
            if root in names and all(p.isdigit() for p in path):
                out[(names.index(root), *map(int, path))] = v
        return out

    @property
    def source_file(self) -> str:
        """The file the kernel's source was read from: part of the compile key in
        checked mode only, whose accesses report it (the source key has no path)."""
        return self.fn.fn.__code__.co_filename

    def fn_key(self) -> str:
        key = self.fn.cache_key
        if self.arg_trees:
            trees = ";".join(f"{n}={tree_text(t)}" for n, t in self.arg_trees.items())
            key = f"{key}|trees:{trees}"
        if self.name != self.fn.__name__:
            # a `repr=` name is not a function of the source: it is part of the key
            key = f"{key}|name:{self.name}"
        return key

    def make_ir(self, target: Any, options: Any, codegen_fns: Any, module_map: Any, context: Any) -> Any:
        """Triton's entry for tools that read a kernel's TTIR through its MLIR bindings
        (PyTorch's mutation analysis of user kernels): a TTIR-shaped summary of which
        arguments the kernel reads and writes, from tegula's analyses of its optimized
        IR (`compat_surface.ttir_summary`)."""
        from ..compat_surface.ttir_summary import summarize
        from ..passes import read_arguments, written_arguments
        from .compiler import optimized_ir

        kernel = optimized_ir(self, options)
        args = [(n, a.type) for n, a in zip(kernel.arg_names, kernel.args)]
        return summarize(self.name, args, written_arguments(kernel), read_arguments(kernel))

    def hash(self) -> str:
        """Identity of the source and its specialization (not of options or target)."""
        h = hashlib.sha256(self.fn_key().encode())
        h.update(repr(sorted(self.signature.items())).encode())
        h.update(repr([(k, stable_repr(v)[0]) for k, v in self.constexprs.items()]).encode())
        h.update(repr([(k, a.divisibility, a.exact_divisibility) for k, a in self.attrs.items()]).encode())
        return h.hexdigest()

    def __repr__(self) -> str:
        return f"ASTSource({self.name}, {self.signature})"


class IRSource:
    """A kernel from the text of a tile IR stage: a path ending in `.tir` / `.tir_opt`,
    or the text itself with `stage` given."""

    def __init__(self, path_or_text: str, stage: Optional[str] = None):
        if stage is None:
            ext = os.path.splitext(path_or_text)[1].lstrip(".")
            if ext not in ("tir", "tir_opt"):
                raise ValueError(f"cannot compile {path_or_text!r}: expected a .tir or .tir_opt file")
            with open(path_or_text) as f:
                text = f.read()
            stage = ext
        else:
            text = path_or_text
        from .compiler import _parse_ir

        kernel = _parse_ir(text)
        self.text = text
        self.stage = stage
        self.name: str = kernel.name
        self.param_names = list(kernel.arg_names)
        self.signature = {n: str(v.type) for n, v in zip(kernel.arg_names, kernel.args)}
        self.constexprs: dict[str, Any] = {}
        self.attrs = {n: a for n, a in zip(kernel.arg_names, kernel.arg_attrs)}

    def fn_key(self) -> str:
        return hashlib.sha256(f"{self.stage}|{self.text}".encode()).hexdigest()

    def hash(self) -> str:
        return self.fn_key()
