"""Where a new tablet replica goes: Kudu's power of two choices.

Two distinct live tablet servers are drawn at random and the less loaded one wins. A
server's load is the replicas the catalog assigns to it plus its recent picks, a count
that decays with a half-life (Kudu's "recent replica creations"), so a batch of tablets
created at once spreads out even before any of them is reported. Time and randomness
are inputs: the same calls with the same seed pick the same servers.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

#: The half-life of a recent pick's weight, as Kudu's (60 s).
RECENT_PICKS_HALF_LIFE = 60.0


class RecentPicks:
    """Per-server decaying counts of recent placements."""

    def __init__(self, half_life: float = RECENT_PICKS_HALF_LIFE) -> None:
        self._half_life = half_life
        self._picks: dict[str, tuple[float, float]] = {}  # uuid -> (count, as of time)

    def value(self, uuid: str, now: float) -> float:
        count, since = self._picks.get(uuid, (0.0, now))
        decay: float = 0.5 ** (max(0.0, now - since) / self._half_life)
        return count * decay

    def record(self, uuid: str, now: float) -> None:
        self._picks[uuid] = (self.value(uuid, now) + 1.0, now)


def pick_tserver(
    candidates: Sequence[str],
    hosted: Mapping[str, int],
    recent: RecentPicks,
    rng: random.Random,
    now: float,
) -> str | None:
    """The server a new replica goes to among ``candidates`` (live servers), or None.

    ``hosted`` counts the replicas the catalog assigns to each server. The pick is
    recorded in ``recent``.
    """
    if not candidates:
        return None
    ordered = sorted(candidates)
    if len(ordered) == 1:
        chosen = ordered[0]
    else:
        pair = rng.sample(ordered, 2)
        loads = [hosted.get(u, 0) + recent.value(u, now) for u in pair]
        least = [u for u, load in zip(pair, loads, strict=True) if load == min(loads)]
        chosen = least[0] if len(least) == 1 else rng.choice(least)  # a tie: at random
    recent.record(chosen, now)
    return chosen
