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


def cost(nbytes: int) -> int:
    """The charge of an ``arr(nbytes)`` entry: its data and the per-entry overhead."""
    return nbytes + BlockCache.ENTRY_OVERHEAD_BYTES


def test_get_put_and_stats() -> None:
    c = BlockCache(cost(1000))
    assert c.get(("f", 0)) is None
    a = arr(80)
    c.put(("f", 0), a)
    assert c.get(("f", 0)) is a
    assert (c.hits, c.misses) == (1, 1)
    assert c.size_bytes == cost(80)
    assert c.capacity_bytes == cost(1000)


def test_lru_eviction_order() -> None:
    c = BlockCache(4 * cost(80))
    for i in range(4):
        c.put(("f", i), arr(80))
    assert c.size_bytes == 4 * cost(80)
    assert c.get(("f", 0)) is not None  # 0 is now most recent
    c.put(("f", 4), arr(80))  # evicts 1, the least recently used
    assert c.get(("f", 1)) is None
    for i in (0, 2, 3, 4):
        assert c.get(("f", i)) is not None
    assert c.size_bytes == 4 * cost(80)
    c.put(("f", 5), arr(2 * cost(80) + 8))  # evicts 0, 2, 3 (LRU order after the gets)
    assert c.size_bytes <= 4 * cost(80)
    assert c.get(("f", 4)) is not None
    assert c.get(("f", 5)) is not None
    assert c.get(("f", 0)) is None


def test_replace_same_key_accounts_once() -> None:
    c = BlockCache(cost(1000))
    c.put(("f", 0), arr(400))
    c.put(("f", 0), arr(200))
    assert c.size_bytes == cost(200)
    assert len(c) == 1


def test_oversized_value_not_cached() -> None:
    c = BlockCache(cost(100))
    c.put(("f", 0), arr(80))
    c.put(("f", 1), arr(800))
    assert c.get(("f", 1)) is None
    assert c.get(("f", 0)) is not None
    assert c.size_bytes == cost(80)
    zero = BlockCache(0)
    zero.put(("f", 0), arr(8))
    assert zero.get(("f", 0)) is None
    assert zero.size_bytes == 0


def test_invalidate_file() -> None:
    c = BlockCache(cost(10_000) * 10)
    for i in range(5):
        c.put(("a", i), arr(80))
        c.put(("b", i), arr(80))
    c.invalidate_file("a")
    assert c.size_bytes == 5 * cost(80)
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
    c = BlockCache(8 * 1000 + 100 * BlockCache.ENTRY_OVERHEAD_BYTES)
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
        cost(pages[i].nbytes) for j in range(4) for i in range(64) if (f"f{j}", i) in c._entries
    )


def test_one_version_of_a_patched_page() -> None:
    """A page with deltas applied is cached under its deltas' version; a newer version
    replaces the older (never asked for again), and plain pages are untouched."""
    c = BlockCache(cost(1000) * 10)
    c.put(("f@1", 0), arr(80))
    c.put(("f@1", 0, "v1"), arr(80))
    c.put(("f@1", 1, "v1"), arr(80))
    c.put(("f@1", 0, "v2"), arr(80))
    assert c.get(("f@1", 0, "v1")) is None
    assert c.get(("f@1", 0, "v2")) is not None
    assert c.get(("f@1", 1, "v1")) is not None
    assert c.get(("f@1", 0)) is not None
    assert len(c) == 3 and c.size_bytes == 3 * cost(80)
    c.invalidate_file("f@1")
    assert len(c) == 0 and c.size_bytes == 0
    c.put(("f@1", 0, "v3"), arr(80))  # the bookkeeping of versions went with the file
    assert len(c) == 1


def test_invalidate_paths_by_file_and_directory() -> None:
    c = BlockCache(cost(80) * 100)
    uids = {
        "a": "/d/rowsets/00000001/c0.cfile@1:2:3:4",
        "a_old": "/d/rowsets/00000001/c0.cfile@1:9:3:4",  # a file once at the same path
        "b": "/d/rowsets/00000001/key.cfile@1:5:3:4",
        "c": "/d/rowsets/00000002/c0.cfile@1:6:3:4",
        "c2": "/d/rowsets/000000020/c0.cfile@1:7:3:4",  # a sibling, not under .../2
    }
    for u in uids.values():
        c.put((u, 0), arr(80))
        c.put((u, 1, "v"), arr(80))
    assert c.cached_paths() == {
        "/d/rowsets/00000001/c0.cfile",
        "/d/rowsets/00000001/key.cfile",
        "/d/rowsets/00000002/c0.cfile",
        "/d/rowsets/000000020/c0.cfile",
    }
    assert c.invalidate_paths(["/d/rowsets/00000001/c0.cfile"]) == 2
    assert c.get((uids["a"], 0)) is None and c.get((uids["a_old"], 1, "v")) is None
    assert c.get((uids["b"], 0)) is not None
    assert c.invalidate_paths(["/d/rowsets/00000002"]) == 1
    assert c.get((uids["c"], 0)) is None and c.get((uids["c2"], 0)) is not None
    assert c.invalidate_paths([]) == 0
    assert c.size_bytes == 4 * cost(80) and len(c) == 4
