"""``kudusql --version``, ``--help`` and argument errors answer before the heavy modules
load: the command line parses its arguments first (``shell/cli.py``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.timing import scaled

HEAVY = ("duckdb", "pyarrow", "sqlglot", "prompt_toolkit", "numpy", "kudusql.storage")

PROBE = """
import runpy, sys
sys.argv = ["kudusql", *sys.argv[1:]]
try:
    runpy.run_module("kudusql", run_name="__main__")
except SystemExit as e:
    code = e.code
else:
    code = 0
loaded = sorted(m for m in sys.modules if m.startswith({heavy!r}))
sys.stderr.write("LOADED " + " ".join(loaded) + " EXIT " + str(code) + "\\n")
"""


def _run(*args: str) -> tuple[str, str]:
    heavy = tuple(h + "." for h in HEAVY) + HEAVY
    r = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=heavy), *args],
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    line = next(x for x in r.stderr.splitlines() if x.startswith("LOADED"))
    return r.stdout + r.stderr, line


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (("--version",), "kudusql 0.1.0"),
        (("--help",), "--read-only"),
        (("--format", "nope"), "invalid choice"),
    ],
)
def test_arguments_answer_without_loading_the_engine(args: tuple[str, ...], expect: str) -> None:
    out, loaded = _run(*args)
    assert expect in out
    assert loaded.startswith("LOADED  EXIT"), loaded
