"""A thread-safe recorder of client operations, the input of the linearizability checker.

A fault test's clients call ``History.invoke`` just before they send a request and then
exactly one of ``ok`` / ``fail`` / ``info`` on the returned ``Invocation`` once they
know the outcome, as Jepsen does:

- ``ok``: the operation happened, with the recorded output.
- ``fail``: the operation definitely did not happen (the server refused it before
  applying anything, e.g. "not the leader").
- ``info``: indeterminate (a timeout, a lost connection): it may or may not have
  happened, now or at any later time. It never completes: the checker lets it take
  effect anywhere after its invocation, or not at all.

An invocation that is still open when the history is read counts as ``info``.
Times come from ``time.monotonic_ns`` (one clock for every thread of the process);
a test may pass its own clock. The history owns no knowledge of any data model.
"""

from __future__ import annotations

import enum
import itertools
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any


class Outcome(enum.Enum):
    """How an operation ended, in Jepsen's terms."""

    OK = "ok"
    FAIL = "fail"
    INFO = "info"


@dataclass(frozen=True)
class Operation:
    """One client operation: who, what, when, and how it ended.

    ``complete_ns`` is ``None`` exactly when the outcome is ``INFO``; ``output`` is
    meaningful only when the outcome is ``OK``.
    """

    op_id: int
    process: Hashable
    kind: str
    key: Hashable
    input: Any
    invoke_ns: int
    outcome: Outcome
    complete_ns: int | None = None
    output: Any = None

    def describe(self) -> str:
        """``#7 p2 write(k1, 5) -> None ok`` style, for explanations."""
        args = "" if self.input is None else f", {self.input!r}"
        result = {
            Outcome.OK: f"-> {self.output!r}",
            Outcome.FAIL: "failed",
            Outcome.INFO: "indeterminate",
        }[self.outcome]
        return f"#{self.op_id} {self.process} {self.kind}({self.key!r}{args}) {result}"


class Invocation:
    """An operation that was invoked; its owner completes it once with ok/fail/info."""

    def __init__(
        self, history: History, op_id: int, process: Hashable, kind: str, key: Hashable, value: Any
    ) -> None:
        self._history = history
        self.op_id = op_id
        self.process = process
        self.kind = kind
        self.key = key
        self.input = value
        self.invoke_ns = history.now_ns()

    def ok(self, output: Any = None) -> None:
        """The operation happened and returned ``output``."""
        self._history._complete(self, Outcome.OK, output)

    def fail(self) -> None:
        """The operation definitely did not happen."""
        self._history._complete(self, Outcome.FAIL, None)

    def info(self) -> None:
        """The outcome is unknown (timeout, lost connection)."""
        self._history._complete(self, Outcome.INFO, None)


class History:
    """Records operations from any number of threads; ``operations()`` is a snapshot.

    Invariant: every op id appears at most once among completed operations, and an
    operation's completion time is never before its invocation time.
    """

    def __init__(self, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._open: dict[int, Invocation] = {}
        self._done: list[Operation] = []

    def now_ns(self) -> int:
        return self._clock()

    def invoke(
        self, process: Hashable, kind: str, key: Hashable = None, value: Any = None
    ) -> Invocation:
        """Call just before the request is sent; the invocation time is taken here."""
        with self._lock:
            op_id = next(self._ids)
            inv = Invocation(self, op_id, process, kind, key, value)
            self._open[op_id] = inv
        return inv

    def _complete(self, inv: Invocation, outcome: Outcome, output: Any) -> None:
        now = self.now_ns()
        with self._lock:
            if self._open.pop(inv.op_id, None) is None:
                raise RuntimeError(f"operation #{inv.op_id} ({inv.kind}) was already completed")
            self._done.append(
                Operation(
                    op_id=inv.op_id,
                    process=inv.process,
                    kind=inv.kind,
                    key=inv.key,
                    input=inv.input,
                    invoke_ns=inv.invoke_ns,
                    outcome=outcome,
                    complete_ns=None if outcome is Outcome.INFO else now,
                    output=output,
                )
            )

    def operations(self) -> list[Operation]:
        """Every operation in invocation order; still-open invocations count as INFO."""
        with self._lock:
            ops = list(self._done)
            ops.extend(
                Operation(
                    op_id=inv.op_id,
                    process=inv.process,
                    kind=inv.kind,
                    key=inv.key,
                    input=inv.input,
                    invoke_ns=inv.invoke_ns,
                    outcome=Outcome.INFO,
                )
                for inv in self._open.values()
            )
        ops.sort(key=lambda op: (op.invoke_ns, op.op_id))
        return ops

    def counts(self) -> dict[Outcome, int]:
        """How many operations ended each way (open ones as INFO), for reports."""
        result = dict.fromkeys(Outcome, 0)
        for op in self.operations():
            result[op.outcome] += 1
        return result
