"""The simulated network: it drops, duplicates, delays and reorders messages under a seed."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class NetworkFaults:
    """Probabilities of losing and of duplicating a message, and the longest delay (s)."""

    drop: float = 0.0
    duplicate: float = 0.0
    max_delay: float = 0.0


@dataclass(frozen=True)
class Envelope:
    deliver_at: float
    number: int  # send order, for a readable trace
    destination: str
    payload: object


class SimNetwork:
    """Messages in flight; ``take`` hands out a random one whose delay has passed."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self.faults = NetworkFaults()
        self._in_flight: list[Envelope] = []
        self._sent = 0

    def send(self, destination: str, payload: object, now: float) -> None:
        if self._rng.random() < self.faults.drop:
            return
        copies = 2 if self._rng.random() < self.faults.duplicate else 1
        for _ in range(copies):
            delay = self._rng.uniform(0.0, self.faults.max_delay)
            self._in_flight.append(Envelope(now + delay, self._sent, destination, payload))
        self._sent += 1

    def take(self, now: float) -> Envelope | None:
        ready = [i for i, e in enumerate(self._in_flight) if e.deliver_at <= now]
        if not ready:
            return None
        return self._in_flight.pop(self._rng.choice(ready))

    def take_any(self) -> Envelope | None:
        """The oldest-due message regardless of its delay (for draining)."""
        if not self._in_flight:
            return None
        i = min(range(len(self._in_flight)), key=lambda j: self._in_flight[j].deliver_at)
        return self._in_flight.pop(i)

    def __len__(self) -> int:
        return len(self._in_flight)
