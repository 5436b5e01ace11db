"""Workloads for fault tests: client threads that drive a cluster and record a ``History``.

What it owns: the register and bank workloads (their tables, their clients, their
client threads), the rule that turns a client's error into an outcome, and the end-of-
run checks that need the data (acknowledged writes lost). Faults are the nemesis's;
the verdict is the checker's (``tests.support.linearizability``).

Outcomes. An operation whose error proves nothing was sent or applied
(``ConnectionRefused``: nothing listened; ``TabletNotFound``: refused before applying;
"no tablet server serves": no location to send to) is recorded ``fail``. Any other
error of a write (a timeout, a lost connection, a server unavailable after sending,
``RequestStale``) is ``info``: it may have applied, now or later. A process whose
operation ended ``info`` takes a new process id, as in Jepsen (a process is sequential).

Clients are behind small protocols (``RegisterClient``, ``BankClient``), so a test can
run the same runner with a deliberately broken client and see the checker catch it.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import kudusql
from kudusql.cluster.errors import ConnectionRefused, TabletNotFound
from kudusql.common.errors import Error
from tests.support.history import History, Invocation, Operation, Outcome

__all__ = [
    "BankWorkload",
    "RegisterWorkload",
    "SqlBankClient",
    "SqlRegisterClient",
    "StaleReadRegisterClient",
    "complete_with_error",
    "lost_writes",
]

#: Phrases of errors raised before anything was sent.
_NOT_SENT = ("no tablet server serves",)


def complete_with_error(inv: Invocation, exc: BaseException, *, read: bool = False) -> Outcome:
    """Complete ``inv`` after ``exc``: ``fail`` if nothing can have applied, else ``info``.

    A read that raised changed nothing either way; it is ``fail`` (the checker drops
    failed and indeterminate reads alike)."""
    if read or isinstance(exc, ConnectionRefused | TabletNotFound):
        inv.fail()
        return Outcome.FAIL
    if isinstance(exc, Error) and any(p in str(exc) for p in _NOT_SENT):
        inv.fail()
        return Outcome.FAIL
    inv.info()
    return Outcome.INFO


# -- register ---------------------------------------------------------------------------


class RegisterClient(Protocol):
    def read(self, key: int) -> int | None: ...
    def write(self, key: int, value: int) -> None: ...
    def cas(self, key: int, expected: int, new: int) -> bool: ...
    def close(self) -> None: ...


class SqlRegisterClient:
    """Registers as rows of ``reg (k BIGINT PRIMARY KEY, v BIGINT)``, through the DB-API.

    ``read``: a point SELECT (one tablet, its latest state, at or after every write
    this connection saw acknowledged). ``write``: UPSERT by full key (the key-write
    fast path: one tablet write). ``cas``: ``UPDATE ... WHERE k = ? AND v = ?``, swapped
    when its rowcount is 1. On a cluster today that UPDATE is a read at a snapshot then
    a write of the rows found, held off only from writers of the same connection's
    database: another client's write between the two is overwritten, so it is not an
    atomic compare-and-set (the default runs leave it out)."""

    def __init__(self, url: str, *, timeout: float) -> None:
        self.conn = kudusql.connect(url, timeout=timeout)
        self.cur = self.conn.cursor()

    def read(self, key: int) -> int | None:
        self.cur.execute("SELECT v FROM reg WHERE k = ?", (key,))
        row = self.cur.fetchone()
        return None if row is None else int(row[0])

    def write(self, key: int, value: int) -> None:
        self.cur.execute("UPSERT INTO reg VALUES (?, ?)", (key, value))

    def cas(self, key: int, expected: int, new: int) -> bool:
        self.cur.execute("UPDATE reg SET v = ? WHERE k = ? AND v = ?", (new, key, expected))
        return self.cur.rowcount == 1

    def close(self) -> None:
        self.conn.close()


class StaleReadRegisterClient(SqlRegisterClient):
    """Broken on purpose: reads answer from this client's own cache of the last value
    it wrote or read, going to the server only for keys it has never seen. Another
    client's acknowledged write is then missed: the checker must say so."""

    def __init__(self, url: str, *, timeout: float) -> None:
        super().__init__(url, timeout=timeout)
        self.cache: dict[int, int | None] = {}

    def read(self, key: int) -> int | None:
        if key not in self.cache:
            self.cache[key] = super().read(key)
        return self.cache[key]

    def write(self, key: int, value: int) -> None:
        super().write(key, value)
        self.cache[key] = value


def _replication(replicas: int | None) -> str:
    if replicas is None:
        return ""
    return f" TBLPROPERTIES ('kudu.num_tablet_replicas' = '{replicas}')"


@dataclass
class RegisterWorkload:
    """``clients`` threads over ``keys`` registers (hashed over ``partitions`` tablets):
    reads and writes of unique values (client id * 10^6 + n), and with ``cas`` also
    compare-and-sets. Each thread draws its operations from ``seed`` and its id."""

    url: str
    keys: int = 8
    clients: int = 4
    partitions: int = 3
    cas: bool = False
    timeout: float = 1.0
    seed: int = 0
    #: Replicas per tablet (None: the cluster's default, 3 with 3 live tablet servers).
    replicas: int | None = None
    make_client: Callable[[str, float], RegisterClient] = field(
        default=lambda url, timeout: SqlRegisterClient(url, timeout=timeout)
    )

    def setup(self) -> None:
        with kudusql.connect(self.url, timeout=10) as conn:
            conn.execute("DROP TABLE IF EXISTS reg")
            conn.execute(
                "CREATE TABLE reg (k BIGINT PRIMARY KEY, v BIGINT) "
                f"PARTITION BY HASH (k) PARTITIONS {self.partitions}" + _replication(self.replicas)
            )

    def threads(self, history: History, stop: threading.Event) -> list[threading.Thread]:
        return [
            threading.Thread(target=self._run, args=(i, history, stop), name=f"reg-{i}")
            for i in range(self.clients)
        ]

    def _run(self, index: int, history: History, stop: threading.Event) -> None:
        rng = random.Random(f"{self.seed}/{index}")
        client = self.make_client(self.url, self.timeout)
        generation = 0
        written = 0
        last: dict[int, int] = {}
        kinds = ["read", "write", "cas"] if self.cas else ["read", "write"]
        try:
            while not stop.is_set():
                process: Hashable = (index, generation)
                key = rng.randrange(self.keys)
                kind = rng.choice(kinds)
                if kind == "read":
                    inv = history.invoke(process, "read", key)
                    try:
                        value = client.read(key)
                    except Error as e:
                        complete_with_error(inv, e, read=True)
                    else:
                        inv.ok(value)
                        if value is not None:
                            last[key] = value
                    continue
                written += 1
                new = index * 1_000_000 + written
                expected = last.get(key, -1)
                if kind == "write":
                    inv = history.invoke(process, "write", key, new)
                else:
                    inv = history.invoke(process, "cas", key, (expected, new))
                try:
                    result: bool | None = None
                    if kind == "write":
                        client.write(key, new)
                    else:
                        result = client.cas(key, expected, new)
                except Error as e:
                    if complete_with_error(inv, e) is Outcome.INFO:
                        generation += 1
                else:
                    inv.ok(result)
        finally:
            client.close()

    def final_reads(self, history: History, *, attempts: int = 20) -> dict[int, int | None]:
        """Read every key once the faults are healed (retrying errors), recording each
        read in ``history`` so the checker covers it too."""
        out: dict[int, int | None] = {}
        client = SqlRegisterClient(self.url, timeout=5.0)
        try:
            for key in range(self.keys):
                for attempt in range(attempts):
                    inv = history.invoke("final", "read", key)
                    try:
                        out[key] = client.read(key)
                    except Error as e:
                        complete_with_error(inv, e, read=True)
                        if attempt == attempts - 1:
                            raise
                        threading.Event().wait(0.25)
                    else:
                        inv.ok(out[key])
                        break
        finally:
            client.close()
        return out


def lost_writes(ops: Sequence[Operation], final: dict[int, int | None]) -> list[str]:
    """Acknowledged writes whose value, or a later one, is not what a key holds at the end.

    A key's final value ``v`` loses acknowledged write ``w`` when ``v`` comes from no
    write at all while ``w`` is acknowledged, or from a write that completed before
    ``w`` was invoked (so ``w`` follows it in every order, and ``v`` should be ``w``'s
    or a later one)."""
    writes: dict[Any, dict[Any, Operation]] = {}
    for op in ops:
        if op.kind == "write" and op.outcome is not Outcome.FAIL:
            writes.setdefault(op.key, {})[op.input] = op
        elif op.kind == "cas" and op.outcome is not Outcome.FAIL:
            writes.setdefault(op.key, {})[op.input[1]] = op
    lost: list[str] = []
    for key, value in final.items():
        acked = [w for w in writes.get(key, {}).values() if w.outcome is Outcome.OK]
        if value is None:
            lost.extend(f"key {key} is empty: {w.describe()} was acknowledged" for w in acked)
            continue
        source = writes.get(key, {}).get(value)
        if source is None:
            lost.append(f"key {key} holds {value}, which no write wrote")
            continue
        if source.complete_ns is None:
            continue  # indeterminate: it may have taken effect last
        lost.extend(
            f"key {key} holds {value} ({source.describe()}), older than {w.describe()}"
            for w in acked
            if source.complete_ns < w.invoke_ns
        )
    return lost


# -- bank -------------------------------------------------------------------------------


class BankClient(Protocol):
    def balances(self) -> dict[int, int]: ...
    def transfer(self, balances: dict[int, int]) -> None: ...
    def close(self) -> None: ...


class SqlBankClient:
    """Accounts as rows of ``bank (id BIGINT PRIMARY KEY, balance BIGINT)``, one tablet.

    ``balances``: one SELECT of every row (one statement reads one snapshot).
    ``transfer``: the new balances of both accounts as one atomic write of two rows
    (``RemoteTable.write_rows(..., "upsert", atomic=True)``): both rows fall in the one
    tablet, which applies a write request all or nothing at one HybridTime."""

    def __init__(self, url: str, *, timeout: float) -> None:
        self.conn = kudusql.connect(url, timeout=timeout)
        self.cur = self.conn.cursor()

    def balances(self) -> dict[int, int]:
        self.cur.execute("SELECT id, balance FROM bank")
        return {int(a): int(b) for a, b in self.cur.fetchall()}

    def transfer(self, balances: dict[int, int]) -> None:
        table = self.conn.session.db.table("bank")
        rows = [[a, b] for a, b in sorted(balances.items())]
        table.write_rows(["id", "balance"], rows, "upsert", atomic=True)

    def close(self) -> None:
        self.conn.close()


@dataclass
class BankWorkload:
    """``accounts`` accounts holding ``total`` between them, in one tablet; one writer
    moving money between two accounts (read, then write both new balances atomically)
    and ``readers`` threads reading every balance at one snapshot."""

    url: str
    accounts: int = 5
    total: int = 500
    readers: int = 2
    timeout: float = 1.0
    seed: int = 0
    #: Replicas per tablet (None: the cluster's default).
    replicas: int | None = None
    make_client: Callable[[str, float], BankClient] = field(
        default=lambda url, timeout: SqlBankClient(url, timeout=timeout)
    )

    @property
    def account_ids(self) -> list[int]:
        return list(range(self.accounts))

    def setup(self) -> None:
        each = self.total // self.accounts
        assert each * self.accounts == self.total, "total must divide evenly"
        with kudusql.connect(self.url, timeout=10) as conn:
            conn.execute("DROP TABLE IF EXISTS bank")
            # No partitioning: one tablet holds every account.
            conn.execute(
                "CREATE TABLE bank (id BIGINT PRIMARY KEY, balance BIGINT)"
                + _replication(self.replicas)
            )
            values = ", ".join(f"({a}, {each})" for a in self.account_ids)
            conn.execute(f"INSERT INTO bank VALUES {values}")

    def threads(self, history: History, stop: threading.Event) -> list[threading.Thread]:
        out = [threading.Thread(target=self._writer, args=(history, stop), name="bank-w")]
        out += [
            threading.Thread(target=self._reader, args=(i, history, stop), name=f"bank-r{i}")
            for i in range(self.readers)
        ]
        return out

    def _reader(self, index: int, history: History, stop: threading.Event) -> None:
        client = self.make_client(self.url, self.timeout)
        try:
            while not stop.is_set():
                inv = history.invoke(("bank-reader", index), "read")
                try:
                    balances = client.balances()
                except Error as e:
                    complete_with_error(inv, e, read=True)
                    stop.wait(0.02)
                else:
                    inv.ok(balances)
        finally:
            client.close()

    def _writer(self, history: History, stop: threading.Event) -> None:
        rng = random.Random(f"{self.seed}/bank")
        client = self.make_client(self.url, self.timeout)
        generation = 0
        try:
            while not stop.is_set():
                try:
                    balances = client.balances()
                except Error:
                    stop.wait(0.02)
                    continue
                src, dst = rng.sample(self.account_ids, 2)
                amount = rng.randint(0, max(0, balances.get(src, 0)))
                new = {src: balances[src] - amount, dst: balances[dst] + amount}
                inv = history.invoke(("bank-writer", generation), "transfer", None, new)
                try:
                    client.transfer(new)
                except Error as e:
                    if complete_with_error(inv, e) is Outcome.INFO:
                        generation += 1
                else:
                    inv.ok()
        finally:
            client.close()
