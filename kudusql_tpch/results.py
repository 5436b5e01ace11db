"""The results file: one JSON document per scale factor (``<out>/sf<N>/results.json``)
that every command updates with its own section, with the machine, the versions and the
settings, so a run can be compared with another run (``report --baseline``) or another
machine.

Sections: ``load`` (loader, seconds and rows per table, DuckDB's native load),
``run`` (kudusql alone), ``check`` (answers against DuckDB over Parquet), ``compare``
(the three systems), ``micro``, ``mutation``; ``goals`` is derived from them.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from kudusql_tpch.run import DUCK_NATIVE, DUCK_PARQUET, KUDUSQL
from kudusql_tpch.spec import sf_label

FORMAT = 1
#: The goals of issue 9.
GEOMEAN_GOAL = 1.0
GEOMEAN_STRETCH = 0.8
LOAD_GOAL = 2.0


def results_dir(out: Path, sf: float) -> Path:
    return out / f"sf{sf_label(sf)}"


def memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "hostname": platform.node(),
        "load_average": _load_average(),
    }


def _load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages: other work on the machine skews timings."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def git_commit() -> str | None:
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
        )
    except OSError:
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def versions() -> dict[str, Any]:
    import duckdb
    import pyarrow
    import sqlglot

    import kudusql

    return {
        "python": sys.version.split()[0],
        "kudusql": kudusql.__version__,
        "kudusql_commit": git_commit(),
        "duckdb": duckdb.__version__,
        "pyarrow": pyarrow.__version__,
        "sqlglot": getattr(sqlglot, "__version__", None) or _version("sqlglot"),
        "numpy": _version("numpy"),
        "tpchgen-cli": _version("tpchgen-cli"),
        "pyspark": _version("pyspark"),
    }


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


def update(path: Path, sf: float, settings: dict[str, Any], **sections: Any) -> dict[str, Any]:
    """Merge ``sections`` into the results file at ``path`` (refreshing the machine,
    versions and settings, and the goals) and return the document."""
    data = read(path)
    if data.get("sf") not in (None, sf):
        data = {}  # another scale factor's file: start over
    data.update(
        {
            "format": FORMAT,
            "sf": sf,
            "updated": now(),
            "machine": machine(),
            "versions": versions(),
            "settings": {**data.get("settings", {}), **settings},
        }
    )
    data.update(sections)
    data["goals"] = goals(data)
    write(path, data)
    return data


def _answers(section: dict[str, Any] | None, system: str) -> tuple[int, int] | None:
    if not section:
        return None
    a = section.get("answers", {}).get(system)
    return (int(a["correct"]), int(a["checked"])) if a else None


def goals(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The goals of issue 9, each with its value, target and whether it is met (None:
    not measured in this file)."""
    sf = sf_label(float(data.get("sf") or 0))
    out: list[dict[str, Any]] = []
    ans = _answers(data.get("check"), KUDUSQL) or _answers(data.get("compare"), KUDUSQL)
    out.append(
        {
            "goal": f"22 of 22 answers correct at SF {sf}",
            "value": f"{ans[0]} of {ans[1]}" if ans else None,
            "target": "22 of 22",
            "met": (ans[0] == ans[1] == 22) if ans else None,
        }
    )
    ratio = data.get("compare", {}).get("geomean_ratio", {})
    parquet = ratio.get(DUCK_PARQUET)
    out.append(
        {
            "goal": "geomean vs DuckDB over Parquet",
            "value": parquet,
            "target": f"<= {GEOMEAN_GOAL}x (stretch {GEOMEAN_STRETCH}x)",
            "met": None if parquet is None else parquet <= GEOMEAN_GOAL,
            "stretch_met": None if parquet is None else parquet <= GEOMEAN_STRETCH,
        }
    )
    native = ratio.get(DUCK_NATIVE)
    out.append(
        {
            "goal": "geomean vs DuckDB native (reported)",
            "value": native,
            "target": None,
            "met": None,
        }
    )
    load = data.get("load", {})
    lr = load.get("ratio_vs_duckdb_native")
    out.append(
        {
            "goal": f"{load.get('loader', 'arrow')} load vs DuckDB native load",
            "value": lr,
            "target": f"<= {LOAD_GOAL}x" if load.get("loader") == "arrow" else None,
            "met": (lr <= LOAD_GOAL) if lr is not None and load.get("loader") == "arrow" else None,
        }
    )
    return out
