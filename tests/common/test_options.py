"""TabletOptions are checked when they are made: a wrong type or an out-of-range value is
a ProgrammingError naming the option and what it accepts, never a failure later (or a
raw Python exception from deep inside a flush)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kudusql.common.errors import ProgrammingError
from kudusql.common.options import TabletOptions

BAD: list[tuple[str, Any]] = [
    ("threads", -1),
    ("threads", 0),
    ("threads", "2"),
    ("threads", True),
    ("threads", 2.0),
    ("threads", 10**6),
    ("flush_threshold_bytes", "x"),
    ("flush_threshold_bytes", 0),
    ("flush_threshold_s", -1.0),
    ("flush_threshold_s", math.nan),
    ("compaction_budget_mb", 0),
    ("compaction_small_rowset_merge_inputs", 1),
    ("minor_compaction_max_files", 0),
    ("minor_compaction_min_files", 0),
    ("major_compaction_min_ratio", -0.5),
    ("rowset_target_bytes", 0),
    ("rows_per_page", 0),
    ("rows_per_page", None),
    ("block_cache_bytes", -5),
    ("history_max_age_s", math.nan),
    ("deleted_row_gc_min_fraction", 0),
    ("deleted_row_gc_min_fraction", 1.5),
    ("history_max_age_s", math.inf),
    ("history_max_age_s", "1h"),
    ("sync", "x"),
    ("sync", 1),
    ("bloom_fp_rate", 0.0),
    ("bloom_fp_rate", 1.0),
    ("bloom_fp_rate", 2),
    ("scan_batch_rows", 0),
    ("bulk_load_rows", 0),
    ("wal_fsync", "sometimes"),
    ("wal_fsync", 1),
    ("wal_segment_bytes", 10),
    ("wal_replay_max_segments", -1),
    ("file_grace_s", -1),
    ("file_grace_s", math.nan),
]


@pytest.mark.parametrize(("name", "value"), BAD)
def test_bad_values_are_refused_naming_the_option(name: str, value: Any) -> None:
    with pytest.raises(ProgrammingError) as e:
        TabletOptions(**{name: value})
    assert repr(name) in str(e.value) or name in str(e.value)
    assert "must be" in str(e.value)
    with pytest.raises(ProgrammingError):
        TabletOptions().with_(**{name: value})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("threads", 1),
        ("threads", 64),
        ("flush_threshold_s", 0),
        ("history_max_age_s", 0.05),
        ("history_max_age_s", -1),  # keep all history
        ("file_grace_s", 0),
        ("block_cache_bytes", 0),
        ("wal_fsync", "BATCH"),
        ("wal_fsync", " always "),
        ("wal_replay_max_segments", 0),
        ("bloom_fp_rate", 0.001),
        ("major_compaction_min_ratio", 1),
        ("deleted_row_gc_min_fraction", 1),
    ],
)
def test_good_values_are_kept(name: str, value: Any) -> None:
    assert getattr(TabletOptions(**{name: value}), name) == value


def test_unknown_option() -> None:
    with pytest.raises(ProgrammingError, match="unknown option 'bogus'"):
        TabletOptions().with_(bogus=1)
