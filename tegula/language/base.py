"""`base_value` and `base_type`: the roots of Triton's value and type hierarchies
(`triton.language.core.base_value` / `base_type`). Libraries test
`isinstance(x, tl.core.base_value)` to tell a kernel value from a Python one, so
`tensor` derives from `base_value` and `dtype` from `base_type`; neither adds behaviour.
"""


class base_value:
    """A value that exists inside a compiled kernel (a tensor, a block pointer, ...)."""


class base_type:
    """The type of such a value (`dtype`, `pointer_type`, `block_type`)."""
