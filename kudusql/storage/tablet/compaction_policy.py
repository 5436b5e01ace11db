"""Choose which DiskRowSets a merging compaction should rewrite (Kudu's budgeted policy).

This module owns only the *selection*: given each rowset's size, key bounds and UNDO
statistics it says which rowsets to merge and how much that is worth. It does no I/O and
knows nothing of the rowsets themselves; the caller runs the compaction.

The cost of a point operation grows with the tablet *height* at its key (how many rowsets
cover it), so the policy minimises the average height over a data-weighted key space:

1. Normalise the keys into a CDF weighted by data. Between consecutive bound keys, every
   rowset covering the interval contributes its bytes times the share of its own key range
   the interval spans; a key's position in a rowset is the 8 bytes after the common prefix
   of that rowset's min and max key, read big-endian. A rowset's *width* is
   ``cdf(max) - cdf(min)``; the average height is the sum of the widths.
2. Compacting a set S into one rowset removes the sum of their widths and adds back the
   width of their span. Each rowset is a knapsack item of value
   ``width + small_rowset_tradeoff * max(0, 1 - size / target)`` and weight
   ``max(1, ceil(MiB))``; the objective of S is ``value(S) - span(S)``, with the span taxed
   by 1.003 once the values exceed it (so reshuffling big overlapping rowsets is not free).
3. Search every span ``[A.min, B.max]``: for each rowset A, add the rowsets B whose min key
   is not below A's in ascending max-key order, and solve a knapsack over those that lie
   inside. Pass 1 uses the greedy fractional knapsack for lower and upper bounds; pass 2
   runs an exact 0/1 dynamic programme (capacity: the budget in MiB) only for the A whose
   upper bound beats the best so far by more than 5%. Both passes stop widening a span
   once it is wider than the fractional knapsack of every rowset (no choice is worth
   more) less the best found: no wider span can win, so the choice is the same.
4. Compact nothing if the best objective is at most ``minimum_improvement``. Small-rowset
   merges wait for a full rowset: a choice whose *height gain* alone (its widths minus its
   span) is at most ``minimum_improvement`` is worth it only for the small-rowset term, and
   is taken only once its inputs make a full rowset (``target_rowset_bytes`` in all) or
   number ``small_rowset_merge_inputs`` (so a slowly filled table of tiny flushes still
   merges). Otherwise the search runs again with the term off, so that a height-driven
   merge elsewhere is not blocked. Kudu flushes MemRowSets of up to 1 GiB, so its small
   rowsets are rare; ours (in tests and benchmarks) flush at a few MiB, and under
   sequential inserts each flush lies next to the last: the term alone merged every new
   4 MiB flush into its growing neighbour (4+4, 8+4, ... 28+4), rewriting each byte about
   four times where waiting rewrites it once.
5. Compact nothing either if too much of the chosen rowsets' UNDO data is already ancient
   (UNDO GC should run first).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate, pairwise

import numpy as np
import numpy.typing as npt

_MIB = 1024 * 1024
# Tax on the span of a selection whose values exceed it (see module docstring, step 2).
_SPAN_TAX = 1.003
# Pass 2 re-solves a window exactly only if its upper bound beats the best by this factor.
_APPROXIMATION_RATIO = 1.05
# Added to the bound before a span is given up (``_Problem._hopeless``): float sums of
# the same values in another order may differ in the last bits.
_BOUND_SLACK = 1e-9
_POSITION_BYTES = 8


@dataclass(frozen=True)
class RowSetInfo:
    """What the policy needs to know about one DiskRowSet."""

    id: int  # rowset id
    size_bytes: int  # base + delta bytes on disk
    min_key: bytes  # memcomparable encoded min / max primary key (inclusive)
    max_key: bytes
    undo_bytes: int = 0  # UNDO delta bytes of the rowset
    ancient_undo_bytes: int = 0  # of which entirely older than the ancient history mark

    def __post_init__(self) -> None:
        if self.size_bytes < 0:
            raise ValueError(f"rowset {self.id}: negative size {self.size_bytes}")
        if self.min_key > self.max_key:
            raise ValueError(f"rowset {self.id}: min key is above max key")
        if not 0 <= self.ancient_undo_bytes <= self.undo_bytes:
            raise ValueError(
                f"rowset {self.id}: need 0 <= ancient_undo_bytes <= undo_bytes, got "
                f"{self.ancient_undo_bytes} and {self.undo_bytes}"
            )


@dataclass(frozen=True)
class PolicyOptions:
    """Tunables, named after Kudu's flags.

    Kudu also insists that ``small_rowset_tradeoff < minimum_improvement`` (otherwise the
    output of a small-rowset merge can be worth merging again); that is left to the caller.
    """

    budget_mb: float = 256.0  # --tablet_compaction_budget_mb
    small_rowset_tradeoff: float = 0.009  # --compaction_small_rowset_tradeoff
    target_rowset_bytes: int = 32 * 1024 * 1024  # --budgeted_compaction_target_rowset_size
    minimum_improvement: float = 0.01  # --compaction_minimum_improvement
    max_ancient_undo_fraction: float = 0.2  # --rowset_compaction_ancient_delta_max_ratio
    # Not in Kudu: a merge only the small-rowset term pays for also runs once it has this
    # many inputs, even if they make less than a full rowset (module docstring, step 4).
    small_rowset_merge_inputs: int = 8

    def __post_init__(self) -> None:
        if not self.budget_mb > 0:
            raise ValueError(f"budget_mb must be positive, got {self.budget_mb}")
        if self.target_rowset_bytes <= 0:
            raise ValueError(
                f"target_rowset_bytes must be positive, got {self.target_rowset_bytes}"
            )
        if self.small_rowset_tradeoff < 0 or self.minimum_improvement < 0:
            raise ValueError("small_rowset_tradeoff and minimum_improvement must be >= 0")
        if self.max_ancient_undo_fraction < 0:
            raise ValueError("max_ancient_undo_fraction must be >= 0")
        if self.small_rowset_merge_inputs < 2:
            raise ValueError(
                f"small_rowset_merge_inputs must be >= 2, got {self.small_rowset_merge_inputs}"
            )


@dataclass(frozen=True)
class Selection:
    """The rowsets to compact together, and what doing so is worth."""

    ids: tuple[int, ...]  # chosen rowset ids, ascending ('' tuple = compact nothing)
    # The objective value of the choice (knapsack value - union width), measured over the
    # span in which the search found it, so never above the choice's own objective; 0.0
    # when nothing is chosen. A height-driven choice found by the search without the
    # small-rowset term (module docstring, step 4) is valued without the term.
    quality: float


_NOTHING = Selection((), 0.0)


def _weight_mb(size_bytes: int) -> int:
    """Knapsack weight of a rowset: its size in MiB rounded up, at least 1."""
    return max(1, -(-size_bytes // _MIB))


def _common_prefix_len(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _position(key: bytes, skip: int) -> int:
    """The 8 bytes of ``key`` after ``skip`` bytes, zero-padded, as a big-endian integer."""
    return int.from_bytes(key[skip : skip + _POSITION_BYTES].ljust(_POSITION_BYTES, b"\0"), "big")


@dataclass(frozen=True)
class _Cdf:
    """Unnormalised data-weighted CDF evaluated at each rowset's bounds."""

    at_min: list[float]  # per input rowset: data strictly below its min key
    at_max: list[float]  # per input rowset: data strictly below its max key
    total: float  # all data (the normaliser)


def _cdf(infos: Sequence[RowSetInfo]) -> _Cdf:
    keys = sorted({k for r in infos for k in (r.min_key, r.max_key)})
    slot = {k: i for i, k in enumerate(keys)}
    partial = [0.0] * len(keys)  # contributions of rowsets whose range the key lies inside
    whole = [0.0] * len(keys)  # sizes of rowsets that end at the key (summed prefix-wise)
    for r in infos:
        skip = _common_prefix_len(r.min_key, r.max_key)
        lo = _position(r.min_key, skip)
        span = _position(r.max_key, skip) - lo
        if span == 0 or r.size_bytes == 0:
            continue  # a single position: no share of any interval, as in Kudu
        scale = r.size_bytes / span
        first, last = slot[r.min_key], slot[r.max_key]
        for i in range(first + 1, last):
            partial[i] += (_position(keys[i], skip) - lo) * scale
        whole[last] += r.size_bytes
    cdf = [p + w for p, w in zip(partial, accumulate(whole), strict=True)]
    return _Cdf(
        at_min=[cdf[slot[r.min_key]] for r in infos],
        at_max=[cdf[slot[r.max_key]] for r in infos],
        total=cdf[-1] if cdf else 0.0,
    )


def average_height(infos: Sequence[RowSetInfo]) -> float:
    """Data-weighted average number of rowsets covering a key (0.0 when there is no data).

    Equal to the sum of the normalised rowset widths: one rowset covering everything gives
    1, two identical rowsets 2, disjoint rowsets 1 whatever the gaps between them.
    """
    cdf = _cdf(infos)
    if cdf.total <= 0:
        return 0.0
    return sum(hi - lo for lo, hi in zip(cdf.at_min, cdf.at_max, strict=True)) / cdf.total


def _fractional_bound(weights: Sequence[int], values: Sequence[float], capacity: int) -> float:
    """The best value of items within ``capacity`` when the last one may be taken in
    part (greedy by value per weight): no whole choice is worth more."""
    total = 0.0
    room = capacity
    for w, v in sorted(zip(weights, values, strict=True), key=lambda x: -x[1] / x[0]):
        if w <= room:
            total += v
            room -= w
        else:
            return total + v * room / w
    return total


def _objective(value: float, span: float) -> float:
    """Knapsack value minus the span it will occupy, taxed when the values exceed it."""
    return value - span if value <= span else value - _SPAN_TAX * span


def select_rowsets(
    infos: Sequence[RowSetInfo], options: PolicyOptions = PolicyOptions()
) -> Selection:
    """Pick the rowsets whose merge most reduces the average tablet height within budget."""
    return postpone_if_ancient(infos, options, search_rowsets(infos, options))


def search_rowsets(infos: Sequence[RowSetInfo], options: PolicyOptions) -> Selection:
    """``select_rowsets`` before the ancient-UNDO rule: what it reads of the rowsets is
    their ids, key bounds and sizes only (what ``PolicyMemo`` keys on)."""
    if len({r.id for r in infos}) != len(infos):
        raise ValueError("rowset ids must be distinct")
    if len(infos) < 2:
        return _NOTHING
    cdf = _cdf(infos)
    capacity = math.floor(options.budget_mb)
    if cdf.total <= 0 or capacity < 1:
        return _NOTHING
    problem = _Problem(infos, cdf, options, capacity)
    chosen, quality = problem.solve()
    if quality > options.minimum_improvement and not _merge_is_due(problem, infos, chosen):
        # Worth it only for the small-rowset term, and too small yet: look for a merge the
        # height alone pays for (none if the term is already off: then nothing is rejected).
        if _disjoint(infos) and options.minimum_improvement >= _BOUND_SLACK:
            return _NOTHING  # no merge lowers their height (see _disjoint)
        height_only = replace(options, small_rowset_tradeoff=0.0)
        chosen, quality = _Problem(infos, cdf, height_only, capacity).solve()
    # One rowset alone merges with nothing: it is never due, and never chosen without the
    # small-rowset term.
    if len(chosen) < 2 or quality <= options.minimum_improvement:
        return _NOTHING
    return Selection(tuple(sorted(infos[i].id for i in chosen)), quality)


def _disjoint(infos: Sequence[RowSetInfo]) -> bool:
    """No two rowsets share more than a bound key (a sequential load's rowsets).

    Then a search without the small-rowset term finds nothing: the CDF is monotone, so
    the widths of rowsets that do not overlap sum to at most their span, and any choice's
    objective is at most 0 (``_objective``; where float sums put the values above the
    span by a few ulps, the tax makes it negative, or positive by far less than
    ``_BOUND_SLACK``). Skipping that search cut the policy's time by a third (6.6 ->
    4.4 ms at 266 rowsets) on a sequential tablet, whose tail of fresh flushes is a
    small-rowset merge not due yet at almost every search."""
    ordered = sorted((r.min_key, r.max_key) for r in infos)
    return all(a[1] <= b[0] for a, b in pairwise(ordered))


def postpone_if_ancient(
    infos: Sequence[RowSetInfo], options: PolicyOptions, sel: Selection
) -> Selection:
    """Nothing, instead of ``sel``, while too much of its rowsets' UNDO bytes are
    ancient (UNDO GC would drop them first: merging would rewrite them for nothing)."""
    ids = set(sel.ids)
    picked = [r for r in infos if r.id in ids]
    undo = sum(r.undo_bytes for r in picked)
    ancient = sum(r.ancient_undo_bytes for r in picked)
    if ancient > options.max_ancient_undo_fraction * undo:
        return _NOTHING
    return sel


def _merge_is_due(problem: _Problem, infos: Sequence[RowSetInfo], chosen: list[int]) -> bool:
    """Whether merging ``chosen`` may run now (module docstring, step 4): it lowers the
    height by more than the minimum improvement, or it is big enough a small-rowset merge."""
    options = problem.options
    widths = sum(problem.hi[i] - problem.lo[i] for i in chosen)
    span = max(problem.hi[i] for i in chosen) - min(problem.lo[i] for i in chosen)
    return (
        widths - span > options.minimum_improvement
        or sum(infos[i].size_bytes for i in chosen) >= options.target_rowset_bytes
        or len(chosen) >= options.small_rowset_merge_inputs
    )


#: What identifies a rowset to ``PolicyMemo``: id and key bounds.
_Shape = tuple[int, bytes, bytes]


class PolicyMemo:
    """The last search (``search_rowsets``), reused while the options are the same, the
    rowsets are the same ones (ids and key bounds), no rowset's size moved by more than
    ``1 / SIZE_SLACK`` of what it was, and the selection still fits the budget. UNDO
    bytes are not part of that test: ``select`` applies the ancient-UNDO rule to the
    kept search each time. The tablet asks at every maintenance poll and after every
    op; each delta flush grows every rowset a random update touched by a few KiB, so
    a memo of exact sizes would miss nearly always, and a search costs O(rowsets^2)
    (~13 ms at 170 rowsets). Sizes within a few percent do not change which rowsets
    overlap, only how much a merge is worth by as much.

    Threads may ask at once (the maintenance thread, a writer under back-pressure, a
    user's compaction): what is kept is one tuple, replaced whole."""

    SIZE_SLACK = 16

    def __init__(self) -> None:
        self._kept: tuple[list[_Shape], list[int], PolicyOptions, Selection] | None = None

    @staticmethod
    def _shape_of(infos: Sequence[RowSetInfo]) -> list[_Shape]:
        return [(r.id, r.min_key, r.max_key) for r in infos]

    def select(self, infos: Sequence[RowSetInfo], options: PolicyOptions) -> Selection:
        """``select_rowsets``, searching only when the kept search no longer holds (the
        ancient-UNDO rule, which reads UNDO bytes that every delta compaction and UNDO
        GC changes, is applied to it each time)."""
        sel = self.get(infos, options)
        if sel is None:
            sel = search_rowsets(infos, options)
            self.keep(infos, options, sel)
        return postpone_if_ancient(infos, options, sel)

    def get(self, infos: Sequence[RowSetInfo], options: PolicyOptions) -> Selection | None:
        """The kept search (``search_rowsets``) if it still holds for ``infos``."""
        kept = self._kept
        if kept is None:
            return None
        shape, sizes, kept_options, sel = kept
        if options != kept_options or self._shape_of(infos) != shape:
            return None
        slack = self.SIZE_SLACK
        for r, was in zip(infos, sizes, strict=True):
            if abs(r.size_bytes - was) * slack > was:
                return None
        ids = set(sel.ids)
        if sum(_weight_mb(r.size_bytes) for r in infos if r.id in ids) > options.budget_mb:
            return None  # grown past the budget: search again
        return sel

    def keep(self, infos: Sequence[RowSetInfo], options: PolicyOptions, sel: Selection) -> None:
        self._kept = (self._shape_of(infos), [r.size_bytes for r in infos], options, sel)


class _Problem:
    """The search over spans; rowsets are referred to by their index in the input."""

    def __init__(
        self, infos: Sequence[RowSetInfo], cdf: _Cdf, options: PolicyOptions, capacity: int
    ) -> None:
        n = len(infos)
        self.options = options
        self.capacity = capacity
        self.lo = [x / cdf.total for x in cdf.at_min]
        self.hi = [x / cdf.total for x in cdf.at_max]
        self.weight = [_weight_mb(r.size_bytes) for r in infos]
        target = options.target_rowset_bytes
        self.value = [
            (self.hi[i] - self.lo[i])
            + options.small_rowset_tradeoff * max(0.0, 1.0 - infos[i].size_bytes / target)
            for i in range(n)
        ]
        self.density = [self.value[i] / self.weight[i] for i in range(n)]
        self.min_key = [r.min_key for r in infos]
        self.by_min = sorted(range(n), key=lambda i: (infos[i].min_key, infos[i].max_key, i))
        # Rowsets heavier than the whole budget can never be chosen: leave them out of the
        # knapsacks (they still widen any span they lie in, through the CDF).
        self.by_max = [
            i
            for i in sorted(range(n), key=lambda i: (infos[i].max_key, infos[i].min_key, i))
            if self.weight[i] <= capacity
        ]
        self.max_keys = [infos[i].max_key for i in self.by_max]  # ascending
        self.best_value = 0.0
        self.best_set: list[int] = []
        # No choice within the budget is worth more than the fractional knapsack of all
        # the rowsets it admits, so a span at least that wide has an objective of at
        # most ``bound - span`` (``_objective``; the tax only lowers it): the passes stop
        # widening a span once that cannot beat the best found. Spans widen with each
        # rowset taken (ascending max key), and the best only grows, so every later one
        # is out too; skipped spans never win or reach the exact pass, so the choice is
        # the same as without the cut. With hundreds of disjoint rowsets (a sequential
        # load) this turns the O(rowsets^2) search into a near-linear one.
        self.bound = _fractional_bound(
            [self.weight[i] for i in self.by_max], [self.value[i] for i in self.by_max], capacity
        )

    def _hopeless(self, span: float) -> bool:
        """No choice within ``span`` or any wider one can beat the best found."""
        return span >= self.bound - self.best_value + _BOUND_SLACK

    def solve(self) -> tuple[list[int], float]:
        uppers = [self._approximate(a) for a in self.by_min]
        # Most promising first, so that the exact passes prune each other as early as possible.
        for upper, a in sorted(zip(uppers, self.by_min, strict=True), reverse=True):
            if upper <= self.best_value * _APPROXIMATION_RATIO:
                break
            self._exact(a)
        return self.best_set, self.best_value

    def _inside(self, a: int) -> Iterator[int]:
        """Rowsets whose min key is not below A's, in ascending max key, as the passes
        take them (they stop early: ``_hopeless``). A rowset's max key is not below its
        min key, so those whose max key is below A's min key are skipped at once."""
        floor = self.min_key[a]
        min_key = self.min_key
        by_max = self.by_max
        for j in range(bisect.bisect_left(self.max_keys, floor), len(by_max)):
            b = by_max[j]
            if min_key[b] >= floor:
                yield b

    def _approximate(self, a: int) -> float:
        """Pass 1 for spans starting at A: record greedy solutions, return an upper bound."""
        cap = self.capacity
        weight, value, density, hi = self.weight, self.value, self.density, self.hi
        start, a_end = self.lo[a], self.hi[a]
        # Min-heap by density of the greedy fractional solution, kept just heavy enough
        # that dropping its least dense item would bring it within the budget.
        heap: list[tuple[float, int]] = []
        total_w = 0
        total_v = 0.0
        best_upper = 0.0
        for b in self._inside(a):
            if self._hopeless(max(a_end, hi[b]) - start):
                break
            if total_w >= cap and density[b] <= heap[0][0]:
                continue  # not in the fractional solution; the span only grew
            heapq.heappush(heap, (density[b], b))
            total_w += weight[b]
            total_v += value[b]
            while total_w - weight[heap[0][1]] > cap:
                _, gone = heapq.heappop(heap)
                total_w -= weight[gone]
                total_v -= value[gone]
            span = max(a_end, hi[b]) - start
            excess = total_w - cap
            top = heap[0][1]
            if excess <= 0:
                lower = upper = total_v  # everything fits
                drop_top = only_top = False
            else:
                # The integer optimum is at least the greedy prefix without its least dense
                # item, or that item alone; at most the prefix with that item cut to fit.
                upper = total_v - excess * density[top]
                drop_top = total_v - value[top] > value[top]
                only_top = not drop_top
                lower = total_v - value[top] if drop_top else value[top]
            best_upper = max(best_upper, _objective(upper, span))
            found = _objective(lower, span)
            if found > self.best_value:
                self.best_value = found
                if only_top:
                    self.best_set = [top]
                else:
                    self.best_set = [i for _, i in (heap[1:] if drop_top else heap)]
        return best_upper

    def _exact(self, a: int) -> None:
        """Pass 2 for spans starting at A: incremental 0/1 knapsack over the inside rowsets."""
        items = list(self._inside(a))
        if not items:
            return
        cap = min(self.capacity, sum(self.weight[b] for b in items))
        start, a_end = self.lo[a], self.hi[a]
        # best[w]: the best value of a subset of the items so far weighing at most w.
        best = np.zeros(cap + 1, dtype=np.float64)
        taken: list[npt.NDArray[np.bool_]] = []
        improved_at = -1
        for j, b in enumerate(items):
            if self._hopeless(max(a_end, self.hi[b]) - start):
                break
            w = self.weight[b]
            with_b = best[: cap + 1 - w] + self.value[b]
            take = with_b > best[w:]
            np.maximum(best[w:], with_b, out=best[w:])
            taken.append(take)
            found = _objective(float(best[cap]), max(a_end, self.hi[b]) - start)
            if found > self.best_value:
                self.best_value = found
                improved_at = j
        if improved_at < 0:
            return
        chosen: list[int] = []
        room = cap
        for j in range(improved_at, -1, -1):
            b = items[j]
            w = self.weight[b]
            if room >= w and taken[j][room - w]:
                chosen.append(b)
                room -= w
        self.best_set = chosen
