"""A long-running writer holds memory for its live rowsets only (issue 31, P1).

Flushes and compactions replace files all the time; what a process keeps per file or
rowset (decoded pages in the block cache, sorted key arrays and bloom bits in the
process-wide arenas, maintenance records) must go when the file goes, so that what the
writer holds is bounded by what its live rowsets need, not by how long it has run.
The fast test asserts on those structures after thousands of maintenance cycles; the
slow one checks the process's resident memory over a longer run.
"""

from __future__ import annotations

import gc
import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kudusql.common.options import TabletOptions
from kudusql.storage.cfile import BlockCache
from kudusql.storage.cfile.arena import Arena
from kudusql.storage.tablet.disk_key_index import BLOOM_ARENA, KEY_ARENA
from kudusql.storage.tablet.maintenance import MaintenanceManager
from kudusql.storage.tablet.tablet import Tablet
from tests.storage.tablet.test_compaction import KV, Clock, kv

#: Small sizes: flushes every few batches, rowsets that roll at 64 KiB, history of one
#: (test-clock) second, so that a cycle of a write and one maintenance op replaces files.
OPTS = TabletOptions(
    rows_per_page=64,
    sync=False,
    history_max_age_s=1,
    file_grace_s=0,
    flush_threshold_bytes=8 * 1024,
    flush_threshold_s=1e9,
    rowset_target_bytes=64 * 1024,
    minor_compaction_min_files=2,
    block_cache_bytes=1 << 30,  # far above what the data needs: only eviction bounds it
)
KEYS = 4000


def live_files(t: Tablet) -> set[str]:
    return {os.path.join(d.dir, f) for d in t._rowsets.drs for f in d.meta.file_names()}


def arena_owned_by(arena: Arena[Any], path_of: Any, tablet: Tablet) -> list[str]:
    """Paths of the live owners the arena holds that belong to ``tablet``."""
    out = []
    for ref, _, _ in list(arena._where.values()):
        o = ref()
        if o is not None and path_of(o).startswith(tablet.path + os.sep):
            out.append(path_of(o))
    return out


def check_bounded(t: Tablet, ops: dict[str, int]) -> None:
    """Nothing but the live rowsets' files is held (nothing is in flight: every op
    returned, no scan is open, and ``file_grace_s`` is 0)."""
    gc.collect()
    t.maintainer.delete_obsolete()
    live = live_files(t)
    cache = t.cache
    cached = cache.cached_paths()
    assert cached <= live, (sorted(cached - live)[:5], ops)
    # Every entry is of a live file: at most each page of each live file, its whole-key
    # array and one patched version of each page.
    pages = sum(
        r.num_pages
        for d in t._rowsets.drs
        for r in [d._key_reader, *d._readers.values()]
        if r is not None
    )
    assert len(cache) <= 2 * pages + len(live), (len(cache), pages)
    # The arenas: only live rowsets' key files and blooms among this tablet's, and
    # buffers bounded by what their live items need.
    keys = arena_owned_by(KEY_ARENA, lambda r: r.path, t)
    assert set(keys) <= live, sorted(set(keys) - live)[:5]
    assert len(keys) == len(set(keys))
    blooms = arena_owned_by(BLOOM_ARENA, lambda b: b.path, t)
    assert set(blooms) <= live, sorted(set(blooms) - live)[:5]
    for arena in (KEY_ARENA, BLOOM_ARENA):
        arena.place([])  # what every placement does first: forget the dead owners
        assert len(arena._where) == arena.live_items()
        assert arena.capacity_items() <= max(arena.min_items, 8 * arena.live_item_count())
    assert len(t.maintenance_log) <= t.maintainer._LOG_KEEP


def run_writer(t: Tablet, clock: Clock, cycles: int, check_every: int = 0) -> dict[str, int]:
    """``cycles`` rounds of a write (upserts, updates, deletes; every third round a
    batch of 100 keys, which goes through the key index and arenas), a scan or point
    lookups, and one maintenance op, with the test clock moving 0.2 s per round."""
    mm = MaintenanceManager(enabled=False, worker_process=False, memory_limit_bytes=1 << 30)
    t.attach(mm)
    rng = np.random.default_rng(7)
    ops: dict[str, int] = {}
    for i in range(cycles):
        n = 100 if i % 3 == 0 else 5
        keys = np.unique(rng.integers(0, KEYS, n)).tolist()
        step = i % 5
        if step in (0, 1):
            t.upsert(kv(keys, [i] * len(keys), [f"s{i}"] * len(keys)))
        elif step == 2:
            t.update(kv(keys, [-i] * len(keys)))
        elif step == 3:
            t.delete(kv(keys))
        else:
            t.scan(["key", "val", "s"]).read_all()
            for k in keys:
                t.lookup((k,), ["val"])
        clock.advance(200_000)
        op = mm.run_once()
        if op is not None:
            ops[op.name] = ops.get(op.name, 0) + 1
        if check_every and i % check_every == check_every - 1:
            check_bounded(t, ops)
    return ops


def test_long_running_writer_holds_only_what_live_rowsets_need(tmp_path: Any) -> None:
    clock = Clock()
    t = Tablet.create(str(tmp_path / "t"), KV, OPTS, clock=clock.hybrid)
    try:
        ops = run_writer(t, clock, 2000, check_every=250)
        # The load did replace files all along: flushes, every kind of compaction, GC.
        for name in ("flush_mrs", "flush_deltas", "merge_compaction", "undo_delta_gc"):
            assert ops.get(name, 0) >= 10, ops
        assert ops.get("major_delta_compaction", 0) + ops.get("minor_delta_compaction", 0)
        check_bounded(t, ops)
        rows = t.scan(["key"]).read_all().num_rows
        assert 0 < rows <= KEYS
    finally:
        t.close()
    # A closed tablet's pages leave the cache (its files may be deleted next).
    assert not t.cache.cached_paths()


def test_cache_charges_what_an_entry_keeps() -> None:
    """The capacity bounds what the cache keeps alive: a slice keeps its whole buffer
    and every entry has a fixed cost beyond its data, so both are charged."""
    big = pa.array(np.zeros(100_000, dtype=np.int64))
    c = BlockCache(1 << 20)
    c.put(("f@1", 0), big.slice(0, 10))
    assert c.size_bytes >= big.nbytes
    tiny = BlockCache(BlockCache.ENTRY_OVERHEAD_BYTES * 10)
    for i in range(100):
        tiny.put(("f@1", i), pa.array([i], pa.int64()))
    assert len(tiny) < 10


class Owner:
    """An arena owner (a stand-in for a key reader or bloom filter) and its array."""

    def __init__(self, n: int) -> None:
        self.array = np.arange(n, dtype=np.uint64)


def test_arena_holds_what_its_live_owners_need() -> None:
    """Owners come and go (rowsets replaced by compactions): the arena forgets the dead
    ones at the next placement and its buffer shrinks once they outweigh the live ones,
    even when it is not full (a writer whose big rowsets were merged away kept their
    buffer for as long as no new rowset filled it)."""
    arena: Arena[Owner] = Arena(np.uint64, lambda o: o.array, min_items=1024)
    big = [Owner(10_000) for _ in range(50)]
    arena.place(big)
    assert arena.live_item_count() == 500_000
    keep = big[0]
    del big
    gc.collect()
    small = Owner(100)
    buf, offsets = arena.place([keep, small])
    assert np.array_equal(buf[offsets[0] : offsets[0] + 10_000], keep.array)
    assert np.array_equal(buf[offsets[1] : offsets[1] + 100], small.array)
    assert len(arena._where) == 2
    assert arena.capacity_items() <= 8 * 10_100
    # Many generations of small owners, each replaced by the next: the index does not
    # grow with the generations, and the buffer stays within a bound of the live items.
    for gen in range(2000):
        small = Owner(100 + gen % 7)
        arena.place([keep, small])
        assert len(arena._where) <= 3
        assert arena.capacity_items() <= max(arena.min_items, 8 * arena.live_item_count())
    got = arena.array_of(keep)
    assert got is not None and np.array_equal(got, keep.array)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.slow
def test_long_running_writer_resident_memory_stays_bounded(tmp_path: Any) -> None:
    """Resident memory after a long run stays near what it was once the working set
    was built (generous: allocators keep freed memory). The block cache's capacity
    (1 GiB) is far above what the live rowsets need, as the default (a quarter of
    physical memory) is: with the pages of replaced files kept, the writer grew by
    about 30 MiB per thousand cycles here."""
    clock = Clock()
    t = Tablet.create(str(tmp_path / "t"), KV, OPTS, clock=clock.hybrid)
    try:
        run_writer(t, clock, 2000)
        gc.collect()
        base = rss_bytes()
        run_writer(t, clock, 20_000, check_every=5000)
        gc.collect()
        grown = rss_bytes() - base
        assert grown < 64 << 20, f"resident memory grew by {grown >> 20} MiB"
    finally:
        t.close()
