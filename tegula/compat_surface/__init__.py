"""Triton modules whose shape tegula's own layout does not have.

`tegula.compat` maps `triton.X` to `tegula.X`; a few Triton modules describe Triton's
plug-in structure rather than anything tegula is built from, and live here so that
tegula's own packages keep their import rules (DESIGN.md §8):

- `backends` (`triton.backends`): the `backends` registry of `Backend(compiler, driver)`
  pairs, `backends.compiler` (`BaseBackend`, `GPUTarget`) and `backends.driver`
  (`DriverBase`, `GPUDriver`), as PyTorch's Inductor and Dynamo look them up.

Each module here only adapts: the work is done by `tegula.runtime` (compile, launch,
drivers) and the backends it registers.
"""
