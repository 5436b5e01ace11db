"""The client's latest observed HybridTime (the Kudu paper's timestamp propagation).

Every response carries its server's timestamp; a client keeps the largest it has seen
and sends it with each request, and the server moves its clock past it. So whatever
server a client reads from next, the read is not older than what it has already seen
(Kudu's ``KuduClient::GetLatestObservedTimestamp``).

``LatestObserved`` is pure: no clock, no lock. A client shared between threads guards
it with its own lock.
"""

from __future__ import annotations

__all__ = ["LatestObserved"]


class LatestObserved:
    """The largest HybridTime observed so far; ``None`` until the first one."""

    __slots__ = ("_value",)

    def __init__(self, initial: int | None = None) -> None:
        self._value = initial

    @property
    def value(self) -> int | None:
        return self._value

    def observe(self, timestamp: int | None) -> None:
        """Take a timestamp from a response; the value never moves backwards."""
        if timestamp is None:
            return
        if self._value is None or timestamp > self._value:
            self._value = timestamp
