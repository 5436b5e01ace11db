"""DeltaFile: an immutable file of REDO or UNDO mutation events of one DiskRowSet.

Events are stored column-wise (rowid, timestamp, sequence, type, then per changed
column the event positions and the new values), each column one checksummed page in
the CFile page format. The footer carries the statistics that let a scan skip a whole
file (min/max timestamp), and the counts the maintenance manager scores on.
The byte layout is in ``FORMAT.md`` beside this module.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.common.errors import CorruptionError, OperationalError
from kudusql.common.types import DataType
from kudusql.storage.cfile import Compression, decode_page, encode_page
from kudusql.storage.fs.checksum import crc32, verify
from kudusql.storage.fs.files import write_new_file
from kudusql.storage.tablet.delta import ColumnDelta, Deltas, MutationType

# DO NOT CHANGE: on-disk.
MAGIC = b"KSQLDLT1"
TRAILER_MAGIC = b"KSQLDLTE"
VERSION = 1
_HEADER = struct.Struct("<8sII")  # magic, version, reserved
_TRAILER = struct.Struct("<QII8s")  # footer offset, footer length, footer crc32, magic


@dataclass(frozen=True)
class DeltaStats:
    kind: str  # "redo" or "undo"
    num_events: int
    min_ts: int
    max_ts: int
    delete_count: int
    reinsert_count: int
    update_counts: dict[int, int]
    size: int


def write_delta_file(
    path: str, kind: str, deltas: Deltas, types: dict[int, DataType], *, sync: bool = True
) -> DeltaStats:
    """Write ``deltas`` (already in apply order) as a new DeltaFile."""
    chunks: list[bytes] = [_HEADER.pack(MAGIC, VERSION, 0)]
    offset = _HEADER.size

    def add(arr: pa.Array[Any]) -> list[int]:
        nonlocal offset
        page = encode_page(arr, None, Compression.LZ4)
        chunks.append(page)
        loc = [offset, len(page)]
        offset += len(page)
        return loc

    pages: dict[str, Any] = {
        "rowid": add(pa.array(deltas.rowid, type=pa.int64())),
        "ts": add(pa.array(deltas.ts.view(np.int64), type=pa.int64())),
        "seq": add(pa.array(deltas.seq, type=pa.int64())),
        "op": add(pa.array(deltas.op.view(np.int8), type=pa.int8())),
        "cols": [],
    }
    update_counts = {}
    for cid, cd in sorted(deltas.cols.items()):
        t = types[cid]
        pages["cols"].append(
            {
                "id": cid,
                "type": str(t),
                "pos": add(pa.array(cd.pos, type=pa.int64())),
                "values": add(cd.values.cast(t.arrow_type())),
            }
        )
        update_counts[cid] = int(np.count_nonzero(deltas.op[cd.pos] == MutationType.UPDATE))
    stats = {
        "kind": kind,
        "num_events": len(deltas),
        "min_ts": deltas.min_ts,
        "max_ts": deltas.max_ts,
        "delete_count": int(np.count_nonzero(deltas.op == MutationType.DELETE)),
        "reinsert_count": int(np.count_nonzero(deltas.op == MutationType.REINSERT)),
        "update_counts": {str(k): v for k, v in update_counts.items()},
        "pages": pages,
    }
    footer = json.dumps(stats, separators=(",", ":")).encode()
    chunks.append(footer)
    chunks.append(_TRAILER.pack(offset, len(footer), crc32(footer), TRAILER_MAGIC))
    size = write_new_file(path, chunks, sync=sync)
    return stats_from_dict(stats, size)


def stats_from_dict(d: dict[str, Any], size: int) -> DeltaStats:
    """DeltaStats from a footer or superblock dict (the same keys in both)."""
    return DeltaStats(
        d["kind"],
        d["num_events"],
        d["min_ts"],
        d["max_ts"],
        d["delete_count"],
        d["reinsert_count"],
        {int(k): v for k, v in d["update_counts"].items()},
        size,
    )


class DeltaFileReader:
    """Opens a DeltaFile: the footer at once, the events on first use."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            with pa.memory_map(path, "r") as mm:
                self._data = memoryview(mm.read_buffer())
        except FileNotFoundError:
            raise OperationalError(f"missing delta file {path}") from None
        except OSError as e:
            raise OperationalError(f"cannot read delta file {path}: {e}") from e
        data = self._data
        if len(data) < _HEADER.size + _TRAILER.size:
            raise CorruptionError(path, len(data), "delta file too short (truncated?)")
        magic, version, _ = _HEADER.unpack_from(data, 0)
        if magic != MAGIC:
            raise CorruptionError(path, 0, "bad delta file magic")
        if version != VERSION:
            raise CorruptionError(path, 8, f"unsupported delta file version {version}")
        toff = len(data) - _TRAILER.size
        foff, flen, fcrc, tmagic = _TRAILER.unpack_from(data, toff)
        if tmagic != TRAILER_MAGIC or foff + flen != toff:
            raise CorruptionError(path, toff, "bad delta file trailer (truncated?)")
        footer = bytes(data[foff:toff])
        verify(footer, fcrc, path, foff, "delta file footer")
        try:
            self._footer = json.loads(footer)
            self.stats = stats_from_dict(self._footer, len(data))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptionError(path, foff, f"unreadable delta file footer: {e}") from e
        self._deltas: Deltas | None = None

    def _page(self, loc: list[int], t: pa.DataType) -> pa.Array[Any]:
        off, length = loc
        return decode_page(self._data[off : off + length], t, self.path, off)

    def deltas(self) -> Deltas:
        if self._deltas is not None:
            return self._deltas
        p = self._footer["pages"]
        i64 = pa.int64()
        try:
            rowid = np.asarray(self._page(p["rowid"], i64).to_numpy(), dtype=np.int64)
            ts = np.asarray(self._page(p["ts"], i64).to_numpy(), dtype=np.int64).view(np.uint64)
            seq = np.asarray(self._page(p["seq"], i64).to_numpy(), dtype=np.int64)
            op = np.asarray(self._page(p["op"], pa.int8()).to_numpy(), dtype=np.int8).view(np.uint8)
            cols = {}
            for c in p["cols"]:
                t = DataType.parse(c["type"]).arrow_type()
                pos = np.asarray(self._page(c["pos"], i64).to_numpy(), dtype=np.int64)
                cols[int(c["id"])] = ColumnDelta(pos, self._page(c["values"], t))
        except CorruptionError:
            raise
        except (KeyError, ValueError, TypeError, IndexError) as e:
            raise CorruptionError(self.path, 0, f"inconsistent delta file: {e}") from e
        n = len(rowid)
        if not (len(ts) == len(seq) == len(op) == n) or any(
            len(c.pos) != len(c.values) or (len(c.pos) and int(c.pos.max()) >= n)
            for c in cols.values()
        ):
            raise CorruptionError(self.path, 0, "delta file columns disagree in length")
        self._deltas = Deltas(rowid, ts, seq, op, cols)
        return self._deltas

    def unlink(self) -> None:
        os.unlink(self.path)
