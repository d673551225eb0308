"""A placed shared-memory buffer as the lowering sees it (`SharedBuffer`): where its
slots are, and the swizzled layout of a slot. `lower_shared` makes one per
`local_alloc`; `lower_wgmma` one for a B operand it stores into a dot's scratch."""
from __future__ import annotations

from dataclasses import dataclass

from ...ir.types import ScalarType
from .linear_layout import BitMap


@dataclass(frozen=True)
class SharedBuffer:
    offset: int            # bytes from the start of shared memory
    slot_bytes: int
    end: int               # offset + all slots' bytes
    offsets: BitMap        # a slot's flat index → element offset in the slot
    element: ScalarType
    along_rows: bool       # copies into it run along a slot's rows (B's K, or A's M)

    @property
    def one_slot(self) -> bool:
        """A buffer of one slot (an operand staged once), not a ring."""
        return self.end - self.offset <= self.slot_bytes
