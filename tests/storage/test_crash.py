"""Crash tests with real processes: a writer subprocess applies random batches with the
``batch`` fsync policy and acknowledges each; the test SIGKILLs it at random moments
(including during flushes and delta flushes), reopens the tablet and checks that every
acknowledged batch is there, no batch is partly there, and time travel to the
acknowledged timestamps answers as before the crash."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from kudusql.storage.tablet.tablet import Tablet
from tests.support import crash_writer as cw
from tests.support.model import ModelColumn, TabletModel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _state(t: Tablet, snapshot: int | None = None) -> dict[tuple[Any, ...], dict[str, Any]]:
    out = {}
    for r in t.scan(snapshot=snapshot).read_all().to_pylist():
        out[(r["k"],)] = {"v": r["v"], "s": r["s"]}
    return out


def _model_after(model: TabletModel, seed: int, batch_id: int, ts: int) -> TabletModel:
    ops, rows, present = cw.batch(seed, batch_id)
    model.apply(ts, ops, rows, present)
    return model


def _copy(m: TabletModel) -> TabletModel:
    c = TabletModel(m.key_names, m.columns)
    c.rows = {k: dict(v) for k, v in m.rows.items()}
    c.history = list(m.history)
    return c


def run_crashes(tmp_path: Any, kills: int, seed: int) -> None:
    path = str(tmp_path / "tablet")
    model = TabletModel(["k"], [ModelColumn("v"), ModelColumn("s")])
    acked_ts: dict[int, int] = {}
    next_batch = 0
    rng = random.Random(seed)
    env = dict(os.environ, PYTHONPATH=ROOT)
    for _ in range(kills):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.crash_writer", path, str(next_batch), str(seed)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "READY", (line, proc.stderr.read() if proc.stderr else "")
        time.sleep(rng.uniform(0.02, 0.4))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        assert "Traceback" not in err, err
        acks = [ln.split() for ln in out.splitlines() if ln.startswith("ACK")]
        for _, b, ts in acks:
            assert int(b) == next_batch
            model = _model_after(model, seed, next_batch, int(ts))
            acked_ts[next_batch] = int(ts)
            next_batch += 1
        t = Tablet.open(path, cw.OPTIONS)
        try:
            got = _state(t)
            if got != model.rows:
                # The batch in flight when the process died may have become durable
                # without being acknowledged: then all of it must be there.
                maybe = _model_after(_copy(model), seed, next_batch, t.latest_timestamp())
                assert got == maybe.rows, "state is neither before nor after the in-flight batch"
                model = _model_after(model, seed, next_batch, t.latest_timestamp() - 1)
                next_batch += 1
            for b in rng.sample(sorted(acked_ts), min(5, len(acked_ts))):
                assert _state(t, acked_ts[b] + 1) == model.state_at(acked_ts[b] + 1), b
        finally:
            t.close()


def test_sigkill_writer_25_times(tmp_path: Any) -> None:
    run_crashes(tmp_path, kills=25, seed=7)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_sigkill_writer_many_times(tmp_path: Any, seed: int) -> None:
    run_crashes(tmp_path, kills=60, seed=100 + seed)
