"""Spark session set-up for kudusql: the settings the data source needs.

``spark_session(master)`` builds (or returns) a session with the session time zone set
to UTC (kudusql timestamps are UTC), Arrow batches of 100,000 rows between the JVM and
the Python workers, and the Python workers running this interpreter. Spark's filter
pushdown for Python data sources (``spark.sql.python.filterPushdown.enabled``) stays as
the user set it (off by default): the source takes no filters either way, as Spark 4.3
reuses a relation's last pushed read plan for later queries (docs/SPARK.md).
``register(spark)`` registers the source explicitly and applies the same settings to
an existing session.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
}
#: Only for sessions built here: bigger Arrow batches between the JVM and Python
#: workers (the default, 10,000 rows, makes writes ~1.5x slower: integration notes).
BUILD_SETTINGS = {
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.ui.showConsoleProgress": "false",
}


def register(spark: SparkSession) -> None:
    """Register ``kudusql`` with ``spark`` and set the session's time zone to UTC."""
    from kudusql.spark.source import DefaultSource

    for k, v in SETTINGS.items():
        spark.conf.set(k, v)
    spark.dataSource.register(DefaultSource)


def spark_session(master: str = "local[2]", app_name: str = "kudusql") -> SparkSession:
    """A local Spark session ready for the kudusql source."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in {**SETTINGS, **BUILD_SETTINGS}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    register(spark)
    return spark
