"""Shared benchmark machinery: configuration, timing, peak RSS, profiling and reporting.

A benchmark module defines ``NAME``, a docstring and ``run(cfg) -> Result``. A
``Result`` holds rows of (metric, ours, rival, goal); the runner prints them as a table
and writes them as JSON to ``benchmarks/results/<name>.json``.
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import json
import os
import platform
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass
class Config:
    """Command-line settings shared by every benchmark."""

    sf: float = 1.0
    #: Row count override (meaning depends on the benchmark; None = its default).
    rows: int | None = None
    #: Timed repetitions of each measurement (None = the benchmark's default).
    reps: int | None = None
    #: Run cProfile over one extra repetition and keep the top entries.
    profile: bool = False
    #: Directory for temporary tablets and databases (None = the system default).
    tmpdir: str | None = None
    seed: int = 42

    def repetitions(self, default: int) -> int:
        return self.reps if self.reps is not None else default


@dataclass
class Goal:
    """A pass criterion: ``ours / rival <= max_ratio`` or ``ours < max_value``."""

    max_ratio: float | None = None
    max_value: float | None = None

    def check(self, ours: float, rival: float | None) -> bool:
        if self.max_ratio is not None:
            return rival is not None and rival > 0 and ours / rival <= self.max_ratio
        if self.max_value is not None:
            return ours < self.max_value
        return True

    def text(self, unit: str) -> str:
        if self.max_ratio is not None:
            return f"<= {self.max_ratio:g}x"
        if self.max_value is not None:
            return f"< {self.max_value:g} {unit}"
        return ""


@dataclass
class Row:
    """One line of a result table. ``goal`` None means informational (no PASS/MISS)."""

    metric: str
    ours: float
    rival: float | None
    unit: str = "s"
    goal: Goal | None = None
    ours_runs: list[float] = field(default_factory=list)
    rival_runs: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        if self.rival is None or self.rival == 0:
            return None
        return self.ours / self.rival

    @property
    def passed(self) -> bool | None:
        return None if self.goal is None else self.goal.check(self.ours, self.rival)


@dataclass
class Result:
    name: str
    title: str
    rival: str
    rows: list[Row] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    profiles: dict[str, str] = field(default_factory=dict)

    def add(
        self,
        metric: str,
        ours: list[float] | float,
        rival: list[float] | float | None,
        *,
        unit: str = "s",
        goal: Goal | None = None,
        stat: str = "best",
    ) -> Row:
        """Add a row from raw runs; ``stat`` picks ``best`` (min) or ``median`` of them."""
        ours_runs = ours if isinstance(ours, list) else [ours]
        rival_runs = [] if rival is None else rival if isinstance(rival, list) else [rival]
        row = Row(
            metric,
            _stat(ours_runs, stat),
            _stat(rival_runs, stat) if rival_runs else None,
            unit,
            goal,
            ours_runs,
            rival_runs,
        )
        self.rows.append(row)
        return row

    # -- output ------------------------------------------------------------------------------
    def format(self) -> str:
        head = ["metric", "ours", "rival", "ratio", "goal", ""]
        lines = [head]
        for r in self.rows:
            passed = r.passed
            lines.append(
                [
                    r.metric,
                    fmt_value(r.ours, r.unit),
                    "-" if r.rival is None else fmt_value(r.rival, r.unit),
                    "-" if r.ratio is None else f"{r.ratio:.2f}x",
                    r.goal.text(r.unit) if r.goal else "",
                    "" if passed is None else ("PASS" if passed else "MISS"),
                ]
            )
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        out = [f"== {self.name}: {self.title}", f"   rival: {self.rival}"]
        for j, line in enumerate(lines):
            cells = [
                c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(line)
            ]
            out.append("   " + "  ".join(cells).rstrip())
            if j == 0:
                out.append("   " + "  ".join("-" * w for w in widths))
        for k, v in self.info.items():
            out.append(f"   {k}: {v}")
        out.extend(f"   note: {n}" for n in self.notes)
        return "\n".join(out)

    def to_json(self, cfg: Config) -> dict[str, Any]:
        rows = []
        for r in self.rows:
            d = asdict(r)
            d["goal"] = r.goal.text(r.unit) if r.goal else None
            d["ratio"] = r.ratio
            d["passed"] = r.passed
            rows.append(d)
        return {
            "name": self.name,
            "title": self.title,
            "rival": self.rival,
            "config": asdict(cfg),
            "machine": machine_info(),
            "rows": rows,
            "info": self.info,
            "notes": self.notes,
            "profiles": self.profiles,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

    def save(self, cfg: Config) -> Path:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        path = RESULTS_DIR / f"{self.name}.json"
        path.write_text(json.dumps(self.to_json(cfg), indent=2, default=str) + "\n")
        return path


def _stat(runs: list[float], stat: str) -> float:
    if stat == "best":
        return min(runs)
    if stat == "median":
        return statistics.median(runs)
    raise ValueError(stat)


def fmt_value(v: float, unit: str) -> str:
    if unit == "s":
        return f"{v:.3f} s" if v < 100 else f"{v:.1f} s"
    if unit == "µs":
        return f"{v:.1f} µs" if v < 1000 else f"{v:,.0f} µs"
    if unit == "MiB":
        return f"{v:,.0f} MiB" if v >= 100 else f"{v:.2f} MiB"
    return f"{v:g} {unit}"


def machine_info() -> dict[str, Any]:
    import duckdb
    import numpy
    import pyarrow

    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        head = ""
    return {
        "git_head": head or None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "pyarrow": pyarrow.__version__,
        "numpy": numpy.__version__,
        "duckdb": duckdb.__version__,
    }


# -- measurement --------------------------------------------------------------------------------
def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Run ``fn`` once; return (seconds, its result)."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def repeat(
    fn: Callable[[], Any],
    reps: int,
    *,
    setup: Callable[[], Any] | None = None,
    teardown: Callable[[], Any] | None = None,
) -> list[float]:
    """Time ``fn`` ``reps`` times; ``setup``/``teardown`` run untimed around each run."""
    runs = []
    for _ in range(reps):
        if setup is not None:
            setup()
        t, _ = timed(fn)
        runs.append(t)
        if teardown is not None:
            teardown()
    return runs


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter (Linux ``clear_refs``); False if unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mib() -> float:
    """Peak resident set size (since the last ``reset_peak_rss``, where supported), MiB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def current_rss_mib() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


@contextlib.contextmanager
def peak_rss(into: dict[str, Any], key: str) -> Iterator[None]:
    """Record the peak RSS reached inside the block, and its rise over the RSS at entry,
    as ``into[key]`` (a string, MiB); skipped where the peak cannot be reset."""
    base = current_rss_mib()
    ok = reset_peak_rss()
    yield
    if ok:
        peak = peak_rss_mib()
        into[key] = f"{peak:,.0f} MiB (+{peak - base:,.0f} over the {base:,.0f} MiB before)"


_WAITS = {
    "<method 'acquire' of '_thread.lock' objects>",
    "<method 'get' of '_queue.SimpleQueue' objects>",
    "<method 'acquire' of '_thread.RLock' objects>",
}


def profile(fn: Callable[[], Any], top: int = 15) -> str:
    """Run ``fn`` under cProfile; return the ``top`` entries by cumulative time.

    Threads started while ``fn`` runs (the tablet's column-writer and scan pool) are
    profiled too and merged in, so their work shows up next to the main thread's waits
    (cumulative times of the threads add up and can exceed the wall time).
    """
    profs: list[cProfile.Profile] = []

    def start_in_thread(*_: object) -> None:
        p = cProfile.Profile()
        profs.append(p)
        p.enable()

    main = cProfile.Profile()
    threading.setprofile(start_in_thread)
    main.enable()
    try:
        fn()
    finally:
        main.disable()
        threading.setprofile(None)  # type: ignore[arg-type]
    buf = io.StringIO()
    stats = pstats.Stats(main, stream=buf)
    for p in profs:
        p.disable()
        stats.add(p)
    parts = [f"({len(profs)} worker thread(s) merged)"]
    for key in ("cumulative", "tottime"):
        buf.seek(0)
        buf.truncate()
        if key == "tottime":
            # Threads blocked on each other are not work: leave the waits out of this list.
            waits = [f for f in stats.stats if f[2] in _WAITS]  # type: ignore[attr-defined]
            for f in waits:
                del stats.stats[f]  # type: ignore[attr-defined]
            if waits:
                parts.append("(waits on locks and queues left out below)")
        stats.sort_stats(key).print_stats(top)
        text = buf.getvalue()
        # Drop the preamble up to the column header.
        start = text.find("   ncalls")
        parts.append(f"-- top {top} by {key} time --")
        parts.append((text[start:] if start >= 0 else text).strip("\n"))
    text = "\n".join(parts) + "\n"
    # Keep paths short.
    for prefix in (str(Path(__file__).resolve().parent.parent), sys.prefix, sys.base_prefix):
        text = text.replace(prefix + os.sep, "")
    return text


@contextlib.contextmanager
def workdir(cfg: Config, prefix: str) -> Iterator[Path]:
    """A temporary directory removed afterwards."""
    d = tempfile.mkdtemp(prefix=f"kudusql-bench-{prefix}-", dir=cfg.tmpdir)
    try:
        yield Path(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def fresh_dir(parent: Path, name: str) -> Path:
    """``parent/name``, removed first if it exists (so a tablet can be created there)."""
    p = parent / name
    shutil.rmtree(p, ignore_errors=True)
    return p


def log(msg: str) -> None:
    print(f"  .. {msg}", file=sys.stderr, flush=True)
