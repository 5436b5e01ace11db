"""Random SELECTs over random data: kudusql against plain DuckDB over the same rows,
before and after flushes, updates and deletes (pushdown must never change a result)."""

from __future__ import annotations

import datetime
import random
from typing import Any

import duckdb
import pytest

import kudusql

DDL_T = (
    "CREATE TABLE t (id BIGINT PRIMARY KEY, a INT, s STRING, d DOUBLE, dt DATE) "
    "PARTITION BY HASH (id) PARTITIONS 3"
)
DDL_U = (
    "CREATE TABLE u (k INT, j BIGINT, w STRING, PRIMARY KEY (k, j)) "
    "PARTITION BY RANGE (k) (PARTITION VALUES < 5, PARTITION 5 <= VALUES)"
)
DUCK_T = "CREATE TABLE t (id BIGINT PRIMARY KEY, a INT, s VARCHAR, d DOUBLE, dt DATE)"
DUCK_U = "CREATE TABLE u (k INT, j BIGINT, w VARCHAR, PRIMARY KEY (k, j))"
WORDS = ["apple", "apricot", "banana", "berry", "cherry", "ap", "b", ""]


def _rows(rng: random.Random) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    def day() -> datetime.date:
        return datetime.date(2024, 1, 1) + datetime.timedelta(rng.randint(0, 60))

    t = [
        (
            i,
            rng.choice([None, rng.randint(-20, 20)]),
            rng.choice([None, rng.choice(WORDS) + str(rng.randint(0, 3))]),
            rng.choice([None, round(rng.uniform(-5, 5), 2), float("nan")]),
            rng.choice([None, day()]),
        )
        for i in rng.sample(range(-50, 400), 200)
    ]
    u = {(rng.randint(0, 9), rng.randint(-20, 20)) for _ in range(60)}
    return t, [(k, j, rng.choice([None, *WORDS])) for k, j in sorted(u)]


def _pred(rng: random.Random, alias: str = "t") -> str:
    c = f"{alias}."
    kinds = [
        lambda: f"{c}id {rng.choice(['=', '<', '<=', '>', '>='])} {rng.randint(-60, 410)}",
        lambda: f"{c}a {rng.choice(['=', '<', '>=', '<>'])} {rng.randint(-20, 20)}",
        lambda: f"{c}id IN ({', '.join(str(rng.randint(-50, 400)) for _ in range(5))})",
        lambda: f"{c}a IN ({rng.randint(-5, 5)}, NULL, {rng.randint(-5, 5)})",
        lambda: f"{c}{rng.choice(['a', 's', 'd', 'dt'])} IS {rng.choice(['', 'NOT '])}NULL",
        lambda: f"{c}s LIKE '{rng.choice(['ap', 'b', 'ch', 'apple1', '%a'])}%'",
        lambda: f"{c}d {rng.choice(['<', '>', '='])} {round(rng.uniform(-5, 5), 1)}",
        lambda: f"{c}dt >= DATE '2024-01-{rng.randint(10, 31):02d}'",
        lambda: f"{c}id BETWEEN {rng.randint(-50, 200)} AND {rng.randint(100, 400)}",
        lambda: f"{c}a > {rng.randint(-5, 5)}.5",
        lambda: f"NOT ({c}id < {rng.randint(0, 300)})",
        lambda: f"({c}a < 0 OR {c}s LIKE 'b%')",
    ]
    n = rng.randint(1, 3)
    return " AND ".join(rng.choice(kinds)() for _ in range(n))


def _query(rng: random.Random) -> str:
    shape = rng.randrange(6)
    if shape == 0:
        return f"SELECT * FROM t WHERE {_pred(rng)}"
    if shape == 1:
        return f"SELECT a, count(*), sum(id), min(s), max(dt) FROM t WHERE {_pred(rng)} GROUP BY a"
    if shape == 2:
        return (
            f"SELECT t.id, u.k, u.w FROM t JOIN u ON t.a = u.j WHERE {_pred(rng)} "
            f"AND u.k {rng.choice(['<', '>=', '='])} {rng.randint(0, 9)}"
        )
    if shape == 3:
        return (
            f"SELECT t.id, u.w FROM t LEFT JOIN u ON u.j = t.a AND u.k < {rng.randint(0, 9)} "
            f"WHERE {_pred(rng)}"
        )
    if shape == 4:
        return f"SELECT count(*), avg(a) FROM t WHERE {_pred(rng)} OR {_pred(rng)}"
    sub = f"SELECT j FROM u WHERE k > {rng.randint(0, 9)}"
    return f"SELECT id FROM t WHERE id IN ({sub}) AND {_pred(rng)}"


def _norm(rows: list[tuple[Any, ...]]) -> list[tuple[str, ...]]:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "nan" if v != v else f"{v:.6g}"
        return repr(v)

    return sorted(tuple(cell(v) for v in r) for r in rows)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_selects_match_duckdb(seed: int) -> None:
    rng = random.Random(seed)
    t_rows, u_rows = _rows(rng)
    duck = duckdb.connect()
    duck.execute(DUCK_T)
    duck.execute(DUCK_U)
    duck.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", t_rows)
    duck.executemany("INSERT INTO u VALUES (?, ?, ?)", u_rows)
    with kudusql.connect(":memory:", maintenance=False, sync=False) as conn:
        cur = conn.cursor()
        cur.execute(DDL_T)
        cur.execute(DDL_U)
        cur.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", t_rows)
        assert cur.rowcount == len(t_rows)
        cur.executemany("INSERT INTO u VALUES (?, ?, ?)", u_rows)

        def check(phase: str) -> None:
            for _ in range(40):
                q = _query(rng)
                want = _norm(duck.execute(q).fetchall())
                got = _norm(cur.execute(q).fetchall())
                assert got == want, f"{phase}: {q}"

        check("memrowset")
        cur.execute("ALTER TABLE t EXECUTE FLUSH")
        cur.execute("FLUSH TABLE u")
        check("flushed")
        for sql in (
            "UPDATE t SET a = a + 1, s = s || 'x' WHERE id % 3 = 0",
            "DELETE FROM t WHERE id % 7 = 1",
            "UPDATE u SET w = 'upd' WHERE k = 3",
        ):
            cur.execute(sql)
            n = duck.execute(sql).fetchall()[0][0]
            assert cur.rowcount == n, sql
        check("updated")
        cur.execute("ALTER TABLE t EXECUTE MAINTENANCE")
        check("compacted")
