"""Helpers for the shell tests: run the ``kudusql`` console script as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.timing import scaled

KUDUSQL = str(Path(sys.executable).parent / "kudusql")


def shell_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["KUDUSQL_HISTORY"] = str(tmp_path / "history")
    env["KUDUSQL_CACHE_DIR"] = str(tmp_path / "cache")
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"
    env.pop("PAGER", None)
    return env


@pytest.fixture
def run_cli(tmp_path: Path) -> Any:
    """``run_cli(*args, input=None, cwd=None)`` -> CompletedProcess (text)."""

    def run(*args: str, input: str | None = None, cwd: Path | None = None) -> Any:
        return subprocess.run(
            [KUDUSQL, *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            env=shell_env(tmp_path),
            cwd=cwd or tmp_path,
            timeout=scaled(60),
        )

    return run
