"""RollingDiskRowSetWriter: writes key-sorted rows and their deltas as DiskRowSets.

Output rolls to a new rowset at the target size, so flushes and compactions produce
rowsets of bounded size with disjoint key ranges. All column CFiles of a rowset share
page boundaries (``rows_per_page``), which lets scans prune, decode and patch a page of
every column at once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.common.options import TabletOptions
from kudusql.common.schema import Schema
from kudusql.storage.cfile import CFileWriter, parse_compression, parse_encoding
from kudusql.storage.cfile.bloom import BloomFilter
from kudusql.storage.fs.files import fsync_dir, write_new_file
from kudusql.storage.tablet.delta import Deltas
from kudusql.storage.tablet.deltafile import write_delta_file
from kudusql.storage.tablet.diskrowset import DeltaFileMeta, RowSetMeta, rowset_dir


@dataclass
class RowSetWriteOptions:
    target_rowset_bytes: int = 32 * 1024 * 1024
    rows_per_page: int = 32768
    sync: bool = True
    bloom_fp_rate: float = 0.005

    @classmethod
    def of(cls, o: TabletOptions) -> RowSetWriteOptions:
        """The options a tablet with ``o`` writes its rowsets with."""
        return cls(o.rowset_target_bytes, o.rows_per_page, o.sync, o.bloom_fp_rate)


def rowset_rows(bytes_per_row: int, opts: RowSetWriteOptions) -> int:
    """Rows per output rowset: the target size in whole pages (at least one page)."""
    rows = max(opts.rows_per_page, opts.target_rowset_bytes // max(1, bytes_per_row))
    return (rows // opts.rows_per_page) * opts.rows_per_page


def write_rowsets(
    tablet_dir: str,
    first_id: int,
    schema: Schema,
    rows: pa.Table,
    keys: pa.Array[Any],
    undo: Deltas,
    redo: Deltas,
    opts: RowSetWriteOptions,
    pool: ThreadPoolExecutor | None = None,
) -> list[RowSetMeta]:
    """Write ``rows`` (sorted by ``keys``) as one or more DiskRowSets with ids from
    ``first_id``; ``undo``/``redo`` are addressed by row position in ``rows``."""
    n = rows.num_rows
    if n == 0:
        return []
    per_row = max(1, rows.nbytes // n + len(keys.buffers()[-1] or b"") // max(n, 1))
    rows_per_rowset = rowset_rows(per_row, opts) or n
    starts = list(range(0, n, rows_per_rowset))
    undos = split_by_rowid(undo, starts)
    redos = split_by_rowid(redo, starts)
    metas = []
    for i, start in enumerate(starts):
        stop = min(n, start + rows_per_rowset)
        metas.append(
            _write_one(
                tablet_dir,
                first_id + i,
                schema,
                rows.slice(start, stop - start),
                keys.slice(start, stop - start),
                undos[i],
                redos[i],
                opts,
                pool,
            )
        )
    return metas


def split_by_rowid(d: Deltas, starts: list[int]) -> list[Deltas]:
    """``d``'s events cut into the row ranges that begin at the ascending ``starts``
    (the first is 0), each renumbered from its range's first row, events kept in their
    order within a range. One stable sort and one ``take`` for all ranges (a mask per
    output rowset was 7% of a merge of seven)."""
    if not len(d) or len(starts) == 1:
        return [d] * len(starts)
    part = np.searchsorted(np.asarray(starts[1:], dtype=np.int64), d.rowid, "right")
    if len(part) > 1 and bool(np.any(part[1:] < part[:-1])):
        order = np.argsort(part, kind="stable")
        d, part = d.take(order), part[order]
    cuts = np.searchsorted(part, np.arange(1, len(starts))).tolist()
    return [
        Deltas(p.rowid - start, p.ts, p.seq, p.op, p.cols) if start else p
        for p, start in zip(d.split(cuts), starts, strict=True)
    ]


def _write_one(
    tablet_dir: str,
    rs_id: int,
    schema: Schema,
    rows: pa.Table,
    keys: pa.Array[Any],
    undo: Deltas,
    redo: Deltas,
    opts: RowSetWriteOptions,
    pool: ThreadPoolExecutor | None,
) -> RowSetMeta:
    d = rowset_dir(tablet_dir, rs_id)
    if os.path.exists(d):
        shutil.rmtree(d)  # leftovers of an interrupted write of the same id
    # mkdir, not makedirs: the tablet (or Spark staging) directory must exist, and a
    # writer that outlives its removal fails instead of re-creating it
    with contextlib.suppress(FileExistsError):
        os.mkdir(os.path.dirname(d))
    os.mkdir(d)
    n = rows.num_rows
    rpp = opts.rows_per_page
    types = {c.id: c.type for c in schema.columns}

    def write_column(
        name: str,
        arr: pa.ChunkedArray[Any] | pa.Array[Any],
        atype: pa.DataType,
        enc: str | None,
        comp: str | None,
    ) -> int:
        w = CFileWriter(
            os.path.join(d, name),
            atype,
            encoding=parse_encoding(enc),
            compression=parse_compression(comp),
            sync=opts.sync,
        )
        try:
            for s in range(0, n, rpp):
                piece = arr.slice(s, min(rpp, n - s))
                if isinstance(piece, pa.ChunkedArray):
                    piece = piece.combine_chunks()
                w.append_page(piece)
            return w.finish()
        except BaseException:
            w.abort()
            raise

    jobs: list[
        tuple[str, pa.ChunkedArray[Any] | pa.Array[Any], pa.DataType, str | None, str | None]
    ] = [("key.cfile", keys, pa.binary(), "plain", "lz4")]
    for i, c in enumerate(schema.columns):
        jobs.append(
            (f"c{c.id}.cfile", rows.column(i), c.type.arrow_type(), c.encoding, c.compression)
        )
    if pool is not None:
        futures = [pool.submit(write_column, *j) for j in jobs]
        # Every column's writer has stopped before an error propagates: one still
        # writing would race the retry, which removes this directory and makes it anew
        # (a late writer's abort could unlink the retry's file of the same name).
        wait(futures)
        sizes = [f.result() for f in futures]
    else:
        sizes = [write_column(*j) for j in jobs]
    bloom = BloomFilter.build(keys, opts.bloom_fp_rate)
    write_new_file(os.path.join(d, "bloom"), [bloom.to_bytes()], sync=opts.sync)
    meta = RowSetMeta(
        id=rs_id,
        num_rows=n,
        min_key=keys[0].as_py(),
        max_key=keys[n - 1].as_py(),
        column_ids=[c.id for c in schema.columns],
        base_bytes=int(sum(sizes[1:])),
        raw_bytes=int(rows.nbytes + keys.nbytes),
    )
    if len(undo):
        name = "undo0.delta"
        st = write_delta_file(os.path.join(d, name), "undo", undo, types, sync=opts.sync)
        meta.undo_files.append(DeltaFileMeta(name, st))
    if len(redo):
        name = "redo0.delta"
        st = write_delta_file(os.path.join(d, name), "redo", redo, types, sync=opts.sync)
        meta.redo_files.append(DeltaFileMeta(name, st))
        meta.last_durable_dms_id = 0  # the DeltaMemStore numbering starts after this file
    if opts.sync:
        fsync_dir(d)
        fsync_dir(os.path.dirname(d))
    return meta
