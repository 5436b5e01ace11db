"""The simulated network: messages are dropped, duplicated, delayed (hence reordered) and
blocked by partitions, all decided by the simulation's seeded random generator."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(slots=True)
class NetworkFaults:
    """The current fault rates; the simulator changes them as it goes."""

    drop: float = 0.0
    duplicate: float = 0.0
    min_delay_ms: int = 1
    max_delay_ms: int = 10


class SimNetwork:
    """Decides each message's fate: a list of delivery delays (empty when it is lost)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self.faults = NetworkFaults()
        #: The group of each server; messages cross only within a group.
        self._group: dict[str, int] = {}

    def partition(self, groups: list[list[str]]) -> None:
        self._group = {uuid: i for i, group in enumerate(groups) for uuid in group}

    def heal(self) -> None:
        self._group = {}

    @property
    def partitioned(self) -> bool:
        return bool(self._group)

    def connected(self, a: str, b: str) -> bool:
        return self._group.get(a, -1) == self._group.get(b, -1)

    def delays(self, src: str, dest: str) -> list[int]:
        """The delays after which copies of a message from src arrive at dest."""
        if not self.connected(src, dest):
            return []
        rng = self._rng
        faults = self.faults
        if faults.drop and rng.random() < faults.drop:
            return []
        copies = 2 if faults.duplicate and rng.random() < faults.duplicate else 1
        return [rng.randint(faults.min_delay_ms, faults.max_delay_ms) for _ in range(copies)]
