"""The dependency floors are true: ``requirements-floors.txt`` pins exactly the lower bound
of every runtime dependency in ``pyproject.toml`` (``make test-floors`` installs those pins
and runs a smoke subset of the suite on them), and the floors venv stays without the
optional packages that the engine must not need."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _release(version: str) -> tuple[int, ...]:
    """``"30.23"`` and ``"30.23.0"`` compare equal."""
    parts = [int(p) for p in version.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def lower_bounds() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = {}
    for req in project["dependencies"]:
        floor = re.search(r">=\s*([0-9.]+)", req)
        assert floor is not None, f"runtime dependency without a lower bound: {req}"
        out[_name(req)] = floor.group(1)
    return out


def floor_pins(name: str = "requirements-floors.txt") -> dict[str, str]:
    out = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"requirements-floors.txt pins with ==: {line}"
            out[_name(name)] = version
    return out


def test_floors_pin_every_lower_bound() -> None:
    bounds, pins = lower_bounds(), floor_pins()
    assert sorted(pins) == sorted(bounds), "requirements-floors.txt and pyproject disagree"
    for name, floor in bounds.items():
        assert _release(pins[name]) == _release(floor), f"{name}: pin {pins[name]} != >={floor}"


def test_extras_floors_pin_the_optional_lower_bounds() -> None:
    """The optional packages' pins are the lower bounds of their extras (pandas: of the
    dev extra); numpy is pinned there only to keep the runtime floor."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = [r for reqs in project["optional-dependencies"].values() for r in reqs]
    bounds = {}
    for req in optional:
        floor = re.search(r">=\s*([0-9.]+)", req)
        if floor is not None:
            bounds[_name(req)] = floor.group(1)
    pins = floor_pins("requirements-floors-extras.txt")
    assert {"sqlalchemy", "polars", "pandas"} <= set(pins)
    for name, version in pins.items():
        expected = lower_bounds()[name] if name == "numpy" else bounds[name]
        assert _release(version) == _release(expected), f"{name}: pin {version} != >={expected}"


def test_release_normalises_trailing_zeros() -> None:
    assert _release("30.23") == _release("30.23.0")
    assert _release("20") == _release("20.0.0")
    assert _release("2.0.1") != _release("2.0")
