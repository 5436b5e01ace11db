"""The maintenance manager: one background thread that keeps tablets healthy.

Every tablet registered with a ``MaintenanceManager`` offers *maintenance ops*
(``Tablet.maintenance_ops``): flush the MemRowSet, flush DeltaMemStores, minor and
major delta compactions, a merging compaction, UNDO GC, deleted-rowset GC and
deleted-row GC (a rowset rewritten without its rows deleted before the ancient history
mark). Each op
reports what running it would gain, as in Kudu's MaintenanceManager: the memory it
would release (``ram_anchored``), the WAL bytes it would let go (``logs_retained``),
the disk bytes a GC would free (``data_retained``) and a performance score
(``perf_improvement``). Every ``poll_interval_s`` the thread picks one op, in Kudu's
order:

1. under memory pressure (above ``pressure_fraction`` of the memory limit), the op
   that releases the most memory;
2. an op anchoring at least ``log_target_replay_bytes`` of WAL, the largest first;
3. a GC op that frees disk space (every third time, when performance ops compete);
4. a delta compaction (minor or major) with a score above zero (every third time:
   merging compactions score higher whenever rowsets overlap, and under a steady
   stream of flushes they would otherwise starve the delta compactions, letting REDO
   files pile up without bound; a documented deviation from Kudu's single ranking).
   These turns alternate between preferring a minor and a major one: a major scores
   up to 1 (REDO bytes over base bytes) and a minor files/1000, so by score alone the
   majors (one rowset each) took every turn while each delta flush added a REDO file
   to every rowset random updates touched;
5. the op with the best performance score above zero;

and runs it, recording what ran (``MaintenanceRecord``). Writers call ``throttle``
before each batch: above the memory limit a write waits until a flush brings memory
back under it (back-pressure instead of unbounded growth); if the manager is off, the
writer flushes the largest store itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kudusql.common.errors import Error, OperationalError
from kudusql.storage.tablet.compaction_worker import CompactionWorker

log = logging.getLogger(__name__)

#: At most this long (seconds), a sum of memory stands in for the next (``throttle``).
CREDIT_S = 0.1


@dataclass(frozen=True)
class MaintenanceRecord:
    """One maintenance operation that ran (what SQL exposes as a system table)."""

    op: str
    tablet: str
    started: float  # seconds since the epoch
    duration_s: float
    bytes_read: int
    bytes_written: int
    note: str = ""

    def describe(self) -> str:
        extra = f", {self.note}" if self.note else ""
        return (
            f"{self.op} in {self.duration_s * 1000:.1f} ms "
            f"(read {self.bytes_read} B, wrote {self.bytes_written} B{extra})"
        )


@dataclass
class MaintenanceOp:
    """A candidate operation of one tablet and what running it would gain."""

    name: str
    tablet: str
    run: Callable[[], object]
    ram_anchored: int = 0
    logs_retained: int = 0
    data_retained: int = 0
    perf_improvement: float = 0.0


class MaintenanceSource(Protocol):
    """What the manager needs of a tablet."""

    path: str

    def maintenance_ops(self) -> list[MaintenanceOp]: ...

    def memory_bytes(self) -> int: ...


#: The ops that compact a rowset's delta files (``choose`` gives them every third turn).
DELTA_COMPACTIONS = frozenset({"minor_delta_compaction", "major_delta_compaction"})


#: The turns (of six) that prefer a delta compaction, and which kind first.
_DELTA_TURNS = {1: "minor_delta_compaction", 4: "major_delta_compaction"}


def flush_score(size: int, age_s: float, threshold_bytes: int, threshold_s: float) -> float:
    """Kudu's flush score: urgent (>= 1, growing with the excess) above the size
    threshold; below it, once older than the age threshold, up to 1 by age (an hour)
    or size."""
    if size <= 0:
        return 0.0
    mb, threshold_mb = size / 2**20, threshold_bytes / 2**20
    if size >= threshold_bytes:
        return max(1.0, mb - threshold_mb)
    if age_s > threshold_s:
        return min(1.0, max(age_s / 3600.0, mb / max(threshold_mb, 1e-9)))
    return 0.0


def choose(
    ops: list[MaintenanceOp],
    *,
    memory_pressure: bool,
    log_target_replay_bytes: int,
    prefer_gc: bool,
    prefer_delta: str | None = None,
) -> MaintenanceOp | None:
    """The op to run now, in Kudu's order (see the module docstring), or None."""
    if memory_pressure:
        ram = [o for o in ops if o.ram_anchored > 0]
        if ram:
            return max(ram, key=lambda o: (o.ram_anchored, o.logs_retained))
    big_log = [o for o in ops if o.logs_retained >= log_target_replay_bytes > 0]
    if big_log:
        return max(big_log, key=lambda o: o.logs_retained)
    gc = [o for o in ops if o.data_retained > 0]
    perf = [o for o in ops if o.perf_improvement > 0]
    if gc and (prefer_gc or not perf):
        return max(gc, key=lambda o: o.data_retained)
    delta = [o for o in perf if o.name in DELTA_COMPACTIONS]
    if delta and prefer_delta:  # the named kind first, else the other
        named = [o for o in delta if o.name == prefer_delta]
        return max(named or delta, key=lambda o: o.perf_improvement)
    if perf:
        return max(perf, key=lambda o: o.perf_improvement)
    return None


class MaintenanceManager:
    """The background scheduler of maintenance ops for a set of tablets."""

    def __init__(
        self,
        *,
        memory_limit_bytes: int = 1 << 30,
        poll_interval_s: float = 0.25,
        enabled: bool = True,
        pressure_fraction: float = 0.6,
        log_target_replay_bytes: int = 1 << 30,
        history: int = 1000,
        write_wait_s: float = 60.0,
        worker_process: bool = True,
    ) -> None:
        self.memory_limit_bytes = memory_limit_bytes
        self.poll_interval_s = poll_interval_s
        self.pressure_fraction = pressure_fraction
        self.log_target_replay_bytes = log_target_replay_bytes
        self.write_wait_s = write_wait_s
        self._sources: list[MaintenanceSource] = []
        self._lock = threading.Lock()
        self._wake = threading.Condition()
        self._records: deque[MaintenanceRecord] = deque(maxlen=history)
        # What writes may still add before ``throttle`` sums memory again, until when;
        # and every byte writes reported (``charge``).
        self._credit = 0
        self._credit_until = 0.0
        self._credit_limit = memory_limit_bytes  # the limit the credit was granted under
        self._spent = 0
        self._credit_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Turn mod 3: 0 prefer GC, 1 prefer a delta compaction (minor on turn 1, major
        # on turn 4), 2 best score.
        self._turn = 0
        self.errors: deque[str] = deque(maxlen=100)
        #: Background compactions write their files in a worker process
        #: (compaction_worker.py); flushes and GC stay in the maintenance thread.
        self.worker_process = worker_process
        self._worker: CompactionWorker | None = None
        self.enabled = enabled
        if enabled:
            self.start()

    # -- registration ---------------------------------------------------------------------------
    def register(self, source: MaintenanceSource) -> None:
        with self._lock:
            if source not in self._sources:
                self._sources.append(source)
        with self._credit_lock:
            self._credit = 0  # its memory was not in the last sum

    def unregister(self, source: MaintenanceSource) -> None:
        with self._lock:
            self._sources = [s for s in self._sources if s is not source]

    def sources(self) -> list[MaintenanceSource]:
        with self._lock:
            return list(self._sources)

    # -- the thread -------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self.enabled = True
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="maintenance", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Switch the background thread off (runs finish first); ``run_once`` still works."""
        self.enabled = False
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join()
        with self._lock:
            w, self._worker = self._worker, None
        if w is not None:
            w.close()

    def compaction_worker(self) -> CompactionWorker | None:
        """The process background compactions run in (started at the first one), or
        None when ``worker_process`` is off: they then run in the maintenance thread."""
        if not self.worker_process:
            return None
        with self._lock:
            if self._worker is None:
                self._worker = CompactionWorker()
            return self._worker

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                ran = self.run_once()
            except Exception as e:  # keep the thread alive; the error is recorded
                log.exception("maintenance op failed")
                self.errors.append(str(e))
                ran = None
            if ran is None:
                with self._wake:
                    self._wake.wait(self.poll_interval_s)

    # -- scheduling -------------------------------------------------------------------------------
    def memory_bytes(self) -> int:
        return sum(s.memory_bytes() for s in self.sources())

    def candidate_ops(self) -> list[MaintenanceOp]:
        ops: list[MaintenanceOp] = []
        for s in self.sources():
            try:
                ops.extend(s.maintenance_ops())
            except Error as e:  # a closed or failed tablet offers nothing
                log.debug("tablet %s offers no maintenance: %s", s.path, e)
        return ops

    def run_once(self) -> MaintenanceOp | None:
        """Pick the best op now and run it; returns it, or None when nothing is worth it."""
        pressure = self.memory_bytes() > self.pressure_fraction * self.memory_limit_bytes
        self._turn = (self._turn + 1) % 6
        op = choose(
            self.candidate_ops(),
            memory_pressure=pressure,
            log_target_replay_bytes=self.log_target_replay_bytes,
            prefer_gc=self._turn % 3 == 0,
            prefer_delta=_DELTA_TURNS.get(self._turn),
        )
        if op is None:
            return None
        op.run()
        with self._wake:
            self._wake.notify_all()
        return op

    def record(self, rec: MaintenanceRecord) -> None:
        self._records.append(rec)

    def history(self) -> list[MaintenanceRecord]:
        """What ran, oldest first (at most the last ``history`` records)."""
        return list(self._records)

    # -- back-pressure ----------------------------------------------------------------------------
    def throttle(self) -> None:
        """Called before each write: wait while memory is above the limit.

        Summing memory looks at every rowset of every tablet: too much to do before
        every write of a tablet with hundreds of rowsets (2-3% of a sustained writer's
        time). So a sum that finds memory under the limit grants half the headroom as
        credit; writes report what they added to the memory stores (``charge``), and
        the next writes skip the sum while credit remains, for at most ``CREDIT_S``
        and under the same limit.
        As without the credit, memory passes the limit by at most what the writes
        admitted at once add."""
        limit = self.memory_limit_bytes
        with self._credit_lock:
            if (
                self._credit > 0
                and time.monotonic() < self._credit_until
                and limit == self._credit_limit
            ):
                return
            spent = self._spent
        used = self.memory_bytes()
        if used <= limit:
            with self._credit_lock:
                # writes that landed while memory was summed spend the new credit too
                self._credit = (limit - used) // 2 - (self._spent - spent)
                self._credit_until = time.monotonic() + CREDIT_S
                self._credit_limit = limit
            return
        with self._credit_lock:
            self._credit = 0
        deadline = time.monotonic() + self.write_wait_s
        while self.memory_bytes() > self.memory_limit_bytes:
            if not self.enabled or self._thread is None:
                if self.run_once() is None:
                    return  # nothing left to flush: let the write through
                continue
            with self._wake:
                self._wake.notify_all()
                self._wake.wait(0.05)
            if time.monotonic() > deadline:
                raise OperationalError(
                    f"memory limit of {self.memory_limit_bytes} bytes exceeded for "
                    f"{self.write_wait_s:g} s: flushes are not keeping up"
                )

    def charge(self, nbytes: int) -> None:
        """A write added ``nbytes`` to the memory stores: spent from the credit
        ``throttle`` grants."""
        with self._credit_lock:
            self._spent += nbytes
            self._credit -= nbytes
