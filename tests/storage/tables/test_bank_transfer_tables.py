"""The bank-transfer invariant across tablets: an accounts table hash-partitioned over
several tablets; writer threads move money with multi-row UPDATE batches that touch
accounts in different tablets (one ``Table.update`` call, so one timestamp, per
transfer), and sometimes move an account to a new key (a DELETE and an INSERT, usually
in different tablets, in one atomic batch); a maintenance thread flushes and compacts;
reader threads scan (unordered and ordered, at the latest snapshot, at an explicit
``db.latest_timestamp()`` and at the timestamps of earlier transfers) and every scan must
see every account exactly once and the same total balance. A snapshot read twice gives
the same rows. At the end the table holds exactly what the writers believe, also after
reopening the database."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import HashDimension, PartitionSchema, partition_for_batch
from kudusql.storage.tables.table import Table
from tests.support.timing import scaled

ACCOUNTS = 48
INITIAL = 100
TOTAL = ACCOUNTS * INITIAL
WRITERS = 2
BUCKETS = 5
RUN_SECONDS = 3.0

OPTIONS = TabletOptions(
    sync=False,
    rows_per_page=8,
    scan_batch_rows=8,  # many small batches per scan: more chances to see half a transfer
    history_max_age_s=3600,
    file_grace_s=0,
    threads=2,
)
SCHEMA = Schema.build(
    [
        ColumnSchema("id", DataType.parse("INT64"), nullable=False),
        ColumnSchema("balance", DataType.parse("INT64"), nullable=False),
        ColumnSchema("moves", DataType.parse("INT32"), nullable=False, default=0),
    ],
    ["id"],
)
PARTITIONING = PartitionSchema.create(SCHEMA, [HashDimension(("id",), BUCKETS)])


def slots_of(t: Table, ids: list[int]) -> list[int]:
    keys = pa.table({"id": pa.array(ids, pa.int64())})
    return [int(s) for s in partition_for_batch(t.partition_schema, t.schema, keys)]


def test_transfers_across_tablets_keep_the_total(tmp_path: Path) -> None:
    path = str(tmp_path / "bank")
    db = Database(path, OPTIONS, maintenance=False)
    t = db.create_table("accounts", SCHEMA, PARTITIONING)
    assert t.num_tablets == BUCKETS
    ids = list(range(ACCOUNTS))
    t.insert(pa.table({"id": pa.array(ids, pa.int64()), "balance": [INITIAL] * ACCOUNTS}))
    t.flush()
    assert len(set(slots_of(t, ids))) == BUCKETS  # the accounts span every tablet

    stop = threading.Event()
    errors: list[BaseException] = []
    stamps: list[int] = []  # timestamps of applied transfers
    # What each writer believes its accounts hold: id -> balance.
    books: list[dict[int, int]] = [
        {i: INITIAL for i in ids if i % WRITERS == w} for w in range(WRITERS)
    ]
    counts = {"transfers": 0, "moves": 0, "scans": 0, "snapshot_scans": 0, "maintenance": 0}
    lock = threading.Lock()

    def guard(fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException as e:  # surfaced by the main thread
                errors.append(e)
                stop.set()

        return run

    def writer(w: int) -> None:
        rng = random.Random(w)
        book = books[w]
        fresh = iter(range(10_000 + w, 10**9, WRITERS))
        while not stop.is_set():
            live = list(book)
            slots = dict(zip(live, slots_of(t, live), strict=True))
            if rng.random() < 0.15:  # move an account to a new key (usually a new tablet)
                old, new = rng.choice(live), next(fresh)
                bal = book[old]
                batch = pa.table(
                    {
                        "id": pa.array([old, new], pa.int64()),
                        "balance": pa.array([bal, bal], pa.int64()),
                        "op": ["DELETE", "INSERT"],
                    }
                )
                res = t.write(batch, op_column="op", atomic=True)
                assert (res.applied, res.errors) == (2, [])
                del book[old]
                book[new] = bal
                with lock:
                    counts["moves"] += 1
                    stamps.append(res.timestamp)
                continue
            # 2 to 4 accounts, each in a different tablet.
            by_slot: dict[int, list[int]] = {}
            for a in live:
                by_slot.setdefault(slots[a], []).append(a)
            k = rng.randint(2, min(4, len(by_slot)))
            chosen = [rng.choice(by_slot[s]) for s in rng.sample(sorted(by_slot), k)]
            deltas = [rng.randint(-20, 20) for _ in chosen[1:]]
            deltas.insert(0, -sum(deltas))
            new_bal = [book[a] + d for a, d in zip(chosen, deltas, strict=True)]
            upd = pa.table(
                {"id": pa.array(chosen, pa.int64()), "balance": pa.array(new_bal, pa.int64())}
            )
            res = t.update(upd)  # one call: one timestamp for every tablet it touches
            assert (res.applied, res.errors) == (k, [])
            for a, b in zip(chosen, new_bal, strict=True):
                book[a] = b
            with lock:
                counts["transfers"] += 1
                stamps.append(res.timestamp)

    def check(table: pa.Table, what: str) -> None:
        assert table.num_rows == ACCOUNTS, (what, table.num_rows)
        assert len(set(table.column("id").to_pylist())) == ACCOUNTS, what
        assert pc.sum(table.column("balance")).as_py() == TOTAL, what

    def reader(r: int) -> None:
        rng = random.Random(100 + r)
        seen: list[tuple[int, pa.Table]] = []  # (snapshot, its rows in key order)
        while not stop.is_set():
            mode = rng.choice(["latest", "ordered", "explicit", "earlier", "again"])
            if mode == "latest":
                check(t.to_arrow(["id", "balance"]), mode)
            elif mode == "ordered":
                got = t.to_arrow(["id", "balance"], ordered=True)
                check(got, mode)
                keys = got.column("id").to_numpy()
                assert bool(np.all(keys[1:] > keys[:-1])), "ordered scan out of order"
            elif mode == "explicit":
                snap = db.latest_timestamp()
                got = t.to_arrow(["id", "balance"], snapshot=snap, ordered=True)
                check(got, mode)
                seen.append((snap, got))
            elif mode == "earlier" and stamps:
                with lock:
                    ts = rng.choice(stamps)
                check(t.to_arrow(["id", "balance"], snapshot=ts + rng.randint(0, 1)), mode)
            elif mode == "again" and seen:
                snap, before = rng.choice(seen)
                assert t.to_arrow(["id", "balance"], snapshot=snap, ordered=True).equals(before)
            else:
                continue
            with lock:
                counts["scans"] += 1
                counts["snapshot_scans"] += mode in ("explicit", "earlier", "again")

    def maintainer() -> None:
        rng = random.Random(7)
        while not stop.is_set():
            kind = rng.choice(["flush", "table", "db"])
            if kind == "flush":
                t.flush()
            elif kind == "table":
                t.run_maintenance()
            else:
                db.run_maintenance()
            with lock:
                counts["maintenance"] += 1
            time.sleep(0.02)

    threads = [threading.Thread(target=guard(lambda w=w: writer(w))) for w in range(WRITERS)]
    threads += [threading.Thread(target=guard(lambda r=r: reader(r))) for r in range(2)]
    threads.append(threading.Thread(target=guard(maintainer)))
    for th in threads:
        th.start()

    def enough() -> bool:
        with lock:
            return (
                counts["transfers"] >= 20
                and counts["moves"] >= 2
                and counts["scans"] >= 10
                and counts["snapshot_scans"] >= 3
                and counts["maintenance"] >= 3
            )

    # RUN_SECONDS, or longer on a slow machine until enough happened (a hang bound after).
    start = time.monotonic()
    while not stop.is_set():
        elapsed = time.monotonic() - start
        if (elapsed >= RUN_SECONDS and enough()) or elapsed >= scaled(30):
            break
        time.sleep(0.05)
    stop.set()
    for th in threads:
        th.join(scaled(60))
    assert not any(th.is_alive() for th in threads)
    if errors:
        raise errors[0]
    assert counts["transfers"] >= 20 and counts["moves"] >= 2, counts
    assert counts["scans"] >= 10 and counts["snapshot_scans"] >= 3, counts
    assert counts["maintenance"] >= 3, counts

    # Exactly what the writers believe: no transfer lost or applied twice.
    expected = {a: b for book in books for a, b in book.items()}
    assert sum(expected.values()) == TOTAL
    got = t.to_arrow(["id", "balance"])
    assert (
        dict(zip(got.column("id").to_pylist(), got.column("balance").to_pylist(), strict=True))
        == expected
    )
    moved = {a for a in expected if a >= 10_000}
    assert len(moved) > 0
    # Every account is in the tablet its key routes to (a moved one too).
    for slot, tablet in enumerate(t.tablets()):
        keys: list[int] = tablet.scan(["id"]).read_all().column("id").to_pylist()  # type: ignore[assignment]
        assert all(s == slot for s in slots_of(t, keys)), slot
    sample = random.Random(1).sample(stamps, min(20, len(stamps)))
    for ts in sample:
        check(t.to_arrow(["id", "balance"], snapshot=ts), "after the run")
    db.close()

    with Database(path, OPTIONS, maintenance=False) as db2:
        t2 = db2.table("accounts")
        got = t2.to_arrow(["id", "balance"])
        check(got, "reopened")
        got_map = dict(
            zip(got.column("id").to_pylist(), got.column("balance").to_pylist(), strict=True)
        )
        assert got_map == expected
        for ts in sample:
            check(t2.to_arrow(["id", "balance"], snapshot=ts), "reopened, earlier snapshot")
