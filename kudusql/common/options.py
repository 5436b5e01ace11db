"""One typed set of options for the storage engine (settable from connect(), SET and
table properties later)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any

from kudusql.common.errors import ProgrammingError

_MIB = 1024 * 1024

#: What ``wal_fsync`` accepts (``storage/wal``'s FsyncPolicy values).
WAL_FSYNC_POLICIES = ("none", "batch", "always")
#: Most threads a tablet or database pool may have.
MAX_THREADS = 1024


@dataclass(frozen=True)
class _Int:
    """An integer option (``bool`` is not one) in [low, high]."""

    low: int
    high: int | None = None

    def check(self, name: str, v: Any) -> None:
        ok = isinstance(v, int) and not isinstance(v, bool) and v >= self.low
        if ok and (self.high is None or v <= self.high):
            return
        upto = f" and at most {self.high}" if self.high is not None else ""
        raise ProgrammingError(
            f"option {name!r} must be an integer of at least {self.low}{upto}, got {v!r}"
        )


@dataclass(frozen=True)
class _Real:
    """A finite number option, at least ``low`` (above it if ``above``), below ``below``."""

    low: float
    above: bool = False
    below: float | None = None
    #: The highest value allowed (inclusive).
    most: float | None = None

    def check(self, name: str, v: Any) -> None:
        number = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if (
            number
            and (v > self.low if self.above else v >= self.low)
            and (self.below is None or v < self.below)
            and (self.most is None or v <= self.most)
        ):
            return
        bound = f"above {self.low:g}" if self.above else f"at least {self.low:g}"
        if self.below is not None:
            bound += f" and below {self.below:g}"
        if self.most is not None:
            bound += f" and at most {self.most:g}"
        raise ProgrammingError(f"option {name!r} must be a finite number {bound}, got {v!r}")


@dataclass(frozen=True)
class _Bool:
    def check(self, name: str, v: Any) -> None:
        if not isinstance(v, bool):
            raise ProgrammingError(f"option {name!r} must be True or False, got {v!r}")


@dataclass(frozen=True)
class _Choice:
    choices: tuple[str, ...]

    def check(self, name: str, v: Any) -> None:
        if not isinstance(v, str) or v.strip().lower() not in self.choices:
            raise ProgrammingError(
                f"option {name!r} must be one of {', '.join(self.choices)}, got {v!r}"
            )


def default_block_cache_bytes() -> int:
    """A quarter of physical memory, between 256 MiB and 8 GiB (256 MiB when the
    memory size is unknown). The cache fills only as pages are read, so a small
    database never uses more than its own decoded size."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 256 * _MIB
    return int(min(max(total // 4, 256 * _MIB), 8192 * _MIB))


@dataclass(frozen=True)
class TabletOptions:
    """Knobs of one tablet. Sizes in bytes, times in seconds."""

    #: MemRowSet (or DeltaMemStore) size that makes a flush urgent for the maintenance
    #: manager (Kudu's flush_threshold_mb).
    flush_threshold_bytes: int = 64 * 1024 * 1024
    #: Age after which a smaller MemRowSet is flushed too (Kudu's flush_threshold_secs).
    flush_threshold_s: float = 120.0
    #: I/O budget of one merging compaction, in MiB (tablet_compaction_budget_mb).
    compaction_budget_mb: float = 256.0
    #: A merge of rowsets worth it only because they are small (no lower height) waits
    #: until its inputs make a full rowset (``rowset_target_bytes``) or are this many
    #: (at least 2; see compaction_policy.py).
    compaction_small_rowset_merge_inputs: int = 8
    #: Minor delta compaction score = REDO files / this (capped at 1).
    minor_compaction_max_files: int = 1000
    #: The maintenance manager offers a minor delta compaction of a rowset once it has
    #: this many REDO files (Kudu: 2). Every delta flush adds a file to each rowset it
    #: updated, so at 2 the manager merges pairs of small files back to back, CPU the
    #: writers need; the explicit API still merges any 2.
    minor_compaction_min_files: int = 4
    #: Major delta compaction runs once REDO bytes reach this fraction of base bytes.
    major_compaction_min_ratio: float = 0.1
    #: The maintenance manager rewrites a rowset without its rows deleted before the
    #: ancient history mark (``deleted_row_gc``) once they are at least this fraction of
    #: its rows; COMPACT and GC rewrite any rowset that has one. Each rewrite of a
    #: rowset losing rows steadily writes what it keeps, so a rowset is rewritten about
    #: (1 - f) / f times its size in all; its deleted rows hold at most this fraction.
    deleted_row_gc_min_fraction: float = 0.5
    #: DiskRowSets roll at this size (Kudu's budgeted_compaction_target_rowset_size).
    rowset_target_bytes: int = 32 * 1024 * 1024
    #: Rows per CFile page; every column of a rowset shares page boundaries.
    rows_per_page: int = 32768
    #: Decoded-page cache shared by the tablets of a database (default: a quarter of
    #: physical memory, see ``default_block_cache_bytes``). Scans hand cached pages to
    #: DuckDB without copying, so a warm working set skips decompression and decoding.
    block_cache_bytes: int = field(default_factory=default_block_cache_bytes)
    #: History kept for time travel; older snapshots are refused (and GC'd later).
    #: Negative: keep all history.
    history_max_age_s: float = 15 * 60
    #: fsync new files and metadata.
    sync: bool = True
    #: Bloom filter false-positive rate. 0.5% is what the word layout (one 64-bit word
    #: per key, see ``cfile/bloom.py``) reaches with ~15 bits per key: the memory the
    #: classic layout spent on 0.1%, at a fraction of the probe cost.
    bloom_fp_rate: float = 0.005
    #: Threads for writing columns and scanning rowsets.
    threads: int = 2
    #: Rows per RecordBatch a scan returns (at most).
    scan_batch_rows: int = 65536
    #: INSERT batches at least this large skip the WAL and the MemRowSet and are written
    #: straight to DiskRowSets (the superblock swap commits them).
    bulk_load_rows: int = 100_000
    #: WAL fsync policy: "none" (OS cache, Kudu's default), "batch" (group commit before
    #: acknowledging) or "always" (every append).
    wal_fsync: str = "none"
    #: WAL segments roll at this size.
    wal_segment_bytes: int = 8 * 1024 * 1024
    #: A writer closing a tablet flushes its in-memory stores first when the next open
    #: would otherwise replay more WAL segments than this: every writer session starts a
    #: segment, so short sessions that each write a little would make the log (and the
    #: replay at open) grow without bound. 0: never flush at close.
    wal_replay_max_segments: int = 16
    #: Obsolete files (WAL segments, rowset files replaced by compactions) are deleted only
    #: after this long, so a read-only process that loaded an older state can still read
    #: them (and, in this process, only once no running scan holds them).
    file_grace_s: float = 60.0
    #: The fast paths: writes of a few rows as Python values (the row path, routed row
    #: by row), point lookups and cached plans. Each gives exactly what the general path
    #: gives; False sends everything down the general path (the differential tests run
    #: both, and a suspected fast-path bug can be checked by turning them off).
    fast_paths: bool = True

    def __post_init__(self) -> None:
        for name, rule in _RULES.items():
            rule.check(name, getattr(self, name))

    def with_(self, **kw: Any) -> TabletOptions:
        """A copy with ``kw`` changed (checked like a new instance)."""
        names = {f.name for f in fields(self)}
        for k in kw:
            if k not in names:
                raise ProgrammingError(f"unknown option {k!r}; known: {', '.join(sorted(names))}")
        return replace(self, **kw)


#: The check of every option (``TabletOptions.__post_init__``).
_RULES: dict[str, _Int | _Real | _Bool | _Choice] = {
    "flush_threshold_bytes": _Int(1),
    "flush_threshold_s": _Real(0),
    "compaction_budget_mb": _Real(0, above=True),
    "compaction_small_rowset_merge_inputs": _Int(2),
    "minor_compaction_max_files": _Int(1),
    "minor_compaction_min_files": _Int(1),
    "major_compaction_min_ratio": _Real(0, above=True),
    "rowset_target_bytes": _Int(1),
    "rows_per_page": _Int(1),
    "block_cache_bytes": _Int(0),
    "history_max_age_s": _Real(-math.inf),  # negative: keep all history
    "sync": _Bool(),
    "bloom_fp_rate": _Real(0, above=True, below=1),
    "threads": _Int(1, MAX_THREADS),
    "scan_batch_rows": _Int(1),
    "bulk_load_rows": _Int(1),
    "wal_fsync": _Choice(WAL_FSYNC_POLICIES),
    "wal_segment_bytes": _Int(4096),
    "wal_replay_max_segments": _Int(0),
    "file_grace_s": _Real(0),
    "fast_paths": _Bool(),
    "deleted_row_gc_min_fraction": _Real(0, above=True, most=1),
}
assert set(_RULES) == {f.name for f in fields(TabletOptions)}, "every option has a check"
