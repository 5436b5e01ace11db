"""The set of rowsets a tablet serves reads and writes from, replaced as a whole."""

from __future__ import annotations

from dataclasses import dataclass

from kudusql.storage.tablet.diskrowset import DiskRowSet
from kudusql.storage.tablet.memrowset import MemRowSet


@dataclass(frozen=True)
class RowSets:
    """The rowsets a reader captured: replaced as a whole, never changed in place."""

    mrs: MemRowSet
    frozen: tuple[MemRowSet, ...]
    drs: tuple[DiskRowSet, ...]
