"""`make run` / `kudusql [PATH]`: the embedded default database opens, twice."""

from __future__ import annotations

import io
from typing import Any

from kudusql.__main__ import main, run


def test_run_creates_then_reopens_the_default_database(tmp_path: Any) -> None:
    out = io.StringIO()
    run(str(tmp_path / "db"), out)
    text = out.getvalue()
    assert "created table 'demo' with 100000 rows" in text
    assert "NotFound: key not found" in text
    assert "'qty': 8" in text
    out2 = io.StringIO()
    run(str(tmp_path / "db"), out2)
    assert "created table" not in out2.getvalue()
    assert "rows now: 100000" in out2.getvalue()


def test_main_reports_errors_without_a_traceback(tmp_path: Any, capsys: Any) -> None:
    bad = tmp_path / "file"
    bad.write_text("not a directory")
    assert main([str(bad)]) == 1
    assert capsys.readouterr().err.startswith("error:")
