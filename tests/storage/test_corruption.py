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
