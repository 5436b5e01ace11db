"""The file-writing work of flushes and compactions, run in a worker process off the GIL.

A merging compaction spends seconds of CPU reading its inputs, merging them by key
(``compaction.merge_rowsets``) and writing the outputs (``rowset_writer``); a major
delta compaction reads, rebases and rewrites columns; a minor one rewrites REDO files;
a flush sorts a frozen MemRowSet and encodes it, a delta flush encodes DeltaMemStores.
Run in a thread, much of that holds the GIL the writer needs: on the sustained load's
tablet (2 cores, quiet machine) merges running back to back in a thread cut a writer
from ~170k to 126-138k rows/s; the same merges in another process left it at ~173k
(and finished sooner). See docs/DECISIONS.md.

This module owns that work as jobs. A job names what it reads (rowset metadata as the
superblock has it, once the DeltaMemStores are flushed), the ancient history mark and
where it writes; ``job.run()`` does the work and returns what the tablet needs to swap
the result in: ``MergeJob`` the output rowsets' metadata and where each input rowid
went, ``DeltaCompactionJob`` the rowset's new metadata, ``FlushJob`` (which carries
the frozen MemRowSet's rows) the new rowsets and where each slot went,
``DeltaFilesJob`` (which carries the frozen DeltaMemStores' events) the files' stats.
The tablet does everything around a job (freezing stores, choosing inputs, migrating
mutations that arrive meanwhile, publishing): a job reads immutable files or the data
it carries and writes new files that nothing names until the tablet publishes them,
so a job that fails or dies leaves nothing visible.

``CompactionWorker`` runs jobs in one long-lived child (``python -m`` this module),
each job and its result pickled over the child's stdin and stdout. The child dies with
its parent (Linux ``PR_SET_PDEATHSIG``, and a parent-pid check before each job): a
SIGKILLed writer must not leave a job writing files into a tablet that a new writer may
reopen. A child that dies mid-job fails that job (``OperationalError``); the next job
starts a new child. What the child writes on its stderr (a stray print, a Python
warning, a traceback as it dies) goes to this module's logger, never to the stderr of
the program that embeds the database.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import pyarrow as pa

from kudusql.common.errors import OperationalError
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.storage.cfile import CFileWriter, key_array, parse_compression, parse_encoding
from kudusql.storage.tablet.compaction import (
    MergeInput,
    merge_rowsets,
    only_columns,
    rebase,
    split_final_deletes,
)
from kudusql.storage.tablet.delta import Deltas, MutationType
from kudusql.storage.tablet.deltafile import DeltaStats, write_delta_file
from kudusql.storage.tablet.diskrowset import DeltaFileMeta, DiskRowSet, RowSetMeta
from kudusql.storage.tablet.flush import prepare_flush
from kudusql.storage.tablet.memrowset import MemRowSetView
from kudusql.storage.tablet.rowset_writer import RowSetWriteOptions, write_rowsets

log = logging.getLogger(__name__)

_LEN = struct.Struct("<Q")

# The child's allocators keep the memory a job freed for the next job, instead of handing
# it back to the kernel and faulting it in again. A merge allocates and frees arrays of
# hundreds of MiB. With the defaults, glibc maps each numpy array above its (adaptive)
# mmap threshold anew and mimalloc purges Arrow's freed pages after 1 s; a merge of nine
# 15 MiB rowsets then took 8k-18k page faults and 0.3-1.3 s of system time besides 1.6 s
# of user time on this machine's VM. With these settings it took no page fault once
# warm and 0.1 s. The sustained load's worker had spent a fifth to a quarter of its CPU
# time in the kernel.
# What is kept is bounded by the child's peak use, which is the largest job's working
# set: glibc trims the top of its heap beyond 1 GiB free, and mimalloc purges pages
# unused for 10 s at its next call. glibc honours an mmap threshold this high only from
# 2.35 on (older versions cap it at 32 MiB and reject more). There a trim threshold
# alone would freeze the mmap threshold at 128 KiB, which is worse than the default, so
# the glibc settings are made only on 2.35 and later. A variable set in the parent's
# environment wins.
_MIMALLOC_ENV = {"MIMALLOC_PURGE_DELAY": "10000"}
_GLIBC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


def _glibc_at_least(major: int, minor: int) -> bool:
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION") or ""  # "glibc 2.36"
    except (ValueError, OSError):
        return False
    parts = version.split()
    if len(parts) != 2 or parts[0] != "glibc":
        return False
    try:
        got = tuple(int(x) for x in parts[1].split(".")[:2])
    except ValueError:
        return False
    return got >= (major, minor)


def child_allocator_env() -> dict[str, str]:
    """The allocator settings the worker child gets (see above)."""
    return {**_MIMALLOC_ENV, **(_GLIBC_ENV if _glibc_at_least(2, 35) else {})}


@dataclass
class MergeJob:
    """Merge the rowsets ``inputs`` of the tablet at ``tablet_dir`` into new rowsets
    numbered from ``first_id``."""

    tablet_dir: str
    schema: Schema
    inputs: list[RowSetMeta]
    ahm: int
    first_id: int
    options: RowSetWriteOptions
    want_keys: bool = True  # hand back the outputs' sorted keys (``sorted_keys``)

    def run(
        self, rowsets: Sequence[DiskRowSet] | None = None, pool: ThreadPoolExecutor | None = None
    ) -> MergeResult:
        """Read, merge, write. ``rowsets`` are the inputs already open (the in-thread
        path, which shares the tablet's block cache), else opened from ``inputs``."""
        schema = self.schema
        inputs = (
            list(rowsets)
            if rowsets is not None
            else [DiskRowSet(self.tablet_dir, m, None) for m in self.inputs]
        )
        merged = merge_rowsets(
            [merge_input(d, schema, self.ahm) for d in inputs],
            [c.id for c in schema.key_columns],
            self.ahm,
        )
        arrow_schema = pa.schema([c.arrow_field() for c in schema.columns])
        rows = pa.Table.from_arrays(
            [merged.rows[c.id] for c in schema.columns], schema=arrow_schema
        )
        metas = write_rowsets(
            self.tablet_dir,
            self.first_id,
            schema,
            rows,
            merged.keys,
            merged.undo,
            merged.redo,
            self.options,
            pool,
        )
        keys = sorted_keys(merged.keys, metas, self.want_keys)
        return MergeResult(metas, merged.rowid_maps, merged.rows_dropped, keys)


@dataclass
class MergeResult:
    metas: list[RowSetMeta]  # the output rowsets, written and synced, not yet published
    rowid_maps: list[np.ndarray]  # per input: old rowid -> output position (-1: dropped)
    rows_dropped: int
    keys: list[tuple[np.ndarray, int] | None]  # per output: ``sorted_keys``


def sorted_keys(
    keys: pa.Array[Any], metas: Sequence[RowSetMeta], wanted: bool = True
) -> list[tuple[np.ndarray, int] | None]:
    """Per new rowset, its key file as the sorted array lookups search (``key_array``:
    array and key width; None for keys of mixed widths). The tablet seeds each new key
    reader's cache entry with it (``CFileReader.seed_whole_keys``): random writes touch
    every new rowset at once, and the writer's thread decoded each key file it had just
    had written (7-12 ms for 800k keys; a merge writes up to eight)."""
    out: list[tuple[np.ndarray, int] | None] = []
    if not wanted:  # the tablet has no block cache to seed
        return [None] * len(metas)
    start = 0
    for m in metas:
        out.append(key_array.build([keys.slice(start, m.num_rows)]))
        start += m.num_rows
    return out


def merge_input(drs: DiskRowSet, schema: Schema, ahm: int = 0) -> MergeInput:
    """Everything a merge needs of one rowset: every column, keys, UNDO and REDO events
    (UNDO files wholly older than ``ahm`` are not read: the merge would drop them)."""
    n = drs.num_rows
    ids = [c.id for c in schema.columns]
    return MergeInput(
        drs.key_reader().read_all().combine_chunks(),
        {c.id: drs.read_column_range(c, 0, n) for c in schema.columns},
        only_columns(drs.undo_file_deltas(ahm), ids),
        only_columns(drs.redo_file_deltas(), ids),
    )


@dataclass
class DeltaCompactionJob:
    """A delta compaction of one rowset (``major``: fold its REDO files into new base
    files of the columns they update, else merge its REDO files into one). New files
    take the rowset's next generation number, so none replaces a file in use."""

    tablet_dir: str
    schema: Schema
    meta: RowSetMeta
    ahm: int
    sync: bool
    major: bool

    def run(self, drs: DiskRowSet | None = None) -> DeltaCompactionResult:
        """Write the new files; ``drs`` is the rowset already open (the in-thread path)."""
        drs = drs if drs is not None else DiskRowSet(self.tablet_dir, self.meta, None)
        return self._major(drs) if self.major else self._minor(drs)

    def _minor(self, drs: DiskRowSet) -> DeltaCompactionResult:
        read = sum(f.stats.size for f in self.meta.redo_files)
        deltas = only_columns(drs.redo_file_deltas(), [c.id for c in self.schema.columns])
        meta = self.meta.copy()
        gen = meta.gen
        meta.redo_files = [self._write_deltas(drs, f"redo.g{gen}.delta", "redo", deltas)]
        meta.gen = gen + 1
        return DeltaCompactionResult(meta, read, meta.redo_files[0].stats.size)

    def _major(self, drs: DiskRowSet) -> DeltaCompactionResult:
        schema = self.schema
        ids = [c.id for c in schema.columns]
        redo = only_columns(drs.redo_file_deltas(), ids)
        undo = only_columns(drs.undo_file_deltas(self.ahm), ids)
        hist, _ = split_final_deletes(redo)
        nonkey = schema.columns[schema.num_key_columns :]
        if (hist.op != MutationType.UPDATE).any():  # a DELETE undone needs every column
            cols = list(nonkey)
        else:
            cols = [c for c in nonkey if c.id in redo.cols]
        n = drs.num_rows
        base = {c.id: drs.read_column_range(c, 0, n) for c in cols}
        rb = rebase(base, undo, redo, self.ahm)
        meta = self.meta.copy()
        gen = meta.gen
        written = 0
        for c in cols:
            name = f"c{c.id}.g{gen}.cfile"
            written += self._write_column(drs, name, c, rb.columns[c.id])
            meta.column_files[c.id] = name
            if c.id not in meta.column_ids:  # a column added after the rowset was written
                meta.column_ids = [*meta.column_ids, c.id]
        meta.undo_files = (
            [self._write_deltas(drs, f"undo.g{gen}.delta", "undo", rb.undo)] if len(rb.undo) else []
        )
        meta.redo_files = (
            [self._write_deltas(drs, f"redo.g{gen}.delta", "redo", rb.final_deletes)]
            if len(rb.final_deletes)
            else []
        )
        meta.gen = gen + 1
        meta.base_bytes = sum(
            os.path.getsize(os.path.join(drs.dir, meta.column_file(c.id)))
            for c in schema.columns
            if c.id in meta.column_ids
        )
        read = sum(f.stats.size for f in (*self.meta.redo_files, *self.meta.undo_files))
        readers = [drs.column_reader(c) for c in cols]
        read += sum(r.file_size for r in readers if r is not None)
        written += sum(f.stats.size for f in (*meta.undo_files, *meta.redo_files))
        return DeltaCompactionResult(meta, read, written)

    def _write_deltas(self, drs: DiskRowSet, name: str, kind: str, d: Deltas) -> DeltaFileMeta:
        types = {c.id: c.type for c in self.schema.columns}
        st = write_delta_file(os.path.join(drs.dir, name), kind, d, types, sync=self.sync)
        return DeltaFileMeta(name, st)

    def _write_column(self, drs: DiskRowSet, name: str, col: ColumnSchema, arr: Any) -> int:
        """A new CFile for one column of a rowset, with the rowset's page boundaries."""
        w = CFileWriter(
            os.path.join(drs.dir, name),
            col.type.arrow_type(),
            encoding=parse_encoding(col.encoding),
            compression=parse_compression(col.compression),
            sync=self.sync,
        )
        try:
            offsets = drs.page_offsets
            for p in range(len(offsets) - 1):
                a, b = int(offsets[p]), int(offsets[p + 1])
                w.append_page(arr.slice(a, b - a))
            return w.finish()
        except BaseException:
            w.abort()
            raise


@dataclass
class DeltaCompactionResult:
    meta: RowSetMeta  # the rowset with its new files (same id), not yet published
    bytes_read: int
    bytes_written: int


@dataclass
class FlushJob:
    """Write a frozen MemRowSet (``view``, its rows and mutations) as DiskRowSets
    numbered from ``first_id``."""

    tablet_dir: str
    schema: Schema
    view: MemRowSetView
    first_id: int
    options: RowSetWriteOptions
    want_keys: bool = True  # hand back the new rowsets' sorted keys (``sorted_keys``)

    def run(self, pool: ThreadPoolExecutor | None = None) -> FlushResult:
        fi = prepare_flush(self.view, self.schema)
        metas = write_rowsets(
            self.tablet_dir,
            self.first_id,
            self.schema,
            fi.rows,
            fi.keys,
            fi.undo,
            fi.redo,
            self.options,
            pool,
        )
        keys = sorted_keys(fi.keys, metas, self.want_keys)
        return FlushResult(metas, fi.slot_to_rowid, keys)


@dataclass
class FlushResult:
    metas: list[RowSetMeta]  # the new rowsets, written and synced, not yet published
    slot_to_rowid: np.ndarray  # MemRowSet slot -> row position in the new rowsets
    keys: list[tuple[np.ndarray, int] | None]  # per new rowset: ``sorted_keys``


@dataclass
class DeltaFilesJob:
    """Write REDO DeltaFiles: (path, events) each (a delta flush of several rowsets)."""

    files: list[tuple[str, Deltas]]
    schema: Schema
    sync: bool

    def run(self) -> list[DeltaStats]:
        types = {c.id: c.type for c in self.schema.columns}
        return [write_delta_file(p, "redo", d, types, sync=self.sync) for p, d in self.files]


Job = MergeJob | DeltaCompactionJob | FlushJob | DeltaFilesJob


# -- the pipe protocol -----------------------------------------------------------------------
# A message is a pickle (protocol 5) whose large contiguous buffers (numpy arrays, Arrow
# buffers) travel out of band, each written to the pipe from where it lies and read into
# its own bytearray, which the unpickled object then uses in place. Header: the pickle's
# length and the number of buffers (``_HEAD``), then each buffer's length (8 bytes each);
# then the pickle, then the buffers. Pickled in band, a job's or result's arrays were
# copied into one bytes object while the GIL was held (~45 ms for 64 MB, the sender's
# thread holding up the writer), and copied out of it again on the other side.
# The arrays are read while they are written to the pipe, with the GIL released, not
# copied at ``dumps``: what a job or result carries must not change while it is sent
# (a frozen MemRowSet's view, frozen DeltaMemStores' events and a job's results are
# never written to again).
_HEAD = struct.Struct("<QI")


def _send(f: IO[bytes], obj: Any) -> None:
    views: list[memoryview] = []

    def out_of_band(buf: pickle.PickleBuffer) -> bool:
        try:
            views.append(buf.raw())
        except BufferError:  # not contiguous: pickled in band
            return True
        return False

    data = pickle.dumps(obj, protocol=5, buffer_callback=out_of_band)
    sizes = struct.pack(f"<{len(views)}Q", *(v.nbytes for v in views))
    f.write(_HEAD.pack(len(data), len(views)) + sizes)
    f.write(data)
    for v in views:
        f.write(v)
    f.flush()


def _read_exactly(f: IO[bytes], n: int) -> bytearray | None:
    """``n`` bytes into a new bytearray; None if the stream ends first."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = f.readinto(view[got:])  # type: ignore[attr-defined]
        if not k:
            return None
        got += k
    return buf


def _receive(f: IO[bytes]) -> Any:
    """The next object, or None at the end of the stream (the other side is gone)."""
    head = _read_exactly(f, _HEAD.size)
    if head is None:
        return None
    n, count = _HEAD.unpack(head)
    sizes = _read_exactly(f, 8 * count)
    data = _read_exactly(f, n)
    if sizes is None or data is None:
        return None
    buffers = []
    for size in struct.unpack(f"<{count}Q", sizes):
        b = _read_exactly(f, size)
        if b is None:
            return None
        buffers.append(b)
    return pickle.loads(data, buffers=buffers)


def _transportable(e: BaseException) -> BaseException:
    """``e`` if it survives pickling, else an OperationalError saying what it was."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:
        return OperationalError(f"compaction worker: {type(e).__name__}: {e}")


class CompactionWorker:
    """One child process that runs jobs, one at a time (see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[..., CompactionWorker] | None = None
        self._reader: threading.Thread | None = None

    def run(self, job: Job) -> Any:
        """``job.run()`` in the child; its result, or its exception raised here."""
        with self._lock:
            proc = self._start()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                _send(proc.stdin, job)
                reply = _receive(proc.stdout)
            except OSError as e:
                reply = None
                cause: BaseException | None = e
            else:
                cause = None
            if reply is None:
                self._reap()
                raise OperationalError(
                    f"the compaction worker process died during a {type(job).__name__}"
                ) from cause
        kind, value = reply
        if kind == "err":
            raise value
        return value

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        p = self._proc
        return p.pid if p is not None and p.poll() is None else None

    def close(self) -> None:
        """Stop the child (it exits at the end of its input) and wait for it."""
        with self._lock:
            self._reap()

    def _start(self) -> subprocess.Popen[bytes]:
        p = self._proc
        if p is not None and p.poll() is None:
            return p
        self._reap()  # a child that died between jobs: replaced without failing one
        package = os.path.abspath(sys.modules["kudusql"].__file__ or "")
        root = os.path.dirname(os.path.dirname(package))  # where kudusql imports from
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(x for x in (root, env.get("PYTHONPATH", "")) if x)
        for name, value in child_allocator_env().items():
            env.setdefault(name, value)
        p = subprocess.Popen(
            [sys.executable, "-m", __name__, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            close_fds=True,
        )
        assert p.stderr is not None
        reader = threading.Thread(
            target=_log_lines, args=(p.stderr, p.pid), name="compaction-worker-stderr", daemon=True
        )
        reader.start()
        # A worker dropped without close() (a manager never stopped) still ends its child.
        self._finalizer = weakref.finalize(self, _stop_child, p, reader)
        self._reader = reader
        self._proc = p
        return p

    def _reap(self) -> None:
        p, self._proc = self._proc, None
        if p is not None:
            if self._finalizer is not None:
                self._finalizer.detach()
            _stop_child(p, self._reader)


def _log_lines(stream: IO[bytes], pid: int) -> None:
    """Log each line the child writes on its stderr, until it exits."""
    try:
        for line in stream:
            text = line.decode("utf-8", "replace").rstrip()
            if text:
                log.warning("compaction worker %d: %s", pid, text)
    except (OSError, ValueError):  # the pipe closed under the read
        pass
    finally:
        with contextlib.suppress(OSError):
            stream.close()


def _stop_child(p: subprocess.Popen[bytes], reader: threading.Thread | None = None) -> None:
    """End a child: it exits at the end of its input; killed if it does not. Its last
    stderr lines are logged before this returns."""
    with contextlib.suppress(OSError):  # a dead child's pipe may refuse the flush
        if p.stdin is not None:
            p.stdin.close()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    if p.stdout is not None:
        p.stdout.close()
    if reader is not None and reader is not threading.current_thread():
        reader.join(timeout=10)


# -- the child ------------------------------------------------------------------------------------
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent exits (Linux), and leave
    at once if the parent is already gone."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def _serve(parent: int) -> None:
    _die_with(parent)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints go to stderr, never into the reply stream
    inp = sys.stdin.buffer
    while True:
        job = _receive(inp)
        if job is None or os.getppid() != parent:
            return
        try:
            reply: tuple[str, Any] = ("ok", job.run())
        except BaseException as e:
            reply = ("err", _transportable(e))
        try:
            _send(out, reply)
        except BrokenPipeError:
            # The parent died while the job ran (its SIGKILL reaches this process a
            # moment later through PR_SET_PDEATHSIG): nobody is left to tell.
            os._exit(0)


if __name__ == "__main__":
    # Serve through the package's module, not __main__: results must pickle as
    # kudusql.storage.tablet.compaction_worker classes for the parent to load them.
    from kudusql.storage.tablet import compaction_worker

    compaction_worker._serve(int(sys.argv[1]))
