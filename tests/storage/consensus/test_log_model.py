"""Random append / truncate / sync / GC / reopen / crash sequences against a model list.

The model is the list of entries the log should hold and how many of them are synced.
Segments are tiny so that appends roll often. A *crash* closes the log without syncing
and cuts every segment anywhere between what was fsynced and its end (sometimes adding
zeros to the last, as a torn write can): after it, the log must hold at least the synced
prefix, only the model's entries (never one that was truncated), and open cleanly.
"""

from __future__ import annotations

import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from kudusql.consensus.messages import ReplicateMsg
from kudusql.storage.consensus import ConsensusLog
from tests.storage.consensus.entries import entry

ALL = 1 << 40
SEGMENT = 700
CACHE = 400

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 12), st.booleans(), st.integers(0, 120)),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("sync")),
        st.tuples(st.just("gc"), st.floats(0, 1)),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("crash"), st.floats(0, 1), st.booleans()),
        st.tuples(st.just("read"), st.floats(0, 1), st.integers(1, 2000)),
    ),
    max_size=40,
)


class Model:
    def __init__(self) -> None:
        self.entries: list[ReplicateMsg] = []  # from index 1, GCed ones included
        self.synced = 0
        self.term = 1
        self.floor = 0  # the highest retention index GC was given

    @property
    def last(self) -> int:
        return len(self.entries)


def check(log: ConsensusLog, model: Model) -> None:
    # GC keeps every entry at or above its retention index (and the last segment).
    assert log.first_index <= max(model.floor, 1)
    assert log.last_opid().index == model.last
    if model.entries:
        assert log.last_opid() == model.entries[-1].id
    got = log.entries(log.first_index, ALL, ALL)
    assert got == model.entries[log.first_index - 1 :]


def crash(log: ConsensusLog, cut: float, zeros: bool) -> None:
    """Power loss: every segment keeps what was fsynced and any part of the rest."""
    segments = log.segments()
    log.close()
    for seg in segments:
        if seg.synced_size == seg.size and seg is not segments[-1]:
            continue
        size = seg.synced_size + int((seg.size - seg.synced_size) * cut)
        with open(seg.path, "r+b") as f:
            f.truncate(size)
            if zeros:
                f.seek(size)
                f.write(bytes(37))


def run_ops(directory: str, steps: list[tuple[object, ...]]) -> None:
    model = Model()
    log = ConsensusLog.open(directory, segment_size=SEGMENT, cache_bytes=CACHE)
    try:
        for op in steps:
            kind = op[0]
            if kind == "append":
                _, n, new_term, size = op
                if new_term:
                    model.term += 1
                batch = [entry(model.term, model.last + 1 + i, int(size)) for i in range(int(n))]  # type: ignore[call-overload]
                log.append(batch)
                model.entries += batch
            elif kind == "truncate":
                low = log.first_index - 1
                k = low + int((model.last - low) * float(op[1]))  # type: ignore[arg-type]
                log.truncate_after(k)
                if k < model.last:
                    del model.entries[k:]
                    model.synced = k
                    model.term += 1  # the next leader's entries differ from the dropped ones
            elif kind == "sync":
                log.sync()
                model.synced = model.last
            elif kind == "gc":
                up_to = int(model.last * float(op[1]))  # type: ignore[arg-type]
                log.gc(up_to)
                model.floor = max(model.floor, up_to)
            elif kind == "reopen":
                log.close()
                log = ConsensusLog.open(directory, segment_size=SEGMENT, cache_bytes=CACHE)
                model.synced = model.last
            elif kind == "crash":
                crash(log, float(op[1]), bool(op[2]))  # type: ignore[arg-type]
                log = ConsensusLog.open(directory, segment_size=SEGMENT, cache_bytes=CACHE)
                last = log.last_opid().index
                assert model.synced <= last <= model.last
                del model.entries[last:]
                model.synced = last
            elif kind == "read":
                span = max(0, model.last - log.first_index + 1)
                lo = log.first_index + int(span * float(op[1]))  # type: ignore[arg-type]
                got = log.entries(lo, ALL, int(op[2]))  # type: ignore[call-overload]
                assert got == model.entries[lo - 1 : lo - 1 + len(got)]
                assert got or lo > model.last
            check(log, model)
    finally:
        log.close()


@settings(max_examples=int(os.environ.get("CLOG_EXAMPLES", "120")))
@given(ops)
def test_log_matches_the_model(steps: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        run_ops(os.path.join(d, "log"), steps)
