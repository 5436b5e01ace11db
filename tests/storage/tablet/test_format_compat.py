"""Tablets written by earlier versions of kudusql still open, read and take writes.

``fixtures/tablet_bloom_v1`` was written by the code of commit 04c064f, before bloom
filters moved to the word layout (BLOOM_FORMAT.md, version 2): its three DiskRowSets
hold classic (version 1) filters. It was made by a script kept in the fixture's
README; what it holds follows from the keys below, so no expected rows are stored.

The writes below go through the filters: an INSERT of a key the tablet holds must be
refused (a false negative in a classic filter read by the new code would let it in),
and once a flush adds a word-layout rowset, both layouts are probed in one set.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from kudusql.common.keys import encode_keys
from kudusql.common.murmur import murmur3_x64_128
from kudusql.common.options import TabletOptions
from kudusql.storage.cfile.bloom import BLOOM_CLASSIC, BLOOM_WORD, BloomFilter, BloomFilterSet
from kudusql.storage.tablet.tablet import Tablet

FIXTURE = Path(__file__).parent / "fixtures" / "tablet_bloom_v1"
OPTIONS = TabletOptions(history_max_age_s=10**9)

# What the fixture's writer did: three flushed rowsets (even keys below 2000, odd keys
# below 2000, 2000..2999; a = 3k, s = "v<k>"), then updates and deletes flushed as REDOs.
UPDATED = {10: -1, 11: -2, 2500: -3}
DELETED = {12, 13, 2501}
ROWSET_KEYS = [range(0, 2000, 2), range(1, 2000, 2), range(2000, 3000)]  # deleted ones too


def _expected() -> dict[int, tuple[int, str]]:
    return {k: (UPDATED.get(k, 3 * k), f"v{k}") for k in range(3000) if k not in DELETED}


def _rows(t: Tablet) -> dict[int, tuple[int, str]]:
    got = t.scan(["k", "a", "s"], ordered=True).read_all().to_pydict()
    return {k: (a, s) for k, a, s in zip(got["k"], got["a"], got["s"], strict=True)}


def _versions(t: Tablet) -> list[int]:
    return [d.bloom().version for d in t._rowsets.drs]


def _encoded(t: Tablet, keys: list[int] | range) -> pa.BinaryArray:
    return encode_keys([pa.array(list(keys), pa.int64())], [t.schema.key_columns[0].type])


def _insert(t: Tablet, keys: list[int]) -> list[str]:
    table = pa.table(
        {
            "k": pa.array(keys, pa.int64()),
            "a": pa.array([7] * len(keys), pa.int64()),
            "s": pa.array(["new"] * len(keys)),
        }
    )
    return [str(e) for e in t.insert(table).errors]


@pytest.fixture
def old_tablet(tmp_path: Path) -> Iterator[Tablet]:
    path = tmp_path / "t"
    shutil.copytree(FIXTURE, path)
    t = Tablet.open(str(path), OPTIONS)
    yield t
    t.close()


def test_a_tablet_with_classic_bloom_filters_reads_as_written(old_tablet: Tablet) -> None:
    assert _versions(old_tablet) == [BLOOM_CLASSIC] * 3  # the fixture is what it says
    assert _rows(old_tablet) == _expected()


def test_classic_filters_read_from_disk_answer_as_built(old_tablet: Tablet) -> None:
    """Each rowset's filter, as the old code wrote it: every key it holds is found
    (no false negatives), and absent keys mostly are not (a filter misread as "maybe"
    for every key, which the write path would survive, fails here). Packed in one set
    with a word filter, each pair gets its own filter's answer."""
    t = old_tablet
    drs = t._rowsets.drs
    absent = _encoded(t, range(10_000, 30_000))
    for d, keys in zip(drs, ROWSET_KEYS, strict=True):
        bloom = d.bloom()
        assert bloom.may_contain(_encoded(t, keys)).all()
        assert bloom.may_contain(absent).mean() < 0.02
    word = BloomFilter.build(_encoded(t, range(500, 3500, 3)), 0.01)
    filters = [d.bloom() for d in drs] + [word]
    probes = pa.concat_arrays([_encoded(t, range(0, 3500)), absent])
    h1, h2 = murmur3_x64_128(probes, 0)
    rng = np.random.default_rng(1)
    which = rng.integers(0, len(filters), len(probes))
    got = BloomFilterSet(filters).may_contain_hashes(which, h1, h2)
    want = np.zeros(len(probes), dtype=bool)
    for i, f in enumerate(filters):
        at = np.flatnonzero(which == i)
        want[at] = f.may_contain(probes.take(pa.array(at)))
    assert got.tolist() == want.tolist()


def test_classic_filters_refuse_present_keys_and_admit_absent_ones(old_tablet: Tablet) -> None:
    t = old_tablet
    # Keys in the overlap of the first two rowsets are the ones the write path probes
    # the filters for (a key with one candidate rowset goes straight to its key search).
    present = [0, 1, 1998, 1999, 2000, 2999, 10, 2500]
    errors = _insert(t, present)
    assert len(errors) == len(present)
    assert all("already present" in e for e in errors)
    # deleted keys and keys beyond every rowset go in
    assert _insert(t, [12, 13, 2501, 5000, -1]) == []
    expected = _expected() | {k: (7, "new") for k in (12, 13, 2501, 5000, -1)}
    assert _rows(t) == expected


def test_classic_and_word_filters_probed_in_one_set_then_merged(old_tablet: Tablet) -> None:
    t = old_tablet
    # a flush adds a rowset with a word-layout filter whose key range covers the
    # classic ones: deleted keys inserted again, and keys past the old ones
    fresh = [-5, 12, 2501, *range(3000, 3500)]
    assert _insert(t, fresh) == []
    t.flush()
    assert sorted(_versions(t)) == [BLOOM_CLASSIC] * 3 + [BLOOM_WORD]
    # present keys are refused whichever layout holds them: 0 and 2000 are candidates
    # in a classic rowset and the word one, 3000 and 12 only in the word one
    assert len(_insert(t, [0, 1, 2000, 2998, 3000, 3499, 12, -5])) == 8
    expected = _expected() | {k: (7, "new") for k in fresh}
    assert _rows(t) == expected
    # updates find their rows through both layouts
    upd = pa.table({"k": pa.array([4, 3001], pa.int64()), "a": pa.array([40, 41], pa.int64())})
    assert not t.update(upd).errors
    expected[4], expected[3001] = (40, "v4"), (41, "new")
    # merging rewrites every rowset with word-layout filters; the rows stay
    t.compact([d.id for d in t._rowsets.drs])
    assert set(_versions(t)) == {BLOOM_WORD}
    assert _rows(t) == expected
