"""Exactly-once writes: the tablet server's ``ResultTracker`` (pure, with a seeded
model of a retrying client), the client's ``RequestTracker``, and real tablet server
processes whose write responses a test-only fault point loses after the write applied
(``KUDUSQL_TEST_LOSE_WRITE_RESPONSES``: the handler sleeps past the client's timeout)."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from kudusql.cluster.client.request_tracker import RequestTracker
from kudusql.cluster.client.tserver_client import TabletServerPool
from kudusql.cluster.errors import (
    ConnectionRefused,
    MalformedMessage,
    RequestStale,
    RpcTimedOut,
    ServiceUnavailable,
)
from kudusql.cluster.messages import decode, encode
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.security import write_secret_file
from kudusql.cluster.tablet_partition import TabletPartition
from kudusql.cluster.tserver.messages import CreateTablet, WriteRequest
from kudusql.cluster.tserver.result_tracker import RequestId, ResultTracker, RpcState
from kudusql.cluster.tserver.server import LOSE_WRITE_RESPONSES_ENV, LoseWriteResponses
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.partition import Partition, PartitionSchema, RangeBounds
from tests.cluster.tserver_process import TServerProcess

SECRET = "exactly-once-test-secret"

# -- the ResultTracker, pure ----------------------------------------------------------------


def rid(seq: int, first: int | None = None, attempt: int = 1, client: str = "c1") -> RequestId:
    return RequestId(client, seq, seq if first is None else first, attempt)


def test_a_duplicate_of_a_completed_request_gets_the_stored_response() -> None:
    t: ResultTracker[str] = ResultTracker()
    assert t.track(rid(1), 0.0).state is RpcState.NEW
    assert t.track(rid(1, attempt=2), 0.1).state is RpcState.IN_PROGRESS
    t.complete(rid(1), "applied once", 0.2)
    again = t.track(rid(1, attempt=3), 0.3)
    assert (again.state, again.response) == (RpcState.COMPLETED, "applied once")
    # Another client's seq 1 is another request.
    assert t.track(rid(1, client="c2"), 0.3).state is RpcState.NEW
    with pytest.raises(ValueError, match="not in progress"):
        t.complete(rid(1), "twice", 0.4)


def test_a_failed_attempt_is_forgotten_so_a_retry_runs_it() -> None:
    t: ResultTracker[str] = ResultTracker()
    assert t.track(rid(1), 0.0).state is RpcState.NEW
    t.fail(rid(1))
    assert t.records("c1") == {}
    assert t.track(rid(1, attempt=2), 0.1).state is RpcState.NEW


def test_first_incomplete_seq_no_drops_older_results_and_makes_them_stale() -> None:
    t: ResultTracker[str] = ResultTracker()
    for seq in (1, 2, 3):
        assert t.track(rid(seq, first=1), 0.0).state is RpcState.NEW
    t.complete(rid(1, first=1), "r1", 0.0)
    t.complete(rid(3, first=1), "r3", 0.0)
    # Seq 2 is still in progress: the client says 1 and 2 are done, 4 is new.
    assert t.track(rid(4, first=3), 1.0).state is RpcState.NEW
    assert t.records("c1") == {
        2: RpcState.IN_PROGRESS,
        3: RpcState.COMPLETED,
        4: RpcState.IN_PROGRESS,
    }
    assert t.stale_before("c1") == 3
    assert t.track(rid(1, first=1, attempt=2), 1.0).state is RpcState.STALE
    assert t.track(rid(2, first=2, attempt=2), 1.0).state is RpcState.STALE
    assert t.track(rid(3, first=3, attempt=2), 1.0).response == "r3"
    with pytest.raises(ValueError, match="past its own sequence number"):
        t.track(rid(5, first=6), 1.0)


def test_idle_clients_and_old_responses_expire() -> None:
    t: ResultTracker[str] = ResultTracker(clients_ttl=100.0, responses_ttl=10.0)
    for client in ("idle", "busy"):
        for seq in (1, 2):
            t.track(rid(seq, first=1, client=client), 0.0)
            t.complete(rid(seq, first=1, client=client), f"{client}{seq}", 0.0)
    t.track(rid(3, first=1, client="busy"), 5.0)  # in progress, keeps its client
    t.gc(9.0)
    assert t.records("idle") == {1: RpcState.COMPLETED, 2: RpcState.COMPLETED}
    t.gc(10.0)  # responses untouched for 10 s go; the in-progress one stays
    assert t.records("idle") == {}
    assert t.records("busy") == {3: RpcState.IN_PROGRESS}
    assert t.track(rid(2, first=1, client="idle", attempt=2), 11.0).state is RpcState.STALE
    t.gc(200.0)  # "idle" was heard from at 11: idle for 189 s; "busy" has a write running
    assert t.clients() == ["busy"]
    t.complete(rid(3, first=1, client="busy"), "busy3", 200.0)
    t.gc(400.0)
    assert t.clients() == []
    # A forgotten client is a new one: its requests run (Kudu: treated as new).
    assert t.track(rid(9, client="busy"), 401.0).state is RpcState.NEW


@pytest.mark.parametrize("seed", range(20))
def test_a_retrying_client_model_applies_each_write_once(seed: int) -> None:
    """Clients send writes with random lost requests, lost answers, duplicates that
    arrive late and attempts that fail; the server model applies through the tracker.
    After every step: no write applied twice, every answer is the first application's."""
    rng = random.Random(seed)
    # Clients are heard from far more often than the clients' TTL: a client forgotten
    # whole would see an old duplicate as new (Kudu's documented limit).
    t: ResultTracker[int] = ResultTracker(clients_ttl=1000.0, responses_ttl=20.0)
    applied: dict[tuple[str, int], int] = {}  # write -> how many times applied
    trackers = {c: RequestTracker(c) for c in ("a", "b", "c")}
    outstanding: dict[tuple[str, int], int] = {}  # writes without an answer: attempts
    running: dict[tuple[str, int], RequestId] = {}  # attempts a driver is applying
    pending: list[RequestId] = []  # attempts not delivered yet (reordered at will)
    now = 0.0
    for _step in range(400):
        now += rng.random()
        action = rng.random()
        if action < 0.3:  # a client starts a write
            c = rng.choice(list(trackers))
            seq = trackers[c].new_seq_no()
            outstanding[(c, seq)] = 1
            pending.append(RequestId(c, seq, trackers[c].first_incomplete(), 1))
        elif action < 0.45 and outstanding:  # a client retries (a lost answer, a timeout)
            c, seq = rng.choice(list(outstanding))
            outstanding[(c, seq)] += 1
            first = trackers[c].first_incomplete()
            pending.append(RequestId(c, seq, first, outstanding[(c, seq)]))
        elif action < 0.85 and pending:  # an attempt arrives (perhaps a late duplicate)
            r = pending.pop(rng.randrange(len(pending)))
            got = t.track(r, now)
            key = (r.client_id, r.seq_no)
            if got.state is RpcState.NEW:
                running[key] = r
            elif got.state is RpcState.COMPLETED:
                assert got.response == applied[key] == 1
            if key in outstanding and rng.random() < 0.3:  # answered, or given up on
                del outstanding[key]
                trackers[r.client_id].completed(r.seq_no)
        elif running:  # a driver finishes: applied, or failed without applying
            key = rng.choice(list(running))
            r = running.pop(key)
            if rng.random() < 0.2:
                t.fail(r)
            else:
                applied[key] = applied.get(key, 0) + 1
                t.complete(r, applied[key], now)
        if rng.random() < 0.05:
            t.gc(now)
        assert all(n == 1 for n in applied.values())
        for (c, seq), r in running.items():
            assert t.records(c).get(seq) is RpcState.IN_PROGRESS, r


def test_the_request_tracker_names_writes_and_their_watermark() -> None:
    tracker = RequestTracker()
    assert len(tracker.client_id) == 32 and tracker.client_id != RequestTracker().client_id
    assert tracker.first_incomplete() == 1
    s1, s2, s3 = tracker.new_seq_no(), tracker.new_seq_no(), tracker.new_seq_no()
    assert (s1, s2, s3) == (1, 2, 3)
    tracker.completed(s2)
    assert tracker.first_incomplete() == 1
    tracker.completed(s1)
    assert tracker.first_incomplete() == 3
    tracker.completed(s3)
    assert (tracker.first_incomplete(), tracker.incomplete()) == (4, 0)


def test_the_write_request_id_is_an_optional_field() -> None:
    plain = WriteRequest("t1", "insert")
    assert '"request_id"' in encode(plain, None).decode()  # null: an untracked write
    body = json.loads(encode(plain, None))
    del body["body"]["request_id"]  # a client of before the field: the default
    assert decode(json.dumps(body).encode()).message == plain
    tracked = WriteRequest("t1", "insert", request_id=RequestId("c", 7, 5, 2))
    assert decode(encode(tracked, None)).message == tracked


def test_the_fault_point_parses_its_spec() -> None:
    assert LoseWriteResponses.parse("every=3,sleep=0.5") == LoseWriteResponses(3, 0.5)
    spec = "every=2,sleep=1,when=before_complete,seed=4"
    assert LoseWriteResponses.parse(spec) == LoseWriteResponses(2, 1.0, "before_complete", 4)
    for bad in ("every=0,sleep=1", "sleep=1", "every=2,sleep=1,when=never", "every=2,x=1"):
        with pytest.raises(ValueError, match=LOSE_WRITE_RESPONSES_ENV):
            LoseWriteResponses.parse(bad)


# -- real tablet servers that lose write responses ------------------------------------------

SCHEMA = Schema.build(
    [
        ColumnSchema("id", DataType.parse("BIGINT"), nullable=False),
        ColumnSchema("v", DataType.parse("STRING")),
    ],
    ["id"],
)
WHOLE = TabletPartition.of(
    PartitionSchema(), Partition((), RangeBounds(), b"", b"", b"", b"")
).to_json()

#: Attempts time out after 0.3 s; a lost answer's handler sleeps 0.8 s past it.
TIMEOUT = 0.3
SLEEP = 0.8
RETRY = RetryPolicy(max_attempts=8, initial_backoff=0.05, max_backoff=0.2, deadline=15.0)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("once")
    write_secret_file(path / "secret", SECRET)
    return path


def start(workdir: Path, name: str, spec: str) -> TServerProcess:
    return TServerProcess(workdir / name, workdir / "secret", env={LOSE_WRITE_RESPONSES_ENV: spec})


@pytest.fixture(scope="module")
def tservers(workdir: Path) -> Iterator[dict[str, TServerProcess]]:
    # Every 2nd write's answer is lost once it is recorded; every 3rd's while the write
    # is still in progress (a retry waits for it); one in 3 at random; every one, for
    # longer than a short deadline. Started in parallel.
    specs = {
        "after": f"every=2,sleep={SLEEP}",
        "before": f"every=3,sleep={SLEEP},when=before_complete",
        "random": f"every=3,sleep={SLEEP},seed=11",
        "stuck": "every=1,sleep=3,when=before_complete",
    }
    procs: dict[str, TServerProcess] = {}
    errors: list[BaseException] = []

    def run(name: str) -> None:
        try:
            procs[name] = start(workdir, name, specs[name])
        except BaseException as exc:  # raised below
            errors.append(exc)

    starters = [threading.Thread(target=run, args=(name,)) for name in specs]
    for t in starters:
        t.start()
    for t in starters:
        t.join()
    try:
        if errors:
            raise errors[0]
        yield procs
    finally:
        for name, p in procs.items():
            assert p.stop() == 0 or name == "stuck"
    for name in procs:
        assert "Traceback" not in (workdir / name / "tserver.log").read_text()


def session(**kw: object) -> TabletServerPool:
    return TabletServerPool(secret=SECRET, timeout=TIMEOUT, retry=RETRY, **kw)  # type: ignore[arg-type]


def new_tablet(pool: TabletServerPool, address: str, tablet_id: str) -> None:
    schema = json.dumps(SCHEMA.to_dict())
    pool.create_tablet(address, CreateTablet(tablet_id, "t", "t", WHOLE, schema, 1))


def rows(ids: list[int], v: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([v] * len(ids))})


def stored(pool: TabletServerPool, address: str, tablet_id: str) -> list[tuple[int, str]]:
    table = pool.scan(address, tablet_id, None, [], None, ordered=True).read_all()
    return [(r["id"], r["v"]) for r in table.to_pylist()]


def test_a_lost_answer_is_retried_and_gets_the_original_response(
    tservers: dict[str, TServerProcess], workdir: Path
) -> None:
    address = tservers["after"].address
    with session() as pool:
        new_tablet(pool, address, "lost")
        first = pool.write(address, "lost", "insert", rows([1, 2]))  # write 1: answered
        # Write 2 applies, its answer is lost; the retry gets that answer, row errors
        # included: 2 is a duplicate key, 3 applied once.
        second = pool.write(address, "lost", "insert", rows([2, 3], "y"))
        assert (first.applied, second.applied, second.ignored) == (2, 1, 0)
        assert [(e.index, e.status) for e in second.row_errors] == [(0, "AlreadyPresent")]
        assert second.timestamp > first.timestamp
        assert stored(pool, address, "lost") == [(1, "x"), (2, "x"), (3, "y")]
        assert pool.requests.incomplete() == 0
    log = (workdir / "after" / "tserver.log").read_text()
    assert "a retry, answered" in log


def test_a_retry_of_a_write_in_progress_waits_for_it(
    tservers: dict[str, TServerProcess], workdir: Path
) -> None:
    address = tservers["before"].address
    with session() as pool:
        new_tablet(pool, address, "slow")
        answers = [pool.write(address, "slow", "insert", rows([i])) for i in range(1, 4)]
        # The 3rd write's driver slept before recording it; its retries found it in
        # progress, waited, and got its answer: applied, not a duplicate key.
        assert [(a.applied, a.row_errors) for a in answers] == [(1, [])] * 3
        assert [r[0] for r in stored(pool, address, "slow")] == [1, 2, 3]
    assert "a retry, answered" in (workdir / "before" / "tserver.log").read_text()


def test_concurrent_inserts_with_lost_answers_apply_exactly_once(
    tservers: dict[str, TServerProcess], workdir: Path
) -> None:
    """N inserts of distinct keys from 4 threads of one session, one answer in 3 lost at
    random: every insert reports success (a retry of an applied insert is not a
    duplicate key), and there are exactly N rows. Then upserts of the same keys: each
    reports applied once, and the rows hold the upserted values."""
    address = tservers["random"].address
    n, threads = 24, 4
    with session() as pool:
        new_tablet(pool, address, "count")
        failures: list[BaseException] = []
        results: dict[int, tuple[int, int, list[object]]] = {}

        def insert(worker: int, op: str, v: str) -> None:
            try:
                for i in range(worker, n, threads):
                    r = pool.write(address, "count", op, rows([i], v))
                    results[i] = (r.applied, r.ignored, list(r.row_errors))
            except BaseException as exc:  # surfaced below
                failures.append(exc)

        for op, v in (("insert", "x"), ("upsert", "u")):
            workers = [threading.Thread(target=insert, args=(w, op, v)) for w in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            assert failures == []
            assert results == {i: (1, 0, []) for i in range(n)}
            assert stored(pool, address, "count") == [(i, v) for i in range(n)]
        assert pool.requests.incomplete() == 0
    assert "a retry, answered" in (workdir / "random" / "tserver.log").read_text()


def test_a_write_that_never_gets_an_answer_says_it_may_have_applied(
    tservers: dict[str, TServerProcess],
) -> None:
    """On a server whose every write sleeps 3 s before recording its result: a write
    whose deadline passes while its attempts wait says it may or may not have been
    applied; a request below the client's watermark is stale, a watermark past the
    request malformed; a write refused after an attempt timed out is not "refused"
    (it may have applied); a server refused on every attempt is ``ConnectionRefused``:
    surely never applied."""
    proc = tservers["stuck"]
    short = RetryPolicy(max_attempts=3, initial_backoff=0.05, max_backoff=0.1, deadline=0.6)
    with TabletServerPool(secret=SECRET, timeout=0.2, retry=short) as pool:
        new_tablet(pool, proc.address, "stuck")
        with pytest.raises(RpcTimedOut, match="may or may not have been applied"):
            pool.write(proc.address, "stuck", "insert", rows([1]))
        assert pool.requests.incomplete() == 0

    def send(rid: RequestId, client: RpcClient) -> object:
        request = WriteRequest("stuck", "insert", request_id=rid)
        return client.put(request, rows([rid.seq_no + 100]), idempotent=True)

    once = RetryPolicy(max_attempts=1, deadline=1.0)
    with RpcClient(proc.address, secret=SECRET, timeout=0.2, retry=once) as client:
        with pytest.raises(RpcTimedOut):
            send(RequestId("raw", 5, 5), client)  # in progress for 3 s
        with pytest.raises(RequestStale, match="raw:3 to tablet stuck is stale"):
            send(RequestId("raw", 3, 3), client)
        with pytest.raises(MalformedMessage, match="past its own sequence number"):
            send(RequestId("raw", 6, 7), client)

    def kill_then_sleep(seconds: float) -> None:
        if proc.process.poll() is None:
            proc.kill()
        time.sleep(seconds)

    with RpcClient(
        proc.address, secret=SECRET, timeout=0.2, retry=short, sleep=kill_then_sleep
    ) as client:
        # The first attempt times out (it may have applied); the retries are refused.
        with pytest.raises(ServiceUnavailable) as caught:
            send(RequestId("raw", 8, 8), client)
        assert not isinstance(caught.value, ConnectionRefused)
        assert "connection refused" in str(caught.value)
    pool = TabletServerPool(secret=SECRET, timeout=0.2, retry=short)
    with pool, pytest.raises(ConnectionRefused):
        pool.write(proc.address, "stuck", "insert", rows([1]))
