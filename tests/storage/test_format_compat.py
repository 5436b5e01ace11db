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
from pathlib import Path

import pyarrow as pa
import pytest

from kudusql.common.options import TabletOptions
from kudusql.storage.cfile.bloom import BLOOM_CLASSIC, BLOOM_WORD
from kudusql.storage.tablet.tablet import Tablet

FIXTURE = Path(__file__).parent / "fixtures" / "tablet_bloom_v1"
OPTIONS = TabletOptions(history_max_age_s=10**9)

# What the fixture's writer did: three flushed rowsets (even keys below 2000, odd keys
# below 2000, 2000..2999; a = 3k, s = "v<k>"), then updates and deletes flushed as REDOs.
UPDATED = {10: -1, 11: -2, 2500: -3}
DELETED = {12, 13, 2501}


def _expected() -> dict[int, tuple[int, str]]:
    return {k: (UPDATED.get(k, 3 * k), f"v{k}") for k in range(3000) if k not in DELETED}


def _rows(t: Tablet) -> dict[int, tuple[int, str]]:
    got = t.scan(["k", "a", "s"], ordered=True).read_all().to_pydict()
    return {k: (a, s) for k, a, s in zip(got["k"], got["a"], got["s"], strict=True)}


def _versions(t: Tablet) -> list[int]:
    return [d.bloom().version for d in t._rowsets.drs]


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
def old_tablet(tmp_path: Path) -> Tablet:
    path = tmp_path / "t"
    shutil.copytree(FIXTURE, path)
    t = Tablet.open(str(path), OPTIONS)
    yield t
    t.close()


def test_a_tablet_with_classic_bloom_filters_reads_as_written(old_tablet: Tablet) -> None:
    assert _versions(old_tablet) == [BLOOM_CLASSIC] * 3  # the fixture is what it says
    assert _rows(old_tablet) == _expected()


def test_classic_filters_refuse_present_keys_and_admit_absent_ones(old_tablet: Tablet) -> None:
    t = old_tablet
    present = [0, 1, 1998, 1999, 2000, 2999, 10, 2500]  # in each rowset, updated ones too
    errors = _insert(t, present)
    assert len(errors) == len(present)
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
    t.compact()
    assert set(_versions(t)) == {BLOOM_WORD}
    assert _rows(t) == expected
