"""Corruption: flip bytes in and truncate every kind of file; the tablet must raise a
CorruptionError naming the file (never return wrong data, never a raw traceback from a
decoder), and a missing file must be a clear error too."""

from __future__ import annotations

import glob
import os
from typing import Any

import pyarrow as pa
import pytest

from kudusql.common.errors import CorruptionError, DatabaseError, OperationalError
from kudusql.common.options import TabletOptions
from kudusql.storage.tablet.tablet import Tablet
from tests.support.tablets import schema

SCH = schema(("k", "BIGINT"), ("v", "STRING"), ("n", "DOUBLE"), key=["k"])
OPTS = TabletOptions(rows_per_page=64, sync=False, history_max_age_s=3600, file_grace_s=0)


def _build(tmp_path: Any) -> str:
    path = str(tmp_path / "t")
    t = Tablet.create(path, SCH, OPTS)
    n = 500
    t.insert(
        pa.table(
            {
                "k": pa.array(range(n), pa.int64()),
                "v": [f"v{i}" for i in range(n)],
                "n": [i * 0.5 for i in range(n)],
            }
        )
    )
    t.update(
        pa.table(
            {"k": pa.array(range(0, n, 3), pa.int64()), "v": [f"u{i}" for i in range(0, n, 3)]}
        )
    )
    t.flush()
    t.delete(pa.table({"k": pa.array(range(0, n, 7), pa.int64())}))
    t.flush_deltas()
    t.update(pa.table({"k": pa.array([1, 2], pa.int64()), "n": [9.0, 9.5]}))  # stays in the WAL
    t.close()
    return path


def _read_everything(path: str) -> None:
    t = Tablet.open(path, OPTS)
    try:
        t.scan().read_all()
        for k in (3, 250, 499):
            t.lookup((k,))
        ts = t.latest_timestamp()
        t.scan(snapshot=ts - (1 << 12) * 1_000_000).read_all()  # one second ago: UNDO files
        t.diff_scan(ts - (1 << 12) * 10_000_000, ts).read_all()
    finally:
        t.close()


def _files(path: str) -> dict[str, str]:
    kinds = {
        "superblock": os.path.join(path, "tablet.meta"),
        "key cfile": glob.glob(os.path.join(path, "rowsets", "*", "key.cfile"))[0],
        "column cfile": glob.glob(os.path.join(path, "rowsets", "*", "c1.cfile"))[0],
        "bloom": glob.glob(os.path.join(path, "rowsets", "*", "bloom"))[0],
        "undo deltafile": glob.glob(os.path.join(path, "rowsets", "*", "undo*.delta"))[0],
        "redo deltafile": glob.glob(os.path.join(path, "rowsets", "*", "redo*.delta"))[0],
        "wal segment": sorted(glob.glob(os.path.join(path, "wal", "*")))[0],
    }
    return kinds


KINDS = [
    "superblock",
    "key cfile",
    "column cfile",
    "bloom",
    "undo deltafile",
    "redo deltafile",
    "wal segment",
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
def test_flipped_byte_is_detected(tmp_path: Any, kind: str, where: float) -> None:
    path = _build(tmp_path)
    _read_everything(path)  # intact: fine
    f = _files(path)[kind]
    with open(f, "r+b") as fh:
        data = bytearray(fh.read())
        i = int(len(data) * where)
        fh.seek(i)
        fh.write(bytes([data[i] ^ 0x5A]))
    with pytest.raises(CorruptionError) as e:
        _read_everything(path)
    assert os.path.basename(f) in str(e.value)


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "wal segment"])
def test_truncated_file_is_detected(tmp_path: Any, kind: str) -> None:
    path = _build(tmp_path)
    f = _files(path)[kind]
    size = os.path.getsize(f)
    with open(f, "r+b") as fh:
        fh.truncate(size * 2 // 3)
    with pytest.raises(CorruptionError) as e:
        _read_everything(path)
    assert os.path.basename(f) in str(e.value)


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "wal segment"])
def test_missing_file_is_a_clear_error(tmp_path: Any, kind: str) -> None:
    path = _build(tmp_path)
    f = _files(path)[kind]
    os.unlink(f)
    with pytest.raises(DatabaseError) as e:
        _read_everything(path)
    assert isinstance(e.value, (OperationalError, CorruptionError))
    assert os.path.basename(f) in str(e.value) or "missing" in str(e.value)


# -- WAL segments: only a torn tail of the last one may be cut --------------------------------
WAL_OPTS = OPTS.with_(wal_segment_bytes=4096)


def _wal_tablet(tmp_path: Any) -> tuple[str, list[str]]:
    """A tablet whose rows are only in its WAL: three sessions of 30 small inserts each
    (so the log spans segments of several sessions)."""
    path = str(tmp_path / "t")
    Tablet.create(path, SCH, WAL_OPTS).close()
    k = 0
    for _session in range(3):
        t = Tablet.open(path, WAL_OPTS)
        for _ in range(30):
            t.insert(pa.table({"k": pa.array([k], pa.int64()), "v": [f"v{k}"], "n": [0.5]}))
            k += 1
        t.close()
    segs = sorted(glob.glob(os.path.join(path, "wal", "wal-*.log")))
    assert len(segs) >= 6
    return path, segs


def _keys(path: str, *, read_only: bool) -> list[int]:
    t = Tablet.open(path, WAL_OPTS, read_only=read_only)
    try:
        return sorted(t.scan(["k"]).read_all().column("k").to_pylist())
    finally:
        t.close()


def _wal_damage(kind: str, segs: list[str]) -> str:
    mid = segs[len(segs) // 2]
    with open(mid, "rb") as f:
        mid_data = f.read()
    if kind == "middle segment deleted":
        os.unlink(mid)
    elif kind == "middle segment truncated at its footer and a record":
        with open(mid, "r+b") as f:
            f.truncate(len(mid_data) - 44 - 1)  # inside the last record
            f.truncate(mid_data.rindex(b"KREC"))  # at the last record's start
    elif kind == "middle segment zeroed":
        with open(mid, "r+b") as f:
            f.write(bytes(len(mid_data)))
    elif kind == "last segment zeroed":
        size = os.path.getsize(segs[-1])
        with open(segs[-1], "r+b") as f:
            f.write(bytes(size))
        return segs[-1]
    elif kind == "last segment emptied":
        with open(segs[-1], "r+b") as f:
            f.truncate(0)
        return segs[-1]
    elif kind == "garbage inside the last segment":
        with open(segs[-1], "r+b") as f:
            data = f.read()
            f.seek(data.index(b"KREC", 40) + 3)
            f.write(b"\xff" * 8)
        return segs[-1]
    return mid


WAL_DAMAGE = [
    "middle segment deleted",
    "middle segment truncated at its footer and a record",
    "middle segment zeroed",
    "last segment zeroed",
    "last segment emptied",
    "garbage inside the last segment",
]


@pytest.mark.parametrize("kind", WAL_DAMAGE)
@pytest.mark.parametrize("read_only", [False, True])
def test_damaged_wal_segment_is_detected(tmp_path: Any, kind: str, read_only: bool) -> None:
    """Acknowledged rows never vanish silently: the open (the writer's or a read-only
    one) fails naming the segment, and changes nothing."""
    path, segs = _wal_tablet(tmp_path)
    assert _keys(path, read_only=True) == list(range(90))
    segs = sorted(glob.glob(os.path.join(path, "wal", "wal-*.log")))
    victim = _wal_damage(kind, segs)
    before = sorted(os.listdir(os.path.join(path, "wal")))
    with pytest.raises(CorruptionError) as e:
        _keys(path, read_only=read_only)
    assert os.path.basename(victim) in str(e.value)
    assert sorted(os.listdir(os.path.join(path, "wal"))) == before


def test_torn_tail_of_the_last_wal_segment_recovers_silently(tmp_path: Any) -> None:
    """A crash in the middle of an append: both opens read every row before the tear,
    the writer cuts it."""
    path, segs = _wal_tablet(tmp_path)
    segs = sorted(glob.glob(os.path.join(path, "wal", "wal-*.log")))
    last = segs[-1]
    with open(last, "rb") as f:
        data = f.read()
    with open(last, "wb") as f:
        f.write(data[: data.rindex(b"KREC") + 60])  # the last insert torn, footer gone
    assert _keys(path, read_only=True) == list(range(89))
    assert os.path.getsize(last) == data.rindex(b"KREC") + 60
    assert _keys(path, read_only=False) == list(range(89))
    assert os.path.getsize(last) == data.rindex(b"KREC")
    assert _keys(path, read_only=False) == list(range(89))
