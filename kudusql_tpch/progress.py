"""The runner's progress bars and status lines on standard error, drawn by tqdm.

``Progress`` is a tqdm bar with the runner's look: on a terminal it is redrawn in place
(at most ten times a second); elsewhere (a log file, CI) at most every 30 seconds, so
logs stay short. ``log`` writes a status line above any bar. The CLI's ``--quiet``
(``quiet = True``) silences both.
"""

from __future__ import annotations

import sys

from tqdm import tqdm

#: Off a terminal, a progress line at most this often.
LOG_EVERY_S = 30.0
#: The CLI's ``--quiet``: no bars and no status lines.
quiet = False

_FORMAT = (
    "{desc:<10} |{bar:28}| {percentage:5.1f}%  {n_fmt}/{total_fmt}{unit}  {elapsed}  "
    "ETA {remaining}{postfix}"
)


class Progress(tqdm):  # type: ignore[misc]  # tqdm has no type information
    """``with Progress("load", total, "rows") as bar: bar.note("lineitem"); bar.update(n)``.
    ``enabled`` None: unless ``quiet``. The count never passes ``total``."""

    def __init__(
        self, label: str, total: float, unit: str = "", *, enabled: bool | None = None
    ) -> None:
        tty = sys.stderr.isatty()
        # miniters=0: every update and note checks the clock, so a bar redraws on time
        # however rarely it moves.
        super().__init__(
            desc=label,
            total=total,
            unit=f" {unit}" if unit else "",
            unit_scale=True,
            file=sys.stderr,
            disable=quiet if enabled is None else not enabled,
            miniters=0,
            mininterval=0.1 if tty else LOG_EVERY_S,
            dynamic_ncols=tty,
            bar_format=_FORMAT,
        )

    def update(self, n: float = 1) -> bool | None:
        return super().update(min(n, self.total - self.n))  # type: ignore[no-any-return]

    def note(self, text: str) -> None:
        """Show ``text`` after the figures (at the next redraw that is due)."""
        self.set_postfix_str(text, refresh=False)
        self.update(0)


def log(msg: str, *, always: bool = False) -> None:
    """A status line on standard error, above any bar; silenced with the bars unless
    ``always``."""
    if always or not quiet:
        tqdm.write(msg, file=sys.stderr)
