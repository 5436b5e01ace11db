"""BlockCache: LRU order, byte accounting, invalidation, thread safety."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kudusql.common.errors import ProgrammingError
from kudusql.storage.cfile import BlockCache


def arr(nbytes: int) -> pa.Array[Any]:
    assert nbytes % 8 == 0
    return pa.array(np.zeros(nbytes // 8, dtype=np.int64))


def test_get_put_and_stats() -> None:
    c = BlockCache(1000)
    assert c.get(("f", 0)) is None
    a = arr(80)
    c.put(("f", 0), a)
    assert c.get(("f", 0)) is a
    assert (c.hits, c.misses) == (1, 1)
    assert c.size_bytes == 80
    assert c.capacity_bytes == 1000


def test_lru_eviction_order() -> None:
    c = BlockCache(320)
    for i in range(4):
        c.put(("f", i), arr(80))
    assert c.size_bytes == 320
    assert c.get(("f", 0)) is not None  # 0 is now most recent
    c.put(("f", 4), arr(80))  # evicts 1, the least recently used
    assert c.get(("f", 1)) is None
    for i in (0, 2, 3, 4):
        assert c.get(("f", i)) is not None
    assert c.size_bytes == 320
    c.put(("f", 5), arr(200))  # evicts 0, 2, 3 (LRU order after the gets above)
    assert c.size_bytes <= 320
    assert c.get(("f", 4)) is not None
    assert c.get(("f", 5)) is not None
    assert c.get(("f", 0)) is None


def test_replace_same_key_accounts_once() -> None:
    c = BlockCache(1000)
    c.put(("f", 0), arr(400))
    c.put(("f", 0), arr(200))
    assert c.size_bytes == 200
    assert len(c) == 1


def test_oversized_value_not_cached() -> None:
    c = BlockCache(100)
    c.put(("f", 0), arr(80))
    c.put(("f", 1), arr(800))
    assert c.get(("f", 1)) is None
    assert c.get(("f", 0)) is not None
    assert c.size_bytes == 80
    zero = BlockCache(0)
    zero.put(("f", 0), arr(8))
    assert zero.get(("f", 0)) is None
    assert zero.size_bytes == 0


def test_invalidate_file() -> None:
    c = BlockCache(10_000)
    for i in range(5):
        c.put(("a", i), arr(80))
        c.put(("b", i), arr(80))
    c.invalidate_file("a")
    assert c.size_bytes == 400
    assert all(c.get(("a", i)) is None for i in range(5))
    assert all(c.get(("b", i)) is not None for i in range(5))
    c.invalidate_file("nope")
    c.clear()
    assert c.size_bytes == 0
    assert len(c) == 0


def test_negative_capacity() -> None:
    with pytest.raises(ProgrammingError):
        BlockCache(-1)


def test_thread_safety_smoke() -> None:
    c = BlockCache(8 * 1000)
    pages = [arr(8 * (1 + i % 17)) for i in range(64)]
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(3000):
                f = f"f{rng.integers(0, 4)}"
                i = int(rng.integers(0, 64))
                op = rng.integers(0, 10)
                if op < 6:
                    got = c.get((f, i))
                    assert got is None or got is pages[i]
                elif op < 9:
                    c.put((f, i), pages[i])
                else:
                    c.invalidate_file(f)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert 0 <= c.size_bytes <= c.capacity_bytes
    total = sum(c.get(k) is not None for k in [(f"f{j}", i) for j in range(4) for i in range(64)])
    assert total == len(c)
    assert c.size_bytes == sum(
        pages[i].nbytes for j in range(4) for i in range(64) if (f"f{j}", i) in c._entries
    )
