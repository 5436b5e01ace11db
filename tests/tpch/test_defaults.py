"""Where the TPC-H runner writes when it is not told: the kudusql cache, never the
working directory; and the README's first-use instructions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kudusql_tpch.cli import context, parser

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_go_to_the_cache_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUDUSQL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KUDUSQL_TPCH_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    ctx = context(parser().parse_args(["run", "--sf", "0.01"]))
    assert ctx.db == tmp_path / "cache" / "tpch-sf0.01.kudusql"
    assert ctx.out == tmp_path / "cache" / "tpch-results"
    shown = capsys.readouterr()
    assert str(ctx.out) in shown.out + shown.err  # the user is told where
    ctx = context(parser().parse_args(["run", "--out", "here", "--db", "d"]))
    assert (ctx.out, ctx.db) == (Path("here"), Path("d"))


def _markdown_files() -> list[Path]:
    skip = {".venv", "results", ".git"}
    return [p for p in ROOT.rglob("*.md") if not skip & set(p.relative_to(ROOT).parts)]


def test_no_document_links_outside_the_repository() -> None:
    link = re.compile(r"\]\(([^)#]+)")
    for doc in _markdown_files():
        for target in link.findall(doc.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+://", target):
                continue
            resolved = (doc.parent / target).resolve()
            assert resolved.is_relative_to(ROOT), f"{doc}: link to {target} leaves the repository"
        assert "../shared" not in doc.read_text(encoding="utf-8"), doc


def test_readme_installs_from_a_clone() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install 'kudusql[spark]'" not in text
    assert "pip install -e '.[spark]'" in text
