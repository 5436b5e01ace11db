"""When a failed call is tried again: exponential backoff with jitter under a deadline.

Pure: the random source and the elapsed time are inputs. Only failures that show the
server was not reached or not answering (unavailable, timed out) are retried, and only
for calls that are idempotent; the client decides which calls those are.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kudusql.common.errors import ProgrammingError

__all__ = ["RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """``max_attempts`` tries in all, within ``deadline`` seconds of the first one.

    The wait before retry ``n`` (``n = 1`` after the first failure) is drawn uniformly
    from ``[d/2, d]`` with ``d = min(max_backoff, initial_backoff * multiplier**(n-1))``:
    it grows exponentially, and the jitter keeps clients that failed together from
    retrying together.
    """

    max_attempts: int = 6
    initial_backoff: float = 0.05
    multiplier: float = 2.0
    max_backoff: float = 1.0
    deadline: float = 10.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ProgrammingError("max_attempts is at least 1")
        if not 0 < self.initial_backoff <= self.max_backoff:
            raise ProgrammingError("0 < initial_backoff <= max_backoff")
        if self.multiplier < 1 or self.deadline <= 0:
            raise ProgrammingError("multiplier >= 1 and deadline > 0")

    def backoff(self, retry: int, rng: random.Random) -> float:
        """The wait, in seconds, before retry number ``retry`` (1, 2, ...)."""
        ceiling = min(self.max_backoff, self.initial_backoff * self.multiplier ** (retry - 1))
        return rng.uniform(ceiling / 2, ceiling)

    def next_wait(self, attempts_made: int, elapsed: float, rng: random.Random) -> float | None:
        """The wait before the next attempt, or ``None`` to give up: no attempt is left,
        or the wait would end past the deadline."""
        if attempts_made >= self.max_attempts:
            return None
        wait = self.backoff(attempts_made, rng)
        if elapsed + wait >= self.deadline:
            return None
        return wait
