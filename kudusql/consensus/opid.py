"""OpId: the (term, index) that names one entry of a replica's log (the tablet's WAL).

OpIds order by term first, then index, which is the order the vote's up-to-date check
uses. Index 0 with term 0 is the position before the first entry.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class OpId:
    """One log position: the term of the leader that created the entry and its index."""

    term: int
    index: int

    def __str__(self) -> str:
        return f"{self.term}.{self.index}"


#: The position before the first entry of every log.
MINIMUM_OPID = OpId(0, 0)
