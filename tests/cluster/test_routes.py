"""The test-only route table a server dials its peers through (``cluster/routes.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kudusql.cluster.routes import ROUTES_ENV, route_for


def test_without_the_variable_every_address_is_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ROUTES_ENV, raising=False)
    (tmp_path / "routes.json").write_text(json.dumps({"a:1": "b:2"}))
    assert route_for(str(tmp_path))("a:1") == "a:1"


def test_the_table_is_read_at_each_dial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ROUTES_ENV, "routes.json")
    route = route_for(str(tmp_path))
    assert route("a:1") == "a:1"  # no table yet
    (tmp_path / "routes.json").write_text(json.dumps({"a:1": "127.0.0.1:9"}))
    assert route("a:1") == "127.0.0.1:9"
    assert route("c:3") == "c:3"
