"""The runner's errors: a set-up problem (exit status 2, a message saying what to do)
and wrong answers (exit status 1, naming each query and its first difference)."""

from __future__ import annotations

from collections.abc import Sequence


class TpchError(RuntimeError):
    """Something the user must fix before the runner can go on (missing tool, no data,
    database not loaded). The message says how."""


class WrongAnswers(Exception):
    """One or more queries returned a wrong answer or failed."""

    def __init__(self, phase: str, failures: Sequence[str]) -> None:
        self.phase = phase
        self.failures = list(failures)
        lines = "\n".join(f"  {f}" for f in self.failures)
        super().__init__(f"{len(self.failures)} wrong answer(s) in {phase}:\n{lines}")
