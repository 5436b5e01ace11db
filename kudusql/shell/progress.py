"""Owns the one-line progress display of long work on a terminal.

``ProgressLine`` redraws a single line (``\\r``, cleared at the end) on an interactive
stream: a bar when the fraction done is known, rows done, rate and ETA when rows are
counted, elapsed time and the Ctrl-C hint always. On a stream that is not a terminal it
draws nothing, so scripts and pipes get clean output.
"""

from __future__ import annotations

import shutil
import time
from typing import TextIO

from kudusql.shell.formatting import format_seconds

BAR = 24


def _count(n: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return f"{n:.0f}"


class ProgressLine:
    def __init__(self, stream: TextIO, *, enabled: bool, delay: float = 0.5) -> None:
        self.stream = stream
        self.enabled = enabled
        self.delay = delay
        self.start = time.perf_counter()
        self.shown = False

    def text(
        self,
        label: str,
        fraction: float | None = None,
        rows: int | None = None,
        total: int | None = None,
    ) -> str:
        elapsed = time.perf_counter() - self.start
        parts = [label]
        if fraction is not None:
            fraction = min(max(fraction, 0.0), 1.0)
            full = int(fraction * BAR)
            parts.append("[" + "█" * full + "·" * (BAR - full) + f"] {fraction * 100:5.1f}%")
        if rows is not None:
            done = _count(rows) + (f"/{_count(total)}" if total else "")
            rate = rows / elapsed if elapsed > 0 else 0.0
            parts.append(f"{done} rows, {_count(rate)} rows/s")
            if total and rate > 0 and rows < total:
                parts.append(f"ETA {format_seconds((total - rows) / rate)}")
        parts.append(format_seconds(elapsed))
        parts.append("Ctrl-C cancels")
        return "  ".join(parts)

    def update(
        self,
        label: str,
        fraction: float | None = None,
        rows: int | None = None,
        total: int | None = None,
    ) -> None:
        if not self.enabled or time.perf_counter() - self.start < self.delay:
            return
        width = shutil.get_terminal_size((80, 24)).columns
        line = self.text(label, fraction, rows, total)[: max(10, width - 1)]
        self.stream.write("\r\x1b[2K" + line)
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self.shown = False
