"""Large write batches locate their keys through ``KeyProbe`` (sorted once, hashed once)
and, for fixed-width keys, ``DiskKeyIndex`` (every DiskRowSet probed in a few numpy
passes), else two binary searches per DiskRowSet; small ones through the key-range index
one key at a time. All must find every key in the same place: the probe against brute
force, the shared-hash and packed bloom probes against the bloom's own hashing, and
``locate`` of one large batch against the same keys located in small batches on a
tablet whose rowsets overlap, hold deleted ghosts and re-inserted keys."""

from __future__ import annotations

import itertools
import pickle
import threading
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings

from kudusql.common.errors import ProgrammingError
from kudusql.common.keys import encode_keys
from kudusql.common.murmur import murmur3_x64_128
from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.cfile import key_array
from kudusql.storage.cfile.arena import Arena
from kudusql.storage.cfile.bloom import (
    BLOOM_CLASSIC,
    BLOOM_WORD,
    BloomArena,
    BloomFilter,
    BloomFilterSet,
)
from kudusql.storage.tablet import deltamemstore as dms_mod
from kudusql.storage.tablet import disk_key_index, write_path
from kudusql.storage.tablet.delta import ColumnDelta, Deltas, MutationType, concat_deltas
from kudusql.storage.tablet.deltamemstore import (
    DeltaMemStore,
    PendingRuns,
    append_runs,
    deltas_of,
)
from kudusql.storage.tablet.key_probe import BLOOM_SEED, KeyProbe
from kudusql.storage.tablet.tablet import Tablet

key_st = st.binary(max_size=4)


@given(keys=st.lists(key_st, min_size=1, max_size=40), lo=key_st, hi=key_st)
def test_in_range_equals_brute_force(keys: list[bytes], lo: bytes, hi: bytes) -> None:
    probe = KeyProbe(pa.array(keys, pa.binary()))
    got = probe.in_range(lo, hi).tolist()
    assert sorted(got) == [i for i, k in enumerate(keys) if lo <= k <= hi]
    assert [keys[i] for i in got] == sorted(keys[i] for i in got)  # in key order


@given(
    width=st.sampled_from([1, 2, 4, 5, 8]),
    data=st.data(),
    lo=st.binary(max_size=10),
    hi=st.binary(max_size=10),
)
def test_in_range_of_fixed_width_keys_equals_brute_force(
    width: int, data: Any, lo: bytes, hi: bytes
) -> None:
    """Keys of one width are searched as a numpy array (uint64/uint32 for 8/4 bytes);
    bounds of any length (a rowset's min/max key) must cut it exactly where bytes
    compare, including prefixes, NUL padding and the sign bit of the first byte."""
    alphabet = st.sampled_from([b"\x00", b"\x01", b"\x7f", b"\x80", b"\xff"])
    key_st = st.lists(alphabet, min_size=width, max_size=width).map(b"".join)
    keys = data.draw(st.lists(key_st, min_size=1, max_size=40))
    probe = KeyProbe(pa.array(keys, pa.binary()))
    got = probe.in_range(lo, hi).tolist()
    assert sorted(got) == [i for i, k in enumerate(keys) if lo <= k <= hi]
    assert [keys[i] for i in got] == sorted(keys[i] for i in got)


def test_in_range_of_a_huge_mixed_width_batch_compares_every_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(KeyProbe, "_MAX_LISTED", 4)
    keys = [b"b", b"a", b"ccc", b"", b"bb", b"c"]
    probe = KeyProbe(pa.array(keys, pa.binary()))
    assert probe._sorted is None and probe._sorted_np is None
    assert sorted(probe.in_range(b"a", b"bz").tolist()) == [0, 1, 4]
    assert probe.in_range(b"d", b"e").tolist() == []


@settings(max_examples=50, deadline=None)
@given(
    members=st.lists(st.binary(max_size=12), max_size=300),
    others=st.lists(st.binary(max_size=12), min_size=1, max_size=3000),
    fp=st.sampled_from([0.3, 0.01, 0.001]),
    version=st.sampled_from([BLOOM_WORD, BLOOM_CLASSIC]),
)
def test_bloom_with_shared_hashes_equals_own_hashing(
    members: list[bytes], others: list[bytes], fp: float, version: int
) -> None:
    bf = BloomFilter.build(pa.array(members, pa.binary()), fp, version)
    probes = pa.array(members + others, pa.binary())
    h1, h2 = murmur3_x64_128(probes, BLOOM_SEED)
    before = (h1.copy(), h2.copy())
    got = bf.may_contain_hashes(h1, h2, BLOOM_SEED)
    assert got.tolist() == bf.may_contain(probes).tolist()
    assert bool(got[: len(members)].all())  # no false negatives
    assert np.array_equal(h1, before[0]) and np.array_equal(h2, before[1])  # not changed


@settings(max_examples=30, deadline=None)
@given(
    keys=st.lists(st.binary(max_size=9), min_size=1, max_size=300),
    data=st.data(),
)
def test_pair_hashes_equal_the_whole_batch_s(keys: list[bytes], data: Any) -> None:
    """A few positions are hashed alone, many through the batch's hashes: the same."""
    enc = pa.array(keys, pa.binary())
    whole = KeyProbe(enc).hashes()
    pos_st = st.lists(st.integers(0, len(keys) - 1), max_size=2 * len(keys))
    pos = np.array(data.draw(pos_st), dtype=np.int64)
    hashed = KeyProbe(enc)
    hashed.hashes()  # this one answers from the batch's hashes
    for probe in (KeyProbe(enc), hashed):
        h1, h2, key = probe.pair_hashes(pos)
        if key is not None:
            h1, h2 = h1[key], h2[key]
        assert np.array_equal(h1, whole[0][pos]) and np.array_equal(h2, whole[1][pos])


@settings(max_examples=40, deadline=None)
@given(
    sets=st.lists(
        st.tuples(
            st.lists(st.binary(max_size=6), max_size=200),
            st.sampled_from([0.5, 0.01, 0.001]),
            st.sampled_from([BLOOM_WORD, BLOOM_CLASSIC]),
        ),
        min_size=1,
        max_size=5,
    ),
    others=st.lists(st.binary(max_size=6), min_size=1, max_size=400),
    data=st.data(),
)
def test_packed_bloom_filters_answer_like_each_filter(
    sets: list[tuple[list[bytes], float, int]], others: list[bytes], data: Any
) -> None:
    """Filters of different sizes, probe counts and layouts, packed side by side: every
    (key, filter) pair gets the answer of that filter alone, with hashes per pair or
    per key."""
    filters = [BloomFilter.build(pa.array(m, pa.binary()), fp, v) for m, fp, v in sets]
    packed = BloomFilterSet(filters)
    keys = [k for m, _, _ in sets for k in m] + others
    n = len(keys)
    which_st = st.lists(st.integers(0, len(filters) - 1), min_size=n, max_size=n)
    which = np.array(data.draw(which_st), dtype=np.int64)
    h1, h2 = murmur3_x64_128(pa.array(keys, pa.binary()), BLOOM_SEED)
    got = packed.may_contain_hashes(which, h1, h2)
    key = np.array(data.draw(st.permutations(range(n))), dtype=np.int64)
    by_key = packed.may_contain_hashes(which[key], h1, h2, key)
    assert by_key.tolist() == got[key].tolist()
    want = [
        bool(filters[w].may_contain(pa.array([k], pa.binary()))[0])
        for k, w in zip(keys, which.tolist(), strict=True)
    ]
    assert got.tolist() == want


def _pairs(n_filters: int, keys: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (key, filter) pair: filter index and the key's two hashes."""
    which = np.repeat(np.arange(n_filters, dtype=np.int64), len(keys))
    h1, h2 = murmur3_x64_128(pa.array(keys * n_filters, pa.binary()), BLOOM_SEED)
    return which, h1, h2


def _each_alone(filters: list[BloomFilter], keys: list[bytes]) -> list[bool]:
    return np.concatenate([f.may_contain(pa.array(keys, pa.binary())) for f in filters]).tolist()


@settings(max_examples=30, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.lists(st.binary(max_size=5), max_size=150),  # members of a new filter
            st.sets(st.integers(0, 30)),  # filters dropped (indices into those alive)
            st.sampled_from([BLOOM_WORD, BLOOM_CLASSIC]),  # the new filter's layout
        ),
        min_size=1,
        max_size=12,
    ),
    probes=st.lists(st.binary(max_size=5), min_size=1, max_size=60),
)
def test_bloom_arena_sets_answer_like_each_filter_while_filters_come_and_go(
    steps: list[tuple[list[bytes], set[int], int]], probes: list[bytes]
) -> None:
    """Like a tablet's rowsets: each step adds a filter, drops some (their objects
    die), and packs the live ones through the arena. Every set, including sets built
    before the arena moved to a new buffer, keeps answering like its filters alone."""
    arena = BloomArena(min_bytes=64)  # moves to a new buffer every few steps
    alive: list[BloomFilter] = []
    kept: list[tuple[BloomFilterSet, int, list[bool]]] = []  # set, filters, answers
    for members, drop, version in steps:
        alive.append(BloomFilter.build(pa.array(members, pa.binary()), 0.01, version))
        alive = [f for i, f in enumerate(alive) if i not in drop or i == len(alive) - 1]
        packed = BloomFilterSet(list(alive), arena)
        want = _each_alone(alive, probes)
        assert packed.may_contain_hashes(*_pairs(len(alive), probes)).tolist() == want
        kept.append((packed, len(alive), want))  # the dropped filters' objects die
    for packed, n, want in kept:
        assert packed.may_contain_hashes(*_pairs(n, probes)).tolist() == want


def test_bloom_arena_copies_only_new_filters_and_forgets_dead_ones() -> None:
    arena = BloomArena()
    fs = [BloomFilter.build(pa.array([bytes([i])] * 2000, pa.binary())) for i in range(8)]
    buf, at = arena.place(fs)
    again, at2 = arena.place(fs[2:5])
    assert again is buf and at2.tolist() == at[2:5].tolist()  # nothing copied
    used = arena._used
    big = arena.nbytes
    del fs[:6]  # six filters die
    while arena.nbytes == big:  # the next move keeps only the live filters
        fs.append(BloomFilter.build(pa.array([b"x"] * 2000, pa.binary())))
        arena.place(fs[-1:])
    assert arena._used < used + sum(len(f._bytes) for f in fs)
    assert len(arena._where) == len(fs)


def test_packed_bloom_filters_need_one_seed() -> None:
    a = BloomFilter.build(pa.array([b"a"], pa.binary()))
    b = BloomFilter(bytes(a.num_bits // 8), a.num_bits, a.num_hashes, seed=5, version=a.version)
    with pytest.raises(ProgrammingError, match="one seed"):
        BloomFilterSet([a, b])


def test_bloom_rejects_hashes_of_another_seed() -> None:
    bf = BloomFilter.build(pa.array([b"a"], pa.binary()))
    h1, h2 = murmur3_x64_128(pa.array([b"a"], pa.binary()), 7)
    with pytest.raises(ProgrammingError, match="seed"):
        bf.may_contain_hashes(h1, h2, 7)


def _schema(key_type: str) -> Schema:
    return Schema.build(
        [
            ColumnSchema("k", DataType.parse(key_type), nullable=False),
            ColumnSchema("v", DataType.parse("INT64")),
        ],
        ["k"],
    )


def _key_array(keys: np.ndarray, key_type: str) -> pa.Array[Any]:
    if key_type == "STRING":  # variable width: the sorted-list probe
        return pa.array([f"k{int(x)}" for x in keys], pa.string())
    return pa.array(keys, pa.int64())


def _rows(keys: np.ndarray, key_type: str) -> pa.Table:
    return pa.table({"k": _key_array(keys, key_type), "v": keys * 2})


@pytest.mark.parametrize(
    ("key_type", "max_pairs", "layout"),
    [
        ("INT64", 1 << 21, "overlapping"),
        ("INT64", 1 << 21, "sequential"),
        ("INT64", 1 << 21, "one-overlap"),
        ("INT64", 100, "overlapping"),
        ("STRING", 1 << 21, "overlapping"),
    ],
    ids=[
        "fixed-width-packed",
        "fixed-width-packed-no-overlap",
        "fixed-width-packed-one-overlap",
        "fixed-width-rowset-by-rowset",
        "variable-width",
    ],
)
def test_large_batch_locates_like_small_batches(
    tmp_path: Any, key_type: str, max_pairs: int, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(A batch of fixed-width keys over ``_MAX_PAIRS`` pairs goes rowset by rowset.
    Keys with one candidate rowset are searched without the bloom filters, unless an
    INSERT brings them: with one overlap, only the pairs of the keys it covers are
    probed. The key arena is tiny, so
    it moves to new buffers while the rowsets come.)"""
    monkeypatch.setattr(disk_key_index, "_MAX_PAIRS", max_pairs)
    probed: list[int] = []
    real_probe = BloomFilterSet.may_contain_hashes

    def counted(
        self: BloomFilterSet,
        which: np.ndarray,
        h1: np.ndarray,
        h2: np.ndarray,
        key: np.ndarray | None = None,
    ) -> Any:
        probed.append(len(which))
        return real_probe(self, which, h1, h2, key)

    monkeypatch.setattr(BloomFilterSet, "may_contain_hashes", counted)
    monkeypatch.setattr(disk_key_index, "KEY_ARENA", disk_key_index.KeyArena(min_items=64))
    rng = np.random.default_rng(11)
    opts = TabletOptions(sync=False, bulk_load_rows=1_000_000)
    schema = _schema(key_type)
    t = Tablet.create(str(tmp_path / "t"), schema, opts)
    try:
        written: list[np.ndarray] = []
        for i in range(6):  # six DiskRowSets: random keys over one range, or in turn
            if layout == "one-overlap" and i == 5:  # across the second and third
                keys = np.unique(rng.integers(12_000, 20_000, 3_000))
            elif layout in ("sequential", "one-overlap"):
                keys = np.unique(rng.integers(i * 8_400, (i + 1) * 8_400, 3_000))
            else:
                keys = np.unique(rng.integers(0, 50_000, 3_000))
            if written:
                keys = np.setdiff1d(keys, np.concatenate(written))
            t.insert(_rows(keys, key_type))
            written.append(keys)
            if i in (2, 4) and layout == "overlapping":  # ghosts: delete, re-insert some
                gone = rng.choice(np.concatenate(written), 400, replace=False)
                t.delete(pa.table({"k": _key_array(gone, key_type)}))
                t.insert(_rows(gone[:150], key_type))
            t.flush()
            if i == 4:  # an index from before the last rowset, kept through arena moves
                old = t._rowsets
                old_keys = _key_array(np.arange(0, 50_000, 3), key_type)
                old_probe = KeyProbe(encode_keys([old_keys], [schema.key_columns[0].type]))
                old_found = old.disk_keys.find(old_probe, np.ones(len(old_probe.keys), bool))
        t.insert(_rows(np.arange(50_000, 50_300), key_type))  # MemRowSet rows
        rs = t._rowsets
        assert len(rs.drs) >= 6
        probe_keys = rng.permutation(np.arange(-100, 50_400, 7))  # present, ghost, absent
        enc = encode_keys([_key_array(probe_keys, key_type)], [schema.key_columns[0].type])
        assert len(enc) > write_path._SMALL_PROBE
        probed.clear()
        packed = rs.disk_keys.find(KeyProbe(enc), np.ones(len(enc), dtype=bool))
        assert (packed is not None) == (key_type == "INT64" and max_pairs > 100)
        if layout == "sequential":
            assert probed == []
        elif layout == "one-overlap":  # the keys in 12,000-20,000, each with two rowsets
            in_overlap = int(np.count_nonzero((probe_keys >= 12_000) & (probe_keys <= 20_000)))
            assert probed and 0 < probed[0] <= 2 * in_overlap
        big = write_path.locate(rs, enc)
        # Keys an INSERT brings are probed against the filters even with one candidate
        # rowset (then they are usually in none: the probe saves the key search); the
        # answers stay the same.
        absent = rng.random(len(enc)) < 0.5
        probed.clear()
        inserting = write_path.locate(rs, enc, absent)
        names = ("kind", "rowset", "row", "slot", "exists")
        for name, a, b in zip(names, inserting, big, strict=True):
            assert np.array_equal(a, b), name
        if packed is not None:
            bounds = [(d.meta.min_key, d.meta.max_key) for d in rs.drs if d.num_rows]
            pairs = 0
            in_mrs = big[0] == write_path.K_MRS
            for k, new, found in zip(enc.to_pylist(), absent, in_mrs, strict=True):
                cands = sum(lo <= k <= hi for lo, hi in bounds)
                if not found and (new or cands > 1):
                    pairs += cands
            assert sum(probed) == pairs > 0
        parts = [
            write_path.locate(rs, enc.slice(s, write_path._SMALL_PROBE))
            for s in range(0, len(enc), write_path._SMALL_PROBE)
        ]
        small = [np.concatenate([p[i] for p in parts]) for i in range(5)]
        for name, a, b in zip(("kind", "rowset", "row", "slot", "exists"), big, small, strict=True):
            assert np.array_equal(a, b), name
        live = set(t.scan(["k"]).read_all()["k"].to_pylist())
        want = _key_array(probe_keys, key_type).to_pylist()
        assert big[4].tolist() == [k in live for k in want]
        if key_type == "INT64" and max_pairs > 100:  # the keys went through the arena
            assert disk_key_index.KEY_ARENA.nbytes > 0
        again = old.disk_keys.find(old_probe, np.ones(len(old_probe.keys), bool))
        assert (again is None) == (old_found is None)
        if again is not None and old_found is not None:
            for a, b in zip(again, old_found, strict=True):
                assert np.array_equal(a, b)
    finally:
        t.close()


def test_the_write_path_asks_bloom_probes_for_the_keys_its_inserts_bring(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``decide`` tells ``locate`` which keys of a batch an INSERT (or INSERT IGNORE)
    brings, in the batch's own order, for the first occurrence of each key: the keys
    whose pairs are probed against the bloom filters with a single candidate rowset.
    A mixed batch (new and present keys inserted, keys updated, deleted, upserted, a
    key repeated) still gets Kudu's answers."""
    seen: list[tuple[list[bytes], np.ndarray | None]] = []
    real_find = disk_key_index.DiskKeyIndex.find

    def spied(
        self: disk_key_index.DiskKeyIndex,
        probe: KeyProbe,
        wanted: np.ndarray,
        absent: np.ndarray | None = None,
    ) -> Any:
        seen.append((probe.keys.to_pylist(), None if absent is None else absent.copy()))
        return real_find(self, probe, wanted, absent)

    monkeypatch.setattr(disk_key_index.DiskKeyIndex, "find", spied)
    t = Tablet.create(str(tmp_path / "t"), _schema("INT64"), TabletOptions(sync=False))
    try:
        for lo in (0, 1_000, 2_000):  # three rowsets side by side: one candidate a key
            t.insert(_rows(np.arange(lo, lo + 1_000, 2), "INT64"))
            t.flush()
        rng = np.random.default_rng(4)
        keys = rng.permutation(np.arange(0, 3_000))[:400]
        codes = rng.choice([1, 2, 3, 5, 10], len(keys))  # INSERT UPDATE DELETE UPSERT IGNORE
        keys = np.concatenate([keys, keys[:20]])  # repeated: decided in a second round
        codes = np.concatenate([codes, np.full(20, 2)])
        seen.clear()
        res = t.write(
            pa.table({"k": keys, "v": keys * 7, "op": codes.astype(np.int8)}), op_column="op"
        )
        assert len(seen) == 1
        probed_keys, absent = seen[0]
        assert absent is not None
        first_op: dict[bytes, int] = {}
        enc = encode_keys([pa.array(keys, pa.int64())], [DataType.parse("INT64")])
        for k, c in zip(enc.to_pylist(), codes.tolist(), strict=True):
            first_op.setdefault(k, c)
        assert absent.tolist() == [first_op[k] in (1, 10) for k in probed_keys]
        # Kudu's answers: an INSERT of a present key fails, of a new key adds it.
        present = set(range(0, 3_000, 2))
        refused = {int(keys[e.index]) for e in res.errors if e.status == "AlreadyPresent"}
        first = {int(k): int(c) for k, c in zip(keys[::-1], codes[::-1], strict=True)}
        inserted = [k for k, c in first.items() if c == 1]
        assert any(k in present for k in inserted) and any(k not in present for k in inserted)
        for k in inserted:
            assert (k in refused) == (k in present), k
        live = set(t.scan(["k"]).read_all()["k"].to_pylist())
        assert all(k in live for k in inserted)
    finally:
        t.close()


@settings(max_examples=80, deadline=None)
@given(n=st.integers(0, 120), data=st.data())
def test_deltas_take_returns_the_events_asked_for(n: int, data: Any) -> None:
    """``Deltas.take`` of any positions, few of many (each column's positions searched)
    or many (a map over every event), gives those events in the order asked, each with
    exactly the column values it set."""
    sets = {cid: data.draw(st.lists(st.booleans(), min_size=n, max_size=n)) for cid in (1, 2)}
    d = _batch(n, 0, sets) if n else Deltas()
    idx = np.array(
        data.draw(st.lists(st.integers(0, max(0, n - 1)), unique=True, max_size=n if n else 0)),
        dtype=np.int64,
    )
    got = d.take(idx)
    assert got.rowid.tolist() == d.rowid[idx].tolist()
    assert got.seq.tolist() == d.seq[idx].tolist()
    for cid, m in sets.items():
        want = [(j, int(i) * 10 + cid) for j, i in enumerate(idx.tolist()) if m[i]]
        cd = got.cols.get(cid)
        have = [] if cd is None else list(zip(cd.pos.tolist(), cd.values.to_pylist(), strict=True))
        assert have == want


@given(
    n=st.integers(0, 30),
    cuts=st.lists(st.integers(0, 30), max_size=4),
    data=st.data(),
)
def test_deltas_slices_concatenate_to_the_whole(n: int, cuts: list[int], data: Any) -> None:
    """``Deltas.split`` (how one batch's events are cut per target store) and ``slice``
    lose and move nothing: the pieces of a run, concatenated, are the run, and each
    piece of ``split`` is the ``slice`` of its bounds."""
    sets = {cid: data.draw(st.lists(st.booleans(), min_size=n, max_size=n)) for cid in (1, 2)}
    cols = {
        cid: ColumnDelta(np.flatnonzero(m), pa.array(np.flatnonzero(m) * 10 + cid))
        for cid, m in sets.items()
        if any(m)
    }
    d = Deltas(
        np.arange(n, dtype=np.int64) * 3,
        np.arange(n, dtype=np.uint64) + 100,
        np.arange(n, dtype=np.int64),
        np.full(n, MutationType.UPDATE, dtype=np.uint8),
        cols,
    )
    bounds = sorted({0, n, *(c for c in cuts if c <= n)})
    parts = [d.slice(a, b) for a, b in itertools.pairwise(bounds)]
    inner = [b for b in bounds if 0 < b < n]
    if n:
        pieces = d.split(inner)
        assert len(pieces) == len(parts)
        for piece, part in zip(pieces, parts, strict=True):
            assert piece.rowid.tolist() == part.rowid.tolist()
            assert sorted(piece.cols) == sorted(part.cols)
            for cid, cd in part.cols.items():
                assert piece.cols[cid].pos.tolist() == cd.pos.tolist()
                assert piece.cols[cid].values.to_pylist() == cd.values.to_pylist()
    whole = concat_deltas(parts)
    assert whole.rowid.tolist() == d.rowid.tolist() and whole.seq.tolist() == d.seq.tolist()
    assert sorted(whole.cols) == sorted(d.cols)
    for cid, cd in d.cols.items():
        assert whole.cols[cid].pos.tolist() == cd.pos.tolist()
        assert whole.cols[cid].values.to_pylist() == cd.values.to_pylist()


def _batch(n: int, base: int, sets: dict[int, list[bool]]) -> Deltas:
    """A write batch's ``Deltas`` of ``n`` events with sequence numbers from ``base``."""
    cols = {
        cid: ColumnDelta(np.flatnonzero(m), pa.array(np.flatnonzero(m) * 10 + cid + base))
        for cid, m in sets.items()
        if any(m)
    }
    return Deltas(
        np.arange(n, dtype=np.int64) * 3 + base,
        np.arange(n, dtype=np.uint64) + base,
        np.arange(n, dtype=np.int64) + base,
        np.full(n, MutationType.UPDATE, dtype=np.uint8),
        cols,
    )


def _as_lists(d: Deltas) -> tuple[Any, ...]:
    return (
        d.rowid.tolist(),
        d.ts.tolist(),
        d.seq.tolist(),
        d.op.tolist(),
        {cid: (cd.pos.tolist(), cd.values.to_pylist()) for cid, cd in d.cols.items()},
    )


@settings(max_examples=80, deadline=None)
@given(
    batches=st.lists(
        st.tuples(st.integers(0, 12), st.lists(st.integers(0, 12), max_size=3)), max_size=5
    ),
    stores=st.integers(1, 4),
    data=st.data(),
)
def test_deltamemstore_runs_read_like_their_slices(
    batches: list[tuple[int, list[int]]], stores: int, data: Any
) -> None:
    """Runs handed to DeltaMemStores uncut (``append_run``, the write path), mixed with
    whole appends, read back (``deltas``, and ``deltas_of`` for many stores at once, as
    a delta flush reads them) exactly as the slices appended one by one would; and once
    read, a store keeps its merged form, to which later runs still add."""
    dms = [DeltaMemStore(i) for i in range(stores)]
    expect: list[list[Deltas]] = [[] for _ in dms]
    base = 0
    for n, cuts in batches:
        sets = {cid: data.draw(st.lists(st.booleans(), min_size=n, max_size=n)) for cid in (1, 2)}
        b = _batch(n, base, sets)
        base += 100
        bounds = sorted({0, n, *(c for c in cuts if c <= n)})
        runs = list(itertools.pairwise(bounds))
        targets = [data.draw(st.integers(0, stores - 1)) for _ in runs]
        if data.draw(st.booleans()):  # the whole batch in one call, as the write path does
            sizes = [8 * (stop - start) for start, stop in runs]
            starts, stops = [r[0] for r in runs], [r[1] for r in runs]
            append_runs([dms[i] for i in targets], b, starts, stops, sizes)
        else:
            for (start, stop), i in zip(runs, targets, strict=True):
                if data.draw(st.booleans()):
                    dms[i].append_run(b, start, stop, 8 * (stop - start))
                else:
                    dms[i].append(b.slice(start, stop))
        for (start, stop), i in zip(runs, targets, strict=True):
            expect[i].append(b.slice(start, stop))
        if data.draw(st.booleans()):  # a scan reads one store between batches
            i = data.draw(st.integers(0, stores - 1))
            assert _as_lists(dms[i].deltas()) == _as_lists(concat_deltas(expect[i]))
    for store, want in zip(dms, expect, strict=True):
        assert len(store) == sum(len(w) for w in want)
        firsts = [w for w in want if len(w)]
        assert store.min_seq == (int(firsts[0].seq[0]) if firsts else None)
        assert store.min_ts == (int(firsts[0].ts[0]) if firsts else None)
    # one store alone (a delta flush of the due stores): its share of the batches is
    # small, so its runs are gathered batch by batch instead of from their concatenation
    k = data.draw(st.integers(0, stores - 1))
    (one,) = deltas_of([dms[k]])
    assert _as_lists(one) == _as_lists(concat_deltas(expect[k]))
    got = deltas_of(dms)
    for g, store, want in zip(got, dms, expect, strict=True):
        assert _as_lists(g) == _as_lists(concat_deltas(want))
        assert _as_lists(store.deltas()) == _as_lists(g)  # kept, not cut again
    extra = _batch(3, 10_000, {1: [True, False, True]})
    dms[0].append_run(extra, 1, 3, 16)
    assert _as_lists(dms[0].deltas()) == _as_lists(concat_deltas([*expect[0], extra.slice(1, 3)]))


@settings(max_examples=80, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["pending", "direct", "run", "read", "count", "of"]),
            st.integers(0, 12),
            st.lists(st.integers(0, 12), max_size=3),
        ),
        max_size=12,
    ),
    stores=st.integers(1, 4),
    data=st.data(),
)
def test_pending_runs_read_like_runs_appended_at_once(
    steps: list[tuple[str, int, list[int]]], stores: int, data: Any
) -> None:
    """Batches handed to a tablet's ``PendingRuns`` (the write path), mixed with
    appends made directly to one store (a batch that deletes rows) and with reads of
    any kind in between, read back exactly as if every run had been appended to its
    store at once, in the same order; the bytes charged are the stores' settled bytes
    plus the pending bytes, with nothing counted twice or lost."""
    pending = PendingRuns()
    dms = [DeltaMemStore(i, pending) for i in range(stores)]
    expect: list[list[Deltas]] = [[] for _ in dms]
    charged = 0
    base = 0
    for kind, n, cuts in steps:
        i = data.draw(st.integers(0, stores - 1))
        if kind in ("read", "count", "of"):
            if kind == "read":
                assert _as_lists(dms[i].deltas()) == _as_lists(concat_deltas(expect[i]))
            elif kind == "count":
                assert len(dms[i]) == sum(len(w) for w in expect[i])
            else:
                got = deltas_of(dms)
                for g, want in zip(got, expect, strict=True):
                    assert _as_lists(g) == _as_lists(concat_deltas(want))
            assert pending.bytes == 0  # every read took the pending runs in
            continue
        b = _batch(n, base, {1: [j % 2 == 0 for j in range(n)], 2: [j % 3 == 0 for j in range(n)]})
        base += 100
        if kind == "direct":
            dms[i].append(b, 8 * n)
            expect[i].append(b)
            charged += 8 * n if n else 0
            continue
        if kind == "run":
            start = min(cuts, default=0)
            dms[i].append_run(b, start, n, 8 * (n - start) if n > start else 0)
            if n > start:
                expect[i].append(b.slice(start, n))
                charged += 8 * (n - start)
            continue
        bounds = sorted({0, n, *(c for c in cuts if c <= n)})
        runs = list(itertools.pairwise(bounds))
        targets = data.draw(st.permutations(range(stores)))[: len(runs)]
        runs = runs[: len(targets)]  # a batch gives each store at most one run
        if not runs:
            continue
        sizes = np.array([8 * (stop - start) for start, stop in runs], dtype=np.int64)
        pending.add(
            [dms[t] for t in targets],
            b,
            np.array([r[0] for r in runs], dtype=np.int64),
            np.array([r[1] for r in runs], dtype=np.int64),
            sizes,
        )
        charged += int(sizes.sum())
        for (start, stop), t in zip(runs, targets, strict=True):
            expect[t].append(b.slice(start, stop))
    assert sum(d.settled_bytes for d in dms) + pending.bytes == charged
    for store, want in zip(dms, expect, strict=True):
        firsts = [w for w in want if len(w)]
        assert store.min_seq == (int(firsts[0].seq[0]) if firsts else None)
        assert store.min_ts == (int(firsts[0].ts[0]) if firsts else None)
        assert store.bytes == sum(8 * len(w) for w in want)
        assert _as_lists(store.deltas()) == _as_lists(concat_deltas(want))
    assert pending.bytes == 0


def test_pending_runs_settle_by_themselves_past_a_backlog_and_one_by_one_without_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tablet nobody reads settles its pending runs every ``MAX_PENDING_BATCHES``
    batches; and when gathering many batches at once runs out of memory, they are
    handed over one by one instead, each exactly once."""
    pending = PendingRuns()
    dms = [DeltaMemStore(i, pending) for i in range(3)]

    def add(j: int) -> None:
        pending.add(
            dms,
            _batch(6, 100 * j, {1: [True] * 6}),
            np.array([0, 2, 4], dtype=np.int64),
            np.array([2, 4, 6], dtype=np.int64),
            np.array([16, 16, 16], dtype=np.int64),
        )

    for j in range(dms_mod.MAX_PENDING_BATCHES):
        add(j)
    assert not pending._entries and pending.bytes == 0
    assert [d.settled_bytes for d in dms] == [16 * dms_mod.MAX_PENDING_BATCHES] * 3

    def no_memory(*_: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(dms_mod, "_gather", no_memory)
    for j in range(64, 70):
        add(j)
    assert [len(d) for d in dms] == [140, 140, 140]
    for k, d in enumerate(dms):
        assert d.deltas().seq.tolist() == [100 * j + 2 * k + i for j in range(70) for i in (0, 1)]
    assert pending.bytes == 0 and [d.bytes for d in dms] == [16 * 70] * 3


def test_a_reader_never_misses_a_pending_batch_added_before_it() -> None:
    """A reader on another thread, racing the writer's ``add``s and other readers'
    settles, sees every batch added before its read began, in order, and no gap."""
    pending = PendingRuns()
    dms = [DeltaMemStore(i, pending) for i in range(3)]
    added = [0]  # batches added so far (written after each add)
    errors: list[str] = []
    stop = threading.Event()

    def reader(k: int) -> None:
        while not stop.is_set():
            before = added[0]
            seq = dms[k].deltas().seq.tolist()
            batches = [s // 100 for s in seq[::2]]  # each batch gives each store 2 events
            if batches != list(range(len(batches))) or len(batches) < before:
                errors.append(f"store {k}: {len(batches)} batches seen, {before} added")
                return

    threads = [threading.Thread(target=reader, args=(k,)) for k in (0, 1, 2, 0)]
    for t in threads:
        t.start()
    try:
        for j in range(400):
            b = _batch(6, 100 * j, {1: [True] * 6})
            pending.add(
                dms,
                b,
                np.array([0, 2, 4], dtype=np.int64),
                np.array([2, 4, 6], dtype=np.int64),
                np.array([16, 16, 16], dtype=np.int64),
            )
            added[0] = j + 1
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[:3]
    assert [len(d) for d in dms] == [800, 800, 800]


def test_deltas_of_a_few_stores_gathers_their_runs_batch_by_batch() -> None:
    """A delta flush of the due stores only reads a small share of the write batches
    their runs come from; those runs are gathered per batch and put back in store and
    apply order (a store read before holds one merged part, which counts as a batch)."""
    stores = [DeltaMemStore(i) for i in range(10)]
    expect: list[list[Deltas]] = [[] for _ in stores]
    for j in range(20):
        b = _batch(100, 1000 * j, {1: [i % 3 == 0 for i in range(100)], 2: [True] * 100})
        for i, st_ in enumerate(stores):
            start, stop = 10 * ((i + j) % 10), 10 * ((i + j) % 10) + 10
            st_.append_run(b, start, stop, 80)
            expect[i].append(b.slice(start, stop))
        if j == 9:
            stores[2].deltas()  # merged into one part
    picked = [7, 2]  # a fifth of the events: gathered per batch
    got = deltas_of([stores[i] for i in picked])
    for g, i in zip(got, picked, strict=True):
        assert _as_lists(g) == _as_lists(concat_deltas(expect[i]))


def test_a_settle_leaves_each_store_a_run_of_one_gathered_batch() -> None:
    """A settle gathers its batches' runs in store order once and gives every store a
    run of that gathered batch, not a ``Deltas`` of its own: at hundreds of stores and
    ten settles a second, a cut per store per settle and a delta flush concatenating
    them one by one were a third of the maintenance thread's hold on the GIL in the
    sustained benchmark. A flush of every store then gathers one batch per settle, and
    reads back each store's runs in apply order."""
    pending = PendingRuns()
    dms = [DeltaMemStore(i, pending) for i in range(40)]
    expect: list[list[Deltas]] = [[] for _ in dms]
    for settle in range(3):
        for j in range(8):
            base = 10_000 * settle + 1_000 * j
            b = _batch(200, base, {1: [i % 4 == 0 for i in range(200)]})
            targets = [(7 * j + k + settle) % len(dms) for k in range(40)]
            starts = np.arange(40, dtype=np.int64) * 5
            pending.add([dms[t] for t in targets], b, starts, starts + 5, np.full(40, 40))
            for t, start in zip(targets, starts.tolist(), strict=True):
                expect[t].append(b.slice(start, start + 5))
        pending.settle()
    parts = [p for d in dms for p in d._parts]
    assert all(isinstance(p, tuple) for p in parts)  # runs, not cut out
    assert len({id(p[0]) for p in parts}) == 3  # one gathered batch per settle
    assert all(len(d._parts) == 3 for d in dms)
    for got, want in zip(deltas_of(dms), expect, strict=True):
        assert _as_lists(got) == _as_lists(concat_deltas(want))


def test_a_delta_flush_ships_each_store_without_the_whole_batch() -> None:
    """A pickled Arrow slice carries its parent's whole buffer: the stores of one delta
    flush, cut from one batch, pickled for the compaction worker as they were, held the
    batch once per store (found by the sustained benchmark: 0.14 -> 1.2 s per flush of
    180 stores). ``ColumnDelta`` pickles its own values only."""
    n, stores = 20_000, 100
    batch = _batch(n, 0, {1: [True] * n})
    dms = [DeltaMemStore(i) for i in range(stores)]
    per = n // stores
    for i, store in enumerate(dms):
        store.append_run(batch, i * per, (i + 1) * per, 8 * per)
    cut = deltas_of(dms)
    whole = len(pickle.dumps(batch))
    shipped = pickle.dumps(cut)
    assert len(shipped) < 2 * whole
    for c, d in zip(cut, pickle.loads(shipped), strict=True):
        assert _as_lists(c) == _as_lists(d)
    values = batch.cols[1].values
    assert len(pickle.dumps(values.slice(0, per))) > 10 * per * 8  # what Arrow alone does


@settings(max_examples=60, deadline=None)
@given(
    segments=st.lists(st.lists(st.integers(0, 60), max_size=40), min_size=1, max_size=6),
    data=st.data(),
)
def test_search_segments_equals_a_search_per_segment(segments: list[list[int]], data: Any) -> None:
    arrays = [np.unique(np.array(s, dtype=np.uint64)) for s in segments]
    buf = np.concatenate(arrays)
    lens = np.array([len(a) for a in arrays], dtype=np.int64)
    offs = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    which = np.array(
        data.draw(st.lists(st.integers(0, len(arrays) - 1), max_size=30)), dtype=np.int64
    )
    probes = np.array(
        data.draw(st.lists(st.integers(0, 61), min_size=len(which), max_size=len(which))),
        dtype=np.uint64,
    )
    got = key_array.search_segments(buf, offs[which], lens[which], probes)
    want = []
    for w, p in zip(which.tolist(), probes.tolist(), strict=True):
        hit = np.flatnonzero(arrays[w] == p)
        want.append(int(offs[w] + hit[0]) if len(hit) else -1)
    assert got.tolist() == want


@settings(max_examples=50, deadline=None)
@given(
    width=st.sampled_from([3, 4, 8]),
    raw=st.lists(st.binary(min_size=8, max_size=8), max_size=30),
)
def test_as_binary_gives_back_the_bytes_sortable_read(width: int, raw: list[bytes]) -> None:
    keys = [r[:width] for r in raw]
    values = key_array.sortable(b"".join(keys), width, len(keys))
    got = key_array.as_binary(values, width)
    assert got.type == pa.binary()
    assert got.to_pylist() == keys


def test_arena_fetches_each_owner_once_and_keeps_placed_arrays_through_moves() -> None:
    class Owner:
        def __init__(self, n: int) -> None:
            self.values = np.arange(n, dtype=np.uint64) + np.uint64(1000 * n)

    fetched: list[int] = []

    def fetch(o: Owner) -> np.ndarray:
        fetched.append(id(o))
        return o.values

    arena: Arena[Owner] = Arena(np.uint64, fetch, min_items=8)
    owners = [Owner(n) for n in range(1, 30)]
    captured = []
    for i in range(len(owners)):  # every placement moves the tiny arena now and then
        buf, offs = arena.place(owners[: i + 1])
        captured.append((buf, offs, i + 1))
    assert sorted(fetched) == sorted(id(o) for o in owners)  # once each, moves or not
    for buf, offs, n in captured:  # old buffers still hold what they were given
        for o, off in zip(owners[:n], offs.tolist(), strict=True):
            assert buf[off : off + len(o.values)].tolist() == o.values.tolist()
    got = arena.array_of(owners[3])
    assert got is not None and got.tolist() == owners[3].values.tolist()
    assert arena.array_of(Owner(2)) is None


def test_key_arena_forgets_the_widths_of_dropped_key_files() -> None:
    """The width map shrinks with the arena: it grew by one entry per key file ever
    placed (a slow leak under a sustained load that flushes and compacts)."""

    class KeyFile:  # stands in for a CFileReader: the arena only holds it weakly
        pass

    arena = disk_key_index.KeyArena(min_items=8)
    files = [KeyFile() for _ in range(4)]
    arena.place_keys(
        files,  # type: ignore[arg-type]
        {id(f): (np.arange(4, dtype=np.uint64), 8) for f in files},
    )
    more = [KeyFile() for _ in range(4)]  # made first: no id of a dead file is reused
    del files[:3]  # three key files gone (their rowsets compacted away)
    moved_from = arena.nbytes
    arena.place_keys(
        more,  # type: ignore[arg-type]
        {id(f): (np.arange(8, dtype=np.uint64), 4) for f in more},
    )  # 32 more keys do not fit: the arena moves and drops the dead files
    assert arena.nbytes != moved_from
    assert set(arena._width) == set(arena._where) == {id(f) for f in (*files, *more)}
    assert arena.whole_of(more[0]) is not None  # type: ignore[arg-type]
    assert arena.whole_of(more[0])[1] == 4  # type: ignore[arg-type,index]


@settings(max_examples=120, deadline=None)
@given(
    rowids=st.lists(st.integers(0, 49), max_size=80),
    cuts=st.sets(st.integers(1, 49), max_size=5),
    data=st.data(),
)
def test_split_by_rowid_cuts_events_into_output_rowsets(
    rowids: list[int], cuts: set[int], data: Any
) -> None:
    """``split_by_rowid`` (how a merge's or flush's UNDO and REDO events reach the
    output rowsets it rolls to) gives each row range exactly its events, in their
    order, renumbered from the range's first row, with the column values they set."""
    from kudusql.storage.tablet.rowset_writer import split_by_rowid

    n = len(rowids)
    sets = {cid: data.draw(st.lists(st.booleans(), min_size=n, max_size=n)) for cid in (1, 2)}
    b = _batch(n, 0, sets)
    d = Deltas(np.array(rowids, dtype=np.int64), b.ts, b.seq, b.op, b.cols)
    starts = [0, *sorted(cuts)]
    parts = split_by_rowid(d, starts)
    assert len(parts) == len(starts)
    bounds = [*starts[1:], 50]
    for part, lo, hi in zip(parts, starts, bounds, strict=True):
        want = [i for i, r in enumerate(rowids) if lo <= r < hi]  # event order kept
        assert (part.rowid + lo).tolist() == [rowids[i] for i in want]
        assert part.seq.tolist() == want
        for cid, m in sets.items():
            expect = [(j, i * 10 + cid) for j, i in enumerate(want) if m[i]]
            cd = part.cols.get(cid)
            have = (
                [] if cd is None else list(zip(cd.pos.tolist(), cd.values.to_pylist(), strict=True))
            )
            assert have == expect
