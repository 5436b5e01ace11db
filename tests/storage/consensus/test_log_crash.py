"""Crash tests with real processes: a writer subprocess (``log_writer``) is SIGKILLed at
a random moment, or at an exact durability point (a write, an fsync, a rename, a
directory fsync, a deletion), again and again on one log. After each kill the log opens,
holds every entry synced before the kill, holds no entry a durable truncation dropped,
and every entry it holds is the one written at its OpId. Also: the cmeta file, replaced
under kills at each of its durability points, is always the old one or the new one.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kudusql.consensus.raft_config import RaftConfig
from kudusql.consensus.raft_consensus import ConsensusMetadata, DataState
from kudusql.storage.consensus import ConsensusLog, ConsensusMetadataFile
from tests.storage.consensus.entries import matches

ROOT = Path(__file__).resolve().parents[3]
ALL = 1 << 40
POINTS = ["write", "fsync", "rename", "fsync_dir", "delete"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _kill_once(directory: str, rng: random.Random) -> list[str]:
    args = [sys.executable, "-m", "tests.storage.consensus.log_writer", directory]
    args.append(str(rng.randrange(1 << 30)))
    at_point = rng.random() < 0.5
    if at_point:
        args += [rng.choice(POINTS), str(rng.randint(0, 40))]
    lines: list[str] = []
    with subprocess.Popen(args, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True) as p:
        assert p.stdout is not None
        want = rng.randint(1, 40)
        deadline = time.monotonic() + 30
        while len(lines) < want and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break  # killed itself at its fault point
            lines.append(line.strip())
        p.send_signal(signal.SIGKILL)
        lines += [x.strip() for x in p.stdout.read().splitlines()]
        p.wait()
    assert p.returncode == -signal.SIGKILL, lines
    # No line at all: killed at a fault point while opening (so recovering) the log.
    return [x for x in lines if not x.startswith("OPEN")]


class Facts:
    """What the writers' output proves durable, across kills."""

    def __init__(self) -> None:
        self.index = 0  # every entry up to here is durable
        self.term: int | None = 0  # the term at ``index``, None if not known
        #: truncation index -> the lowest term an entry after it may have
        self.floors: dict[int, int] = {}

    def learn(self, lines: list[str]) -> None:
        for line in lines:
            kind, index, term = line.split()
            if kind == "SYNCED":
                self.index, self.term = int(index), int(term)
            elif kind == "TRUNCATING" and self.index > int(index):
                self.index, self.term = int(index), None
            elif kind == "TRUNC":
                k = int(index)
                for old in [f for f in self.floors if f >= k]:
                    del self.floors[old]
                self.floors[k] = int(term)

    def check(self, directory: str) -> None:
        with ConsensusLog.open(directory, create=False, segment_size=4096) as log:
            last = log.last_opid()
            got = log.entries(log.first_index, ALL, ALL)
            assert all(matches(m) for m in got)
            assert last.index >= self.index, (last, self.index)
            if self.term is not None:
                assert log.term_at(self.index) in (self.term, None)
            for k, term in self.floors.items():
                assert all(m.id.term >= term for m in got if m.id.index > k), (k, term)


def _kill_loop(tmp_path: Path, kills: int, seed: int) -> None:
    directory = str(tmp_path / "log")
    rng = random.Random(seed)
    facts = Facts()
    for _ in range(kills):
        facts.learn(_kill_once(directory, rng))
        if os.path.isdir(directory):
            facts.check(directory)


def test_killed_writer_keeps_synced_entries(tmp_path: Path) -> None:
    _kill_loop(tmp_path, 8, seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_killed_writer_keeps_synced_entries_many(tmp_path: Path, seed: int) -> None:
    _kill_loop(tmp_path, 30, seed=100 + seed)


CMETA_WRITER = """
import sys
from kudusql.consensus.raft_config import RaftConfig
from kudusql.consensus.raft_consensus import ConsensusMetadata, DataState
from kudusql.storage.consensus import ConsensusMetadataFile
from kudusql.storage.fs import faults
path, point, skip = sys.argv[1], sys.argv[2], int(sys.argv[3])
f = ConsensusMetadataFile(path)
term = f.load().current_term if f.exists() else 0
faults.inject(point, skip=skip, kill=True)
while True:
    term += 1
    config = RaftConfig.of_voters(["a", "b", "c"], term)
    f.store(ConsensusMetadata(term, "b", config, DataState.READY))
    print(term, flush=True)
"""


def test_cmeta_replace_under_kill_is_old_or_new(tmp_path: Path) -> None:
    path = str(tmp_path / "cmeta")
    cmeta = ConsensusMetadataFile(path)
    cmeta.store(ConsensusMetadata(0, None, RaftConfig.of_voters(["a"]), DataState.READY))
    for i, point in enumerate(["write", "fsync", "rename", "fsync_dir"]):
        before = cmeta.load().current_term
        done = subprocess.run(
            [sys.executable, "-c", CMETA_WRITER, path, point, str(i)],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == -signal.SIGKILL, done.stderr
        acked = [int(x) for x in done.stdout.split()]
        assert len(acked) == i
        meta = cmeta.load()
        # Killed while storing term before + i + 1: the old file or the new one.
        assert meta.current_term in (before + i, before + i + 1)
        voters = ["a", "b", "c"] if meta.current_term else ["a"]
        assert meta.committed_config == RaftConfig.of_voters(voters, meta.current_term)
