"""Linearizability checking of recorded histories (Knossos/Porcupine style), and the bank check.

What it owns: deciding whether a ``History``'s operations can be ordered into one
sequential execution of a model that respects real time (an operation that completed
before another was invoked comes first), and explaining why not when they cannot.

The search is Wing & Gong's, with Lowe's memoization as Porcupine implements it: the
calls and returns of all operations sit in one time-ordered doubly linked list; the
search walks it from the head, linearizes a call whose step is legal in the current
model state (and whose pair (set of linearized operations, new state) it has not seen
before), unlinks that operation and restarts at the head; reaching the return of an
operation that is not yet linearized means backtracking. An empty list is a
linearization; an empty backtracking stack with a return ahead is a refutation.

Invariants of the encoding:

- Intervals are closed: on equal times a call sorts before a return, so touching
  operations count as concurrent.
- A ``FAIL`` operation did not happen and is left out.
- An ``INFO`` (indeterminate) operation has its return at the end of the history and
  its output unknown (``UNKNOWN``): it may take effect anywhere after its invocation,
  and taking effect last is the same as never taking effect. An indeterminate
  read-only operation constrains nothing and is left out.
- A model whose operations on different keys are independent partitions the history
  by key (P-compositionality, Horn & Kroening); each partition is searched on its own,
  smallest first, so the first refuted partition is the smallest failing one.

Searching a refutable history can be exponential; ``max_steps`` bounds each partition's
search (a deterministic budget, not a clock) and yields ``Verdict.UNKNOWN``.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tests.support.history import Operation, Outcome


class _Unknown:
    """The output of an indeterminate operation; every model step accepts it."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = _Unknown()

#: Where the return of an indeterminate operation sorts: after every real time.
_END_OF_TIME: Final = 1 << 62


class Model(abc.ABC):
    """A sequential specification: a pure step function over hashable states."""

    #: Kinds that change nothing; indeterminate operations of these kinds are dropped.
    read_only_kinds: frozenset[str] = frozenset()

    @abc.abstractmethod
    def init(self) -> Hashable:
        """The state of one partition before any operation."""

    @abc.abstractmethod
    def step(self, state: Any, kind: str, value: Any, output: Any) -> tuple[bool, Any]:
        """Whether ``kind(value) -> output`` is legal in ``state``, and the state after it.

        ``output`` is ``UNKNOWN`` for an indeterminate operation; the step is then legal
        whenever the operation could have had some output in ``state``.
        """

    def partition(self, op: Operation) -> Hashable:
        """The partition an operation belongs to; one partition unless overridden."""
        return None

    def check_kind(self, op: Operation) -> None:
        """Raise ``ValueError`` for an operation the model does not know; none by default."""
        return None

    def describe_state(self, state: Any) -> str:
        return repr(state)


class RegisterModel(Model):
    """A read/write/compare-and-set register per key (partitioned by ``op.key``).

    ``read() -> v``; ``write(v)`` (output ignored); ``cas((expected, new)) -> bool``
    (True when it swapped).
    """

    read_only_kinds = frozenset({"read"})
    _KINDS: Final = frozenset({"read", "write", "cas"})

    def __init__(self, initial: Hashable = None) -> None:
        self.initial = initial

    def init(self) -> Hashable:
        return self.initial

    def partition(self, op: Operation) -> Hashable:
        return op.key

    def check_kind(self, op: Operation) -> None:
        if op.kind not in self._KINDS:
            raise ValueError(f"register model has no operation {op.kind!r}: {op.describe()}")
        if op.kind == "cas" and not (isinstance(op.input, tuple) and len(op.input) == 2):
            raise ValueError(f"cas input must be (expected, new): {op.describe()}")

    def step(self, state: Any, kind: str, value: Any, output: Any) -> tuple[bool, Any]:
        if kind == "read":
            return (output is UNKNOWN or output == state), state
        if kind == "write":
            return True, value
        expected, new = value
        swapped = state == expected
        if output is UNKNOWN or output == swapped:
            return True, (new if swapped else state)
        return False, state


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


#: The state of a key-value map's key that holds nothing.
ABSENT: Final = _Absent()


class KeyValueModel(Model):
    """A key-value map, partitioned by key.

    ``put(v)``; ``get() -> v or None`` (None when absent); ``delete() -> bool or None``
    (whether the key existed; None when the client does not know).
    """

    read_only_kinds = frozenset({"get"})
    _KINDS: Final = frozenset({"put", "get", "delete"})

    def init(self) -> Hashable:
        return ABSENT

    def partition(self, op: Operation) -> Hashable:
        return op.key

    def check_kind(self, op: Operation) -> None:
        if op.kind not in self._KINDS:
            raise ValueError(f"key-value model has no operation {op.kind!r}: {op.describe()}")

    def step(self, state: Any, kind: str, value: Any, output: Any) -> tuple[bool, Any]:
        if kind == "get":
            current = None if state is ABSENT else state
            return (output is UNKNOWN or output == current), state
        if kind == "put":
            return True, value
        existed = state is not ABSENT
        if output is UNKNOWN or output is None or output == existed:
            return True, ABSENT
        return False, state


class Verdict(enum.Enum):
    LINEARIZABLE = "linearizable"
    NOT_LINEARIZABLE = "not linearizable"
    UNKNOWN = "unknown (search budget exhausted)"


@dataclass
class PartitionFailure:
    """A refuted partition: its operations and the longest linearizable prefix found."""

    partition: Hashable
    operations: list[Operation]
    prefix: list[Operation]
    state_after_prefix: str
    stuck: list[str]

    def explain(self) -> str:
        t0 = min(op.invoke_ns for op in self.operations)

        def ms(ns: int | None) -> str:
            return "     ...  " if ns is None else f"{(ns - t0) / 1e6:10.3f}"

        lines = [
            f"partition {self.partition!r}: not linearizable "
            f"({len(self.operations)} operations; times in ms from its first invocation)"
        ]
        lines.extend(
            f"  [{ms(op.invoke_ns)}, {ms(op.complete_ns)}] {op.describe()}"
            for op in self.operations
        )
        ids = ", ".join(f"#{op.op_id}" for op in self.prefix) or "(none)"
        lines.append(
            f"longest linearizable prefix ({len(self.prefix)} of {len(self.operations)}): "
            f"{ids}; state after it: {self.state_after_prefix}"
        )
        lines.append("after it, no operation that may come next can take effect:")
        lines.extend(f"  {reason}" for reason in self.stuck)
        return "\n".join(lines)


@dataclass
class CheckResult:
    """The verdict over all partitions; ``failure`` is the smallest refuted partition."""

    verdict: Verdict
    operations: int
    partitions: int
    partitions_checked: int
    failure: PartitionFailure | None = None
    unknown_partitions: list[Hashable] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.LINEARIZABLE

    def explain(self) -> str:
        head = (
            f"{self.verdict.value}: {self.operations} operations in "
            f"{self.partitions} partition{'' if self.partitions == 1 else 's'}, "
            f"{self.partitions_checked} checked"
        )
        parts = [head]
        if self.unknown_partitions:
            parts.append(f"search budget exhausted in partitions {self.unknown_partitions!r}")
        if self.failure is not None:
            parts.append(self.failure.explain())
        return "\n".join(parts)


@dataclass(frozen=True)
class _Entry:
    """An operation as the search sees it: output UNKNOWN and return at the end if INFO."""

    op: Operation
    call: int
    ret: int
    output: Any


def _entries(ops: Iterable[Operation], model: Model) -> list[_Entry]:
    entries = []
    for op in ops:
        model.check_kind(op)
        if op.outcome is Outcome.FAIL:
            continue
        if op.outcome is Outcome.INFO:
            if op.kind in model.read_only_kinds:
                continue
            entries.append(_Entry(op, op.invoke_ns, _END_OF_TIME, UNKNOWN))
            continue
        assert op.complete_ns is not None
        if op.complete_ns < op.invoke_ns:
            raise ValueError(f"operation completes before it is invoked: {op.describe()}")
        entries.append(_Entry(op, op.invoke_ns, op.complete_ns, op.output))
    return entries


@dataclass
class _Search:
    verdict: Verdict
    prefix: list[int]
    state_after_prefix: Any


def _search(entries: Sequence[_Entry], model: Model, max_steps: int | None) -> _Search:
    """Wing-Gong-Lowe over one partition; see the module docstring."""
    events = sorted(
        [(e.call, 0, i) for i, e in enumerate(entries)]
        + [(e.ret, 1, i) for i, e in enumerate(entries)]
    )
    m = len(events)
    # Node 0 is the head; nodes 1..m are the events in time order; -1 ends the list.
    nxt = [*range(1, m + 1), -1]
    prv = [-1, *range(m)]
    node_op = [-1] * (m + 1)
    node_is_call = [False] * (m + 1)
    call_node = [0] * len(entries)
    ret_node = [0] * len(entries)
    for k, (_, is_ret, i) in enumerate(events, start=1):
        node_op[k] = i
        node_is_call[k] = not is_ret
        if is_ret:
            ret_node[i] = k
        else:
            call_node[i] = k

    def unlink(k: int) -> None:
        nxt[prv[k]] = nxt[k]
        if nxt[k] != -1:
            prv[nxt[k]] = prv[k]

    def relink(k: int) -> None:
        nxt[prv[k]] = k
        if nxt[k] != -1:
            prv[nxt[k]] = k

    state: Any = model.init()
    linearized = 0
    stack: list[tuple[int, Any]] = []
    seen: set[tuple[int, Any]] = set()
    best: list[int] = []
    best_state: Any = state
    steps = 0
    k = nxt[0]
    while nxt[0] != -1:
        steps += 1
        if max_steps is not None and steps > max_steps:
            return _Search(Verdict.UNKNOWN, best, best_state)
        i = node_op[k]
        if node_is_call[k]:
            e = entries[i]
            legal, new_state = model.step(state, e.op.kind, e.op.input, e.output)
            if legal:
                memo = (linearized | (1 << i), new_state)
                if memo not in seen:
                    seen.add(memo)
                    stack.append((i, state))
                    linearized, state = memo
                    unlink(call_node[i])
                    unlink(ret_node[i])
                    if len(stack) > len(best):
                        best = [j for j, _ in stack]
                        best_state = state
                    k = nxt[0]
                    continue
            k = nxt[k]
        else:
            if not stack:
                return _Search(Verdict.NOT_LINEARIZABLE, best, best_state)
            i, state = stack.pop()
            linearized &= ~(1 << i)
            relink(ret_node[i])
            relink(call_node[i])
            k = nxt[call_node[i]]
    return _Search(Verdict.LINEARIZABLE, [j for j, _ in stack], state)


def _stuck_reasons(
    entries: Sequence[_Entry], prefix: Sequence[int], state: Any, model: Model
) -> list[str]:
    """For each operation that could come right after ``prefix``, why it cannot."""
    done = set(prefix)
    rest = [e for i, e in enumerate(entries) if i not in done]
    if not rest:
        return []
    first_return = min(e.ret for e in rest)
    reasons = []
    for e in sorted(rest, key=lambda e: (e.call, e.op.op_id)):
        if e.call > first_return:
            continue
        legal, after = model.step(state, e.op.kind, e.op.input, e.output)
        if legal:
            reasons.append(
                f"{e.op.describe()}: legal (state becomes {model.describe_state(after)}), "
                "but no order of the rest is legal after it"
            )
        else:
            reasons.append(f"{e.op.describe()}: not legal in state {model.describe_state(state)}")
    return reasons


def check(
    ops: Iterable[Operation],
    model: Model,
    *,
    max_steps: int | None = None,
    stop_at_first_failure: bool = True,
) -> CheckResult:
    """Check a history against ``model``, partition by partition, smallest first.

    With ``stop_at_first_failure`` the search stops at the first refuted partition,
    which is then the smallest failing one (by operation count). ``max_steps`` bounds
    each partition's search; an exhausted budget makes the verdict ``UNKNOWN`` unless
    some partition is refuted.
    """
    all_ops = list(ops)
    groups: dict[Hashable, list[Operation]] = {}
    for op in all_ops:
        groups.setdefault(model.partition(op), []).append(op)
    order = sorted(groups, key=lambda p: (len(groups[p]), repr(p)))
    result = CheckResult(Verdict.LINEARIZABLE, len(all_ops), len(groups), 0)
    for p in order:
        entries = _entries(groups[p], model)
        searched = _search(entries, model, max_steps)
        result.partitions_checked += 1
        if searched.verdict is Verdict.UNKNOWN:
            result.unknown_partitions.append(p)
        elif searched.verdict is Verdict.NOT_LINEARIZABLE:
            if result.failure is None:
                result.failure = PartitionFailure(
                    partition=p,
                    operations=sorted(groups[p], key=lambda op: (op.invoke_ns, op.op_id)),
                    prefix=[entries[i].op for i in searched.prefix],
                    state_after_prefix=model.describe_state(searched.state_after_prefix),
                    stuck=_stuck_reasons(
                        entries, searched.prefix, searched.state_after_prefix, model
                    ),
                )
            if stop_at_first_failure:
                break
    if result.failure is not None:
        result.verdict = Verdict.NOT_LINEARIZABLE
    elif result.unknown_partitions:
        result.verdict = Verdict.UNKNOWN
    return result


@dataclass
class BankResult:
    """The bank workload's verdict: every snapshot read sums to the total, none negative."""

    reads_checked: int
    violations: list[str]

    @property
    def ok(self) -> bool:
        return not self.violations

    def explain(self) -> str:
        if self.ok:
            return f"bank: {self.reads_checked} snapshot reads, no violation"
        return "\n".join(
            [f"bank: {len(self.violations)} violations in {self.reads_checked} reads"]
            + [f"  {v}" for v in self.violations]
        )


def check_bank(
    ops: Iterable[Operation],
    accounts: Iterable[Hashable],
    total: int,
    *,
    read_kind: str = "read",
) -> BankResult:
    """Check every acknowledged snapshot read of a bank workload.

    A read's output maps each account to its balance. It must name exactly
    ``accounts``, sum to ``total`` and hold no negative balance. Transfers are not
    checked here (the invariant is over what reads observe).
    """
    expected = set(accounts)
    violations = []
    reads = 0
    for op in ops:
        if op.kind != read_kind or op.outcome is not Outcome.OK:
            continue
        reads += 1
        balances: Mapping[Hashable, int] = op.output
        seen = set(balances)
        if seen != expected:
            missing = ", ".join(sorted(map(repr, expected - seen))) or "none"
            extra = ", ".join(sorted(map(repr, seen - expected))) or "none"
            violations.append(f"{op.describe()}: accounts missing: {missing}; unexpected: {extra}")
        if (got := sum(balances.values())) != total:
            violations.append(f"{op.describe()}: total {got}, expected {total}")
        negative = {a: b for a, b in balances.items() if b < 0}
        if negative:
            violations.append(f"{op.describe()}: negative balances {negative!r}")
    return BankResult(reads, violations)
