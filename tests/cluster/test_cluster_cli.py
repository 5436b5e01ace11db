"""``kudusql cluster start|status|stop`` and ``kudusql master`` end to end, as a user
runs them (separate processes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kudusql.cluster.launcher import MiniCluster
from tests.support.timing import scaled

ROOT = Path(__file__).resolve().parents[2]


def kudusql(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "kudusql", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )


def test_cluster_start_status_stop(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    try:
        started = kudusql("cluster", "start", str(directory), "--tservers", "1")
        assert started.returncode == 0, started.stderr
        address = started.stdout.strip()
        assert address.startswith("127.0.0.1:")
        assert (directory / "secret").stat().st_mode & 0o077 == 0
        status = kudusql("cluster", "status", str(directory))
        assert status.returncode == 0, status.stderr
        lines = status.stdout.splitlines()
        assert lines[0] == f"master {address} running"
        assert sum(" yes " in line for line in lines[2:]) == 1
        check = kudusql("cluster", "ksck", str(directory))
        assert check.returncode == 0, check.stdout + check.stderr
        assert check.stdout.strip().endswith("OK: 0 tablets, 0 not healthy, 0 other problems")
        again = kudusql("cluster", "start", str(directory))
        assert again.returncode == 1 and "already running" in again.stderr
        stopped = kudusql("cluster", "stop", str(directory))
        assert stopped.returncode == 0, stopped.stderr
        assert MiniCluster(directory).running() == []
        for log in ("master/master.log", "ts-0/tserver.log"):
            text = (directory / log).read_text()
            assert "stopped" in text and "Traceback" not in text
        down = kudusql("cluster", "status", str(directory))
        assert down.returncode == 1 and f"master {address} down" in down.stdout
    finally:
        MiniCluster(directory).stop()


def test_daemons_refuse_a_public_bind_without_a_secret(tmp_path: Path) -> None:
    for command in (["master"], ["tserver", "--master", "127.0.0.1:1"]):
        result = kudusql(*command, "--dir", str(tmp_path / command[0]), "--bind", "0.0.0.0:0")
        assert result.returncode == 1
        assert result.stderr.startswith(f"kudusql {command[0]}: ") and "secret" in result.stderr
        assert "Traceback" not in result.stderr


def test_cluster_commands_without_a_cluster(tmp_path: Path) -> None:
    result = kudusql("cluster", "status", str(tmp_path))
    assert result.returncode == 1 and "no cluster" in result.stderr
    check = kudusql("cluster", "ksck", str(tmp_path))
    assert check.returncode == 1 and "no cluster" in check.stderr
    bare = kudusql("cluster", "ksck")
    assert bare.returncode == 2 and "DIR or --master" in bare.stderr
