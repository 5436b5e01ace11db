"""Owns the one-line progress display of long work on a terminal, drawn by tqdm.

``ProgressLine`` keeps one tqdm bar on the shell's error stream and redraws it in place
(cleared at the end): a bar when the fraction done is known, rows done, rate and ETA
when rows are counted, elapsed time and the Ctrl-C hint always. It shows nothing for
the first ``delay`` seconds, and nothing at all on a stream that is not a terminal, so
quick statements, scripts and pipes get clean output.
"""

from __future__ import annotations

from typing import TextIO

from tqdm import tqdm

_HINT = "{elapsed}  Ctrl-C cancels"
#: The line for each thing known: rows out of a total, a fraction, rows alone, nothing.
_ROWS = (
    "{desc}  |{bar:24}| {percentage:5.1f}%  {n_fmt}/{total_fmt}{unit}, {rate_fmt}  "
    "ETA {remaining}  " + _HINT
)
_FRACTION = "{desc}  |{bar:24}| {percentage:5.1f}%  " + _HINT
_COUNT = "{desc}  {n_fmt}{unit}, {rate_fmt}  " + _HINT
_ELAPSED = "{desc}  " + _HINT


class ProgressLine:
    def __init__(self, stream: TextIO, *, enabled: bool, delay: float = 0.5) -> None:
        # miniters=0 and mininterval=0: every call past the delay redraws (the shell
        # calls ten times a second), even when nothing moved but the clock. smoothing=0:
        # the rate is rows over elapsed time.
        self.bar = tqdm(
            file=stream,
            disable=not enabled,
            delay=delay,
            leave=False,
            dynamic_ncols=True,
            miniters=0,
            mininterval=0,
            smoothing=0,
            unit=" rows",
            unit_scale=True,
            bar_format=_ELAPSED,
        )

    def update(
        self,
        label: str,
        fraction: float | None = None,
        rows: int | None = None,
        total: int | None = None,
    ) -> None:
        bar = self.bar
        if bar.disable:
            return
        bar.set_description_str(label, refresh=False)
        n: float = bar.n
        if rows is not None and total:
            bar.total, n, bar.bar_format = total, min(rows, total), _ROWS
        elif fraction is not None:
            bar.total, n, bar.bar_format = 100, min(max(fraction, 0.0), 1.0) * 100, _FRACTION
        elif rows is not None:
            bar.total, n, bar.bar_format = None, rows, _COUNT
        else:
            bar.total, bar.bar_format = None, _ELAPSED
        bar.update(n - bar.n)

    def clear(self) -> None:
        self.bar.close()
