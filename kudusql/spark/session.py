"""Spark session set-up for kudusql: the settings the data source needs.

``spark_session(master)`` builds (or returns) a session with the session time zone set
to UTC (kudusql timestamps are UTC), Arrow batches of 100,000 rows between the JVM and
the Python workers, and the Python workers running this interpreter. Spark's filter
pushdown for Python data sources (``spark.sql.python.filterPushdown.enabled``) stays as
the user set it (off by default): the source takes no filters either way, as Spark 4.3
reuses a relation's last pushed read plan for later queries (docs/SPARK.md).
``register(spark)`` registers the source explicitly (as ``kudusql``, ``kudu`` and
``org.apache.kudu.spark.kudu``) and applies the same settings to an existing session.

Spark's Python workers run ``spark.pyspark.python``, else ``$PYSPARK_PYTHON``, else
``python3`` from the PATH, whatever interpreter the driver runs: a driver started as
``.venv/bin/python job.py`` without an activated virtual environment gets workers on
the system's ``python3``, which cannot import kudusql, and Spark then reports only
``DATA_SOURCE_NOT_FOUND``. ``spark_session`` sets both ``spark.pyspark.python`` and
``spark.pyspark.driver.python`` to this interpreter (unless the user chose one), and
``check_worker_python`` (run by ``register`` and ``KuduContext``) turns the mismatch
into an error that says what to do.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

from pyspark.sql import SparkSession

from kudusql.common.errors import ProgrammingError

SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
}
#: Only for sessions built here: bigger Arrow batches between the JVM and Python
#: workers (the default, 10,000 rows, makes writes ~1.5x slower: integration notes).
BUILD_SETTINGS = {
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.ui.showConsoleProgress": "false",
}


#: Spark's settings naming the Python of its workers and of the driver.
PYTHON_CONF = "spark.pyspark.python"
DRIVER_PYTHON_CONF = "spark.pyspark.driver.python"


def worker_python(spark: SparkSession) -> str:
    """The interpreter Spark starts its Python workers with (Spark's own order)."""
    conf = spark.sparkContext.getConf()
    return conf.get(PYTHON_CONF) or os.environ.get("PYSPARK_PYTHON") or "python3"


@functools.cache
def _finds_kudusql(python: str) -> bool:
    """Whether ``python`` finds the modules a Spark worker needs for the source."""
    probe = (
        "import importlib.util as u, sys; "
        "mods = ('pyspark_kudusql', 'pyspark', 'pyarrow'); "
        "sys.exit(0 if all(u.find_spec(m) for m in mods) else 1)"
    )
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def wrong_python_message(python: str) -> str:
    return (
        f"Spark's Python workers run {python}, which cannot import kudusql (this driver runs "
        f"{sys.executable}); Spark then reports DATA_SOURCE_NOT_FOUND for the kudusql source. "
        f"Start the session with .config('{PYTHON_CONF}', sys.executable) "
        "(pyspark_kudusql.spark_session does), or set "
        f"PYSPARK_PYTHON={sys.executable} before starting the driver, or activate its "
        "virtual environment"
    )


def check_worker_python(spark: SparkSession) -> None:
    """Raise a ProgrammingError saying what to do when Spark's Python workers run an
    interpreter that cannot import kudusql (see the module docstring)."""
    python = worker_python(spark)
    found = shutil.which(python) or python
    if os.path.exists(found) and os.path.samefile(found, sys.executable):
        return
    if not _finds_kudusql(found):
        raise ProgrammingError(wrong_python_message(found))


def register(spark: SparkSession) -> None:
    """Register ``kudusql`` (and kudu-spark's names for it) with ``spark``, set the
    session's time zone to UTC, and check its Python workers can import kudusql."""
    from kudusql.spark.source import SOURCES

    check_worker_python(spark)
    for k, v in SETTINGS.items():
        spark.conf.set(k, v)
    for source in SOURCES:
        spark.dataSource.register(source)


def spark_session(master: str = "local[2]", app_name: str = "kudusql") -> SparkSession:
    """A local Spark session ready for the kudusql source, its Python workers (and
    driver) running this interpreter unless ``PYSPARK_PYTHON`` chooses another."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    pythons = {
        PYTHON_CONF: os.environ["PYSPARK_PYTHON"],
        DRIVER_PYTHON_CONF: os.environ["PYSPARK_DRIVER_PYTHON"],
    }
    for k, v in {**SETTINGS, **BUILD_SETTINGS, **pythons}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    register(spark)
    return spark
