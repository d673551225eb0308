"""Debug line information for the generated PTX: a compile unit with
`DebugDirectivesOnly` emission (LLVM then writes `.file`/`.loc` directives and no DWARF
sections), one subprogram for the kernel, and a `DILocation` per IR source location so
profilers and `cuda-gdb` map PTX/SASS back to kernel lines."""
from __future__ import annotations

import os
from typing import Optional

import llvmlite.ir as ir

from ...ir.core import UNKNOWN_LOC, Loc


class LineInfo:
    def __init__(self, module: ir.Module, fn: ir.Function, loc: Loc):
        self.module = module
        self.files: dict[str, ir.DIValue] = {}
        self.locs: dict[tuple[str, int, int], ir.DIValue] = {}
        self.scopes: dict[str, ir.DIValue] = {}
        main = loc if loc != UNKNOWN_LOC else Loc("<tegula>", 0, 0)
        self.main_file = main.file
        f = self.file(main.file)
        self.cu = module.add_debug_info("DICompileUnit", {
            "language": ir.DIToken("DW_LANG_Python"), "file": f, "producer": "tegula",
            "runtimeVersion": 0, "isOptimized": True,
            "emissionKind": ir.DIToken("DebugDirectivesOnly"),
        }, is_distinct=True)
        self.sp = module.add_debug_info("DISubprogram", {
            "name": fn.name, "file": f, "line": main.line, "scopeLine": main.line,
            "unit": self.cu, "spFlags": ir.DIToken("DISPFlagDefinition | DISPFlagOptimized"),
            "type": module.add_debug_info("DISubroutineType", {"types": module.add_metadata([])}),
        }, is_distinct=True)
        fn.set_metadata("dbg", self.sp)
        module.add_named_metadata("llvm.dbg.cu", self.cu)
        i32 = ir.IntType(32)
        module.add_named_metadata("llvm.module.flags",
                                  [ir.Constant(i32, 2), "Debug Info Version", ir.Constant(i32, 3)])
        module.add_named_metadata("llvm.module.flags",
                                  [ir.Constant(i32, 2), "Dwarf Version", ir.Constant(i32, 4)])
        self.entry = self.location(main)

    def file(self, path: str) -> ir.DIValue:
        if path not in self.files:
            self.files[path] = self.module.add_debug_info("DIFile", {
                "filename": os.path.basename(path) or path,
                "directory": os.path.dirname(path),
            })
        return self.files[path]

    def scope(self, path: str) -> ir.DIValue:
        """The subprogram, or a lexical block file for lines from another file (code
        inlined from a @jit function defined elsewhere)."""
        if path == self.main_file:
            return self.sp
        if path not in self.scopes:
            self.scopes[path] = self.module.add_debug_info("DILexicalBlockFile", {
                "scope": self.sp, "file": self.file(path), "discriminator": 0})
        return self.scopes[path]

    def location(self, loc: Optional[Loc]) -> ir.DIValue:
        if loc is None or loc == UNKNOWN_LOC:
            return self.entry if hasattr(self, "entry") else self._make(Loc(self.main_file, 0, 0))
        return self._make(loc)

    def _make(self, loc: Loc) -> ir.DIValue:
        key = (loc.file, loc.line, loc.col)
        if key not in self.locs:
            self.locs[key] = self.module.add_debug_info("DILocation", {
                "line": max(loc.line, 0), "column": loc.col + 1, "scope": self.scope(loc.file)})
        return self.locs[key]
