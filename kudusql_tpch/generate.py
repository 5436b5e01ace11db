"""``generate``: the eight TPC-H tables as Parquet from ``tpchgen-cli``, cached per scale
factor in ``<data dir>/sf<N>/<table>.parquet``.

The generator is deterministic, so tables generated at different times (or by the
shell's ``\\load tpch``, which shares the default cache directory) agree. Each missing
table is generated on its own into a temporary directory and moved into place, so an
interrupted run never leaves a half-written file behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq

from kudusql.shell.tpch import cache_dir, find_tpchgen
from kudusql_tpch.errors import TpchError
from kudusql_tpch.progress import Progress
from kudusql_tpch.spec import TPCH_KEYS, expected_rows, sf_label

#: Parquet megabytes tpchgen-cli writes at SF 1 (for the progress bar).
SF1_PARQUET_MB = 361.0
INSTALL_HINT = "pip install tpchgen-cli (or pip install -e '.[tpch]')"


def tpchgen_path() -> str:
    """The ``tpchgen-cli`` executable (``kudusql.shell.tpch.find_tpchgen``)."""
    found = find_tpchgen()
    if found is None:
        raise TpchError(f"tpchgen-cli not found: {INSTALL_HINT}")
    return found


def default_data_dir() -> Path:
    """``$KUDUSQL_TPCH_DATA``, else the kudusql cache (``$KUDUSQL_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/kudusql`` or ``~/.cache/kudusql``) + ``/tpch``: the directory
    the shell's ``\\load tpch`` fills too."""
    env = os.environ.get("KUDUSQL_TPCH_DATA")
    if env:
        return Path(env)
    return cache_dir() / "tpch"


def default_results_dir() -> Path:
    """The kudusql cache (as ``default_data_dir``) + ``/tpch-results``."""
    return cache_dir() / "tpch-results"


def data_path(data_dir: Path, sf: float) -> Path:
    """Where the Parquet files of ``sf`` live under ``data_dir``."""
    return data_dir / f"sf{sf_label(sf)}"


def parquet_files(out: Path) -> dict[str, Path]:
    return {t: out / f"{t}.parquet" for t in TPCH_KEYS}


def missing_tables(out: Path) -> list[str]:
    return [t for t, p in parquet_files(out).items() if not p.exists()]


def parquet_rows(out: Path) -> dict[str, int]:
    """Rows per table, from the Parquet footers."""
    return {t: pq.ParquetFile(p).metadata.num_rows for t, p in parquet_files(out).items()}


def generate_tpch(sf: float, out: Path, *, progress: bool | None = None) -> Path:
    """``out`` holding ``<table>.parquet`` for the 8 TPC-H tables at ``sf``; tables
    missing there are generated with ``tpchgen-cli``."""
    if sf <= 0:
        raise TpchError(f"the scale factor must be positive, got {sf:g}")
    missing = missing_tables(out)
    if not missing:
        return out
    exe = tpchgen_path()
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f"tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    cmd = [exe, "parquet", "-s", sf_label(sf), "--output-dir", str(tmp)]
    cmd += ["--tables", ",".join(missing), "--quiet"]
    share = sum(expected_rows(t, sf) for t in missing) / sum(
        expected_rows(t, sf) for t in TPCH_KEYS
    )
    total_mb = max(0.05, SF1_PARQUET_MB * sf * share)
    label = f"generate SF {sf_label(sf)}"
    try:
        with Progress(label, total_mb, "MB", enabled=progress) as bar:
            some = len(missing) < len(TPCH_KEYS)
            bar.note(",".join(missing) if some else "all tables")
            with subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            ) as proc:
                while proc.poll() is None:
                    time.sleep(0.2)
                    written = sum(f.stat().st_size for f in tmp.iterdir() if f.is_file())
                    bar.update(min(written / 1e6, total_mb * 0.99) - bar.n)
                err = proc.stderr.read() if proc.stderr is not None else ""
            if proc.returncode != 0:
                detail = err.strip() or f"exit status {proc.returncode}"
                raise TpchError(f"tpchgen-cli failed: {detail}\n  {' '.join(cmd)}")
            for t in missing:
                os.replace(tmp / f"{t}.parquet", out / f"{t}.parquet")
            bar.update(bar.total - bar.n)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
