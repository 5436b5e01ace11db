"""A writer process for tests of read-only views: runs SQL sent on standard input.

Usage: ``python -m tests.support.sql_writer DIR`` (``Writer`` starts one and talks to it)

Each input line is JSON: ``{"sql": "..."}`` runs a statement and answers ``ok`` (or
``error <message>``); ``{"kill_at": {"path_contains": "...", "skip": n}}`` arms a
SIGKILL of this process at the (n+1)-th file write whose path contains the text
(``storage/fs/faults.py``), answering ``armed``. End of input closes the database.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import kudusql
from kudusql.storage.fs import faults
from tests.support.timing import scaled

ROOT = Path(__file__).resolve().parents[2]


class Writer:
    """The writer process: ``sql`` runs a statement there and waits for its answer."""

    def __init__(self, path: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.sql_writer", path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )

    def send(self, cmd: dict[str, Any]) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def sql(self, text: str) -> None:
        answer = self.send({"sql": text})
        assert answer == "ok", answer

    def killed_by(self, text: str) -> None:
        """Run ``text``, which the armed fault kills the process in the middle of."""
        assert self.send({"sql": text}) == ""  # no answer: the process died
        assert self.proc.wait(timeout=scaled(60)) == -9

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if self.proc.poll() is None:
            self.proc.stdin.close()  # the writer closes its database and exits
            self.proc.wait(timeout=scaled(60))
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):  # a dead writer's broken pipe
                pipe.close()


def main() -> None:
    conn = kudusql.connect(sys.argv[1], maintenance=False)
    for line in sys.stdin:
        cmd = json.loads(line)
        if "kill_at" in cmd:
            at = cmd["kill_at"]
            faults.inject("write", path_contains=at["path_contains"], skip=at["skip"], kill=True)
            print("armed", flush=True)
            continue
        try:
            conn.execute(cmd["sql"])
        except kudusql.Error as e:
            print(f"error {e}", flush=True)
        else:
            print("ok", flush=True)
    conn.close()


if __name__ == "__main__":
    main()
