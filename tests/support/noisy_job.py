"""A compaction-worker job that writes a line on its process's stderr (what a stray
print or a Python warning in the worker would do), for the test that the parent sends
the worker's stderr to ``logging``."""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class NoisyJob:
    line: str

    def run(self) -> str:
        sys.stderr.write(self.line + "\n")
        sys.stderr.flush()
        return "ran"
