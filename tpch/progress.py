"""A progress bar on standard error, without a dependency.

On a terminal the bar is redrawn in place (at most ten times a second); elsewhere (a log
file, CI) a line is written every 30 seconds and when done, so logs stay short.
``quiet`` silences it.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

WIDTH = 28
#: Off a terminal, a progress line at most this often (the finished line always).
LOG_EVERY_S = 30.0


def _fmt_count(n: float, unit: str) -> str:
    if unit == "MB":
        return f"{n:,.1f}" if n < 100 else f"{n:,.0f}"
    if unit == "rows":
        if n >= 1_000_000:
            return f"{n / 1_000_000:.1f}M"
        if n >= 10_000:
            return f"{n / 1000:.0f}k"
    return f"{n:,.0f}"


def format_seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(s + 0.5), 60)
    return f"{m}m{sec:02d}s"


class Progress:
    """``with Progress("load", total, "rows") as p: p.advance(n, note="lineitem")``."""

    default_enabled = True  # the CLI's --quiet turns every bar off

    def __init__(
        self,
        label: str,
        total: float,
        unit: str = "",
        stream: TextIO | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.enabled = Progress.default_enabled if enabled is None else enabled
        self.label = label
        self.total = max(float(total), 1e-9)
        self.unit = unit
        self.done = 0.0
        self.note = ""
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.perf_counter()
        self._last_draw = 0.0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._closed = False

    def __enter__(self) -> Progress:
        self._draw(force=True)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(failed=exc_type is not None)

    def advance(self, n: float = 1, note: str | None = None) -> None:
        self.done = min(self.total, self.done + n)
        if note is not None:
            self.note = note
        self._draw()

    def set_note(self, note: str) -> None:
        self.note = note
        self._draw()

    def line(self) -> str:
        frac = min(1.0, self.done / self.total)
        filled = int(frac * WIDTH)
        bar = "#" * filled + "-" * (WIDTH - filled)
        elapsed = time.perf_counter() - self.start
        parts = [f"{self.label:<10} [{bar}] {frac * 100:5.1f}%"]
        if self.unit:
            total = _fmt_count(self.total, self.unit)
            parts.append(f"{_fmt_count(self.done, self.unit)}/{total} {self.unit}")
        parts.append(format_seconds(elapsed))
        if 0 < frac < 1 and elapsed > 1:
            parts.append(f"ETA {format_seconds(elapsed * (1 - frac) / frac)}")
        if self.note:
            parts.append(self.note)
        return "  ".join(parts)

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not self.tty:  # a log: a line every LOG_EVERY_S, no redrawing
            if now - self._last_draw >= LOG_EVERY_S and self.done < self.total:
                if self._last_draw:
                    self.stream.write(self.line() + "\n")
                    self.stream.flush()
                self._last_draw = now
            return
        if not force and now - self._last_draw < 0.1 and self.done < self.total:
            return
        self._last_draw = now
        self.stream.write("\r\x1b[2K" + self.line())
        self.stream.flush()

    def close(self, failed: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        if not self.enabled:
            return
        if failed:
            self.note = (self.note + " FAILED").strip()
        text = self.line()
        self.stream.write(("\r\x1b[2K" + text if self.tty else text) + "\n")
        self.stream.flush()


def log(msg: str) -> None:
    """A status line on standard error (silenced with the bars)."""
    if Progress.default_enabled:
        print(msg, file=sys.stderr, flush=True)
