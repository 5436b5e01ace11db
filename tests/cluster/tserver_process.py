"""Start and stop real tablet server processes (``python -m kudusql.cluster.tserver``)
on ephemeral loopback ports, for the tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.timing import scaled

ROOT = Path(__file__).resolve().parents[2]


class TServerProcess:
    """A tablet server process over ``directory``; ``address`` once it listens."""

    def __init__(
        self,
        directory: Path,
        secret_file: Path | None = None,
        *,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
    ) -> None:
        """``env``: more environment variables (a fault point); ``args``: more flags."""
        self.directory = directory
        self.secret_file = secret_file
        self.extra_env = env
        self.extra_args = args
        address_file = directory / "tserver.address"
        address_file.unlink(missing_ok=True)
        command = [sys.executable, "-m", "kudusql.cluster.tserver", "--dir", str(directory)]
        if secret_file is not None:
            command += ["--secret-file", str(secret_file)]
        command += args or []
        directory.mkdir(parents=True, exist_ok=True)
        self.output = directory / "process.out"
        env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        with self.output.open("ab") as out:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
        deadline = time.monotonic() + scaled(30)
        while not address_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError(f"tablet server did not start: {self.output.read_text()}")
            time.sleep(0.02)
        self.address = address_file.read_text()

    def kill(self) -> None:
        """SIGKILL: what survives is what a crash leaves."""
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> int:
        """SIGTERM and wait; the exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode

    def restart(self) -> TServerProcess:
        return TServerProcess(
            self.directory, self.secret_file, env=self.extra_env, args=self.extra_args
        )
