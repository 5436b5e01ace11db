"""The history recorder and the linearizability checker: hand-written histories with known
verdicts, a property over histories of a real thread-safe register, and a sizeable
history that must check quickly."""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Hashable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.history import History, Operation, Outcome
from tests.support.linearizability import (
    KeyValueModel,
    RegisterModel,
    Verdict,
    check,
    check_bank,
)

_ids = iter(range(1_000_000))


def op(
    kind: str,
    start: int,
    end: int | None,
    value: Any = None,
    output: Any = None,
    *,
    key: Hashable = "x",
    process: Hashable = "p",
    outcome: Outcome | None = None,
) -> Operation:
    """An operation by hand; ``end=None`` means indeterminate (INFO) unless told."""
    if outcome is None:
        outcome = Outcome.INFO if end is None else Outcome.OK
    return Operation(
        op_id=next(_ids),
        process=process,
        kind=kind,
        key=key,
        input=value,
        invoke_ns=start,
        complete_ns=end,
        output=output,
        outcome=outcome,
    )


def reg(*ops: Operation) -> Verdict:
    return check(ops, RegisterModel()).verdict


OK, BAD = Verdict.LINEARIZABLE, Verdict.NOT_LINEARIZABLE


# --- hand-written register histories ---------------------------------------------------


def test_sequential_history_is_linearizable() -> None:
    history = [op("read", 0, 1, output=None), op("write", 2, 3, 1), op("read", 4, 5, output=1)]
    assert reg(*history) is OK


def test_read_concurrent_with_a_write_may_see_either_value() -> None:
    w = op("write", 0, 10, 1)
    assert reg(w, op("read", 2, 3, output=None)) is OK
    assert reg(w, op("read", 2, 3, output=1)) is OK


def test_touching_intervals_are_concurrent() -> None:
    # The read is invoked at the instant the write returns: closed intervals overlap.
    assert reg(op("write", 0, 5, 1), op("read", 5, 6, output=None)) is OK


def test_stale_read_after_acknowledged_write_is_rejected() -> None:
    result = check(
        [op("write", 0, 1, 1), op("write", 2, 3, 2), op("read", 4, 5, output=1)],
        RegisterModel(),
    )
    assert result.verdict is BAD
    text = result.explain()
    assert "partition 'x'" in text
    assert "read('x') -> 1: not legal in state 2" in text


def test_lost_write_is_rejected() -> None:
    assert reg(op("write", 0, 1, 1), op("read", 2, 3, output=None)) is BAD


def test_read_of_a_value_never_written_is_rejected() -> None:
    assert reg(op("write", 0, 1, 1), op("read", 0, 3, output=7)) is BAD


def test_two_reads_may_not_see_a_write_then_unsee_it() -> None:
    w = op("write", 0, 100, 1)
    assert reg(w, op("read", 1, 2, output=1), op("read", 3, 4, output=None)) is BAD
    assert reg(w, op("read", 1, 2, output=None), op("read", 3, 4, output=1)) is OK


def test_cas_anomalies() -> None:
    init = op("write", 0, 1, 0)
    # Two concurrent CAS from the same expected value cannot both succeed.
    assert reg(init, op("cas", 2, 5, (0, 1), True), op("cas", 2, 5, (0, 2), True)) is BAD
    # One of them succeeding and the other failing is fine, in either order.
    assert reg(init, op("cas", 2, 5, (0, 1), True), op("cas", 2, 5, (0, 2), False)) is OK
    # A CAS that reports success although the value differs.
    assert reg(init, op("cas", 2, 3, (5, 1), True)) is BAD
    # A CAS that reports failure although the value matched and nothing interfered.
    assert reg(init, op("cas", 2, 3, (0, 1), False)) is BAD
    # A successful CAS's new value must be what a later read sees.
    assert reg(init, op("cas", 2, 3, (0, 1), True), op("read", 4, 5, output=0)) is BAD


def test_indeterminate_write_may_or_may_not_have_happened() -> None:
    w = op("write", 0, None, 1)
    assert reg(w, op("read", 5, 6, output=1)) is OK
    assert reg(w, op("read", 5, 6, output=None)) is OK
    # It may take effect long after it timed out...
    assert reg(w, op("read", 5, 6, output=None), op("read", 7, 8, output=1)) is OK
    # ...but once observed it stays.
    assert reg(w, op("read", 5, 6, output=1), op("read", 7, 8, output=None)) is BAD


def test_indeterminate_write_cannot_take_effect_before_its_invocation() -> None:
    assert reg(op("read", 0, 1, output=5), op("write", 2, None, 5)) is BAD


def test_indeterminate_write_is_not_closed_at_its_timeout() -> None:
    # A later acknowledged write, then the timed-out one lands: the final value is 1.
    # Closing the indeterminate write at its timeout would wrongly refute this.
    history = [
        op("write", 0, None, 1),
        op("write", 10, 11, 2),
        op("read", 12, 13, output=1),
    ]
    assert reg(*history) is OK


def test_failed_write_never_happened() -> None:
    assert reg(op("write", 0, 1, 1, outcome=Outcome.FAIL), op("read", 2, 3, output=1)) is BAD
    assert reg(op("write", 0, 1, 1, outcome=Outcome.FAIL), op("read", 2, 3, output=None)) is OK


def test_indeterminate_cas_may_or_may_not_have_happened() -> None:
    init = op("write", 0, 1, 0)
    cas = op("cas", 2, None, (0, 1))
    assert reg(init, cas, op("read", 5, 6, output=1)) is OK
    assert reg(init, cas, op("read", 5, 6, output=0)) is OK
    # An indeterminate CAS whose expected value never held cannot have swapped.
    assert reg(init, op("cas", 2, None, (9, 1)), op("read", 5, 6, output=1)) is BAD


def test_indeterminate_reads_are_ignored() -> None:
    assert reg(op("write", 0, 1, 1), op("read", 2, None)) is OK


def test_smallest_failing_partition_is_reported() -> None:
    ops = [op("write", i, i + 1, i, key="big") for i in range(0, 40, 2)]
    ops += [op("read", 100, 101, output=0, key="big")]  # refuted: value is 38
    ops += [op("write", 0, 1, 1, key="small"), op("read", 2, 3, output=None, key="small")]
    ops += [op("write", 0, 1, 1, key="fine"), op("read", 2, 3, output=1, key="fine")]
    result = check(ops, RegisterModel(), stop_at_first_failure=False)
    assert result.verdict is BAD
    assert result.failure is not None and result.failure.partition == "small"
    assert result.partitions == 3 and result.partitions_checked == 3
    first = check(ops, RegisterModel())
    assert first.failure is not None and first.failure.partition == "small"
    assert first.partitions_checked == 2  # "fine" (2 ops, sorted before "small"), "small"


def test_explanation_names_the_operations_and_the_prefix() -> None:
    ops = [
        op("write", 0, 10, 1, process="c1"),
        op("write", 0, 10, 2, process="c2"),
        op("read", 11, 12, output=1, process="c3"),
        op("read", 13, 14, output=2, process="c3"),
    ]
    result = check(ops, RegisterModel())
    text = result.explain()
    assert result.verdict is BAD
    for o in ops:
        assert f"#{o.op_id} " in text
    assert "longest linearizable prefix (3 of 4)" in text
    assert "not legal in state 1" in text


def test_unknown_kind_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no operation 'append'"):
        check([op("append", 0, 1, 1)], RegisterModel())


def test_search_budget_gives_unknown() -> None:
    ops = [op("write", 0, 100, i) for i in range(8)] + [op("read", 101, 102, output=99)]
    assert check(ops, RegisterModel(), max_steps=50).verdict is Verdict.UNKNOWN
    assert check(ops, RegisterModel()).verdict is BAD


def test_unpartitioned_model_checks_one_partition() -> None:
    class Whole(RegisterModel):
        def partition(self, op: Operation) -> Hashable:
            return None

    ops = [op("write", 0, 1, 1, key="a"), op("read", 2, 3, output=1, key="b")]
    assert check(ops, RegisterModel()).verdict is BAD
    result = check(ops, Whole())
    assert result.verdict is OK and result.partitions == 1


# --- the key-value model ---------------------------------------------------------------


def test_key_value_model() -> None:
    kv = KeyValueModel()
    ok_history = [
        op("get", 0, 1, output=None, key="a"),
        op("put", 2, 3, "v1", key="a"),
        op("put", 2, 3, "w1", key="b"),
        op("get", 4, 5, output="v1", key="a"),
        op("delete", 6, 7, output=True, key="a"),
        op("get", 8, 9, output=None, key="a"),
        op("get", 8, 9, output="w1", key="b"),
        op("delete", 10, 11, output=False, key="a"),
    ]
    result = check(ok_history, kv)
    assert result.ok and result.partitions == 2
    assert not check([*ok_history, op("get", 20, 21, output="v1", key="a")], kv).ok
    assert not check([op("delete", 0, 1, output=True, key="z")], kv).ok
    # An indeterminate delete may or may not have removed the value.
    maybe = [op("put", 0, 1, "v", key="a"), op("delete", 2, None, key="a")]
    assert check([*maybe, op("get", 5, 6, output="v", key="a")], kv).ok
    assert check([*maybe, op("get", 5, 6, output=None, key="a")], kv).ok


# --- the bank checker ------------------------------------------------------------------


def test_bank_checker() -> None:
    accounts = ["a", "b"]
    good = [
        op("read", 0, 1, output={"a": 50, "b": 50}),
        op("transfer", 1, 2, ("a", "b", 10)),
        op("read", 3, 4, output={"a": 40, "b": 60}),
        op("read", 3, None),
    ]
    assert check_bank(good, accounts, 100).ok
    bad = [
        op("read", 0, 1, output={"a": 50, "b": 40}),
        op("read", 2, 3, output={"a": -10, "b": 110}),
        op("read", 4, 5, output={"a": 100}),
    ]
    result = check_bank(bad, accounts, 100)
    assert not result.ok and result.reads_checked == 3
    text = result.explain()
    assert "total 90, expected 100" in text
    assert "negative balances {'a': -10}" in text
    assert "accounts missing: 'b'; unexpected: none" in text


# --- the recorder ----------------------------------------------------------------------


def test_history_records_outcomes_and_open_invocations() -> None:
    ticks = iter(range(100))
    h = History(clock=lambda: next(ticks))
    w = h.invoke("c1", "write", "x", 1)
    r = h.invoke("c2", "read", "x")
    w.ok()
    r.ok(1)
    h.invoke("c1", "write", "x", 2).fail()
    h.invoke("c2", "cas", "x", (1, 3)).info()
    h.invoke("c3", "write", "x", 4)  # never completed: counts as indeterminate
    ops = h.operations()
    assert [o.kind for o in ops] == ["write", "read", "write", "cas", "write"]
    assert ops[0].invoke_ns == 0 and ops[0].complete_ns == 2
    assert [o.outcome for o in ops] == [
        Outcome.OK,
        Outcome.OK,
        Outcome.FAIL,
        Outcome.INFO,
        Outcome.INFO,
    ]
    assert ops[4].complete_ns is None
    assert h.counts() == {Outcome.OK: 2, Outcome.FAIL: 1, Outcome.INFO: 2}
    with pytest.raises(RuntimeError, match="already completed"):
        w.ok()
    assert check(ops, RegisterModel()).ok


# --- a real concurrent register --------------------------------------------------------


class _Register:
    """A thread-safe in-memory register per key: linearizable by construction."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, int | None] = {}

    def read(self, key: str) -> int | None:
        with self._lock:
            return self._values.get(key)

    def write(self, key: str, value: int) -> None:
        with self._lock:
            self._values[key] = value

    def cas(self, key: str, expected: int | None, new: int) -> bool:
        with self._lock:
            if self._values.get(key) != expected:
                return False
            self._values[key] = new
            return True


def _run_register_workload(seed: int, clients: int, ops_per_client: int) -> list[Operation]:
    register = _Register()
    history = History()
    values = iter(range(1, 1_000_000))
    values_lock = threading.Lock()

    def fresh() -> int:
        with values_lock:
            return next(values)

    def client(cid: int) -> None:
        rng = random.Random(seed * 1000 + cid)
        for _ in range(ops_per_client):
            key = rng.choice(["k0", "k1"])
            kind = rng.choice(["read", "read", "write", "cas"])
            fate = rng.random()  # < 0.1: times out after applying; < 0.2: fails before
            arg: Any = None
            if kind == "write":
                arg = fresh()
            elif kind == "cas":
                arg = (register.read(key) if rng.random() < 0.7 else None, fresh())
            inv = history.invoke(cid, kind, key, arg)
            time.sleep(rng.random() * 0.0005)
            if kind != "read" and 0.1 <= fate < 0.2:
                inv.fail()
                continue
            if kind == "read":
                out: Any = register.read(key)
            elif kind == "write":
                register.write(key, arg)
                out = None
            else:
                out = register.cas(key, *arg)
            time.sleep(rng.random() * 0.0005)
            if kind != "read" and fate < 0.1:
                inv.info()
            else:
                inv.ok(out)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return history.operations()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), clients=st.integers(2, 4), ops=st.integers(3, 12))
def test_histories_of_a_real_register_are_accepted_and_a_forged_read_is_not(
    seed: int, clients: int, ops: int
) -> None:
    history = _run_register_workload(seed, clients, ops)
    result = check(history, RegisterModel())
    assert result.ok, result.explain()
    reads = [i for i, o in enumerate(history) if o.kind == "read" and o.outcome is Outcome.OK]
    if not reads:
        return
    i = random.Random(seed).choice(reads)
    forged = list(history)
    forged[i] = dataclasses.replace(history[i], output=-1)  # -1 is never written
    bad = check(forged, RegisterModel())
    assert bad.verdict is BAD
    assert bad.failure is not None and bad.failure.partition == history[i].key


# --- size ------------------------------------------------------------------------------


def _simulated_history(n: int, keys: int, overlap: int, seed: int) -> list[Operation]:
    """A linearizable register history: each operation takes effect at a distinct point
    inside its interval, and intervals overlap by up to ``overlap`` points."""
    rng = random.Random(seed)
    values: dict[str, int | None] = {}
    ops = []
    for t in range(n):
        key = f"k{rng.randrange(keys)}"
        at = t * 10
        start, end = at - rng.randrange(overlap * 10), at + rng.randrange(overlap * 10)
        kind = rng.choice(["read", "write", "write", "cas"])
        if kind == "read":
            ops.append(op("read", start, end, output=values.get(key), key=key))
        elif kind == "write":
            values[key] = t
            ops.append(op("write", start, end, t, key=key))
        else:
            expected = values.get(key) if rng.random() < 0.5 else -2
            swapped = values.get(key) == expected
            if swapped:
                values[key] = t
            ops.append(op("cas", start, end, (expected, t), swapped, key=key))
        if rng.random() < 0.02 and kind != "read":
            ops[-1] = dataclasses.replace(ops[-1], outcome=Outcome.INFO, complete_ns=None)
    return ops


def test_a_few_thousand_operations_over_ten_keys_check_quickly() -> None:
    history = _simulated_history(3000, keys=10, overlap=30, seed=7)
    result = check(history, RegisterModel())
    assert result.ok, result.explain()
    assert result.partitions == 10
