"""Start and stop ``rpc_test_server`` processes on ephemeral loopback ports."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.timing import scaled

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()


def start_server(
    workdir: Path,
    *,
    port: int = 0,
    secret_file: Path | None = None,
    tls_dir: Path | None = None,
    name: str = "server",
) -> ServerProcess:
    """A test server process, once it listens (its port is in its port file)."""
    port_file = workdir / f"{name}.port"
    port_file.unlink(missing_ok=True)
    log = workdir / f"{name}.log"
    command = [sys.executable, "-m", "tests.cluster.rpc_test_server"]
    command += ["--bind", f"127.0.0.1:{port}", "--port-file", str(port_file)]
    if secret_file is not None:
        command += ["--secret-file", str(secret_file)]
    if tls_dir is not None:
        command += ["--tls-dir", str(tls_dir)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("ab") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
    deadline = time.monotonic() + scaled(20)
    while not port_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"test server did not start: {log.read_text()}")
        time.sleep(0.02)
    return ServerProcess(process, int(port_file.read_text()), log)


@contextmanager
def running_server(workdir: Path, **kwargs: object) -> Iterator[ServerProcess]:
    server = start_server(workdir, **kwargs)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()
