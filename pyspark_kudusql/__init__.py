"""The kudusql data source for PySpark: ``spark.read.format("kudusql")``.

Spark imports every top-level ``pyspark_*`` module it finds in its Python workers and
registers the ``DefaultSource`` it exposes, so installing kudusql with the ``spark``
extra is all a job needs (``pyspark_kudusql_kudu`` and ``pyspark_kudusql_kudu_spark``
add kudu-spark's names, ``kudu`` and ``org.apache.kudu.spark.kudu``). The
implementation lives in ``kudusql.spark``; this module only exposes it under the name
Spark looks for, with the session helpers.
"""

from __future__ import annotations

try:
    import pyspark  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised without the extra only
    raise ImportError(
        "the kudusql Spark data source needs pyspark: pip install 'kudusql[spark]' "
        "(and Java 17 for Spark itself)"
    ) from e

from kudusql.spark.context import KuduContext
from kudusql.spark.session import register, spark_session
from kudusql.spark.source import DefaultSource

__all__ = ["DefaultSource", "KuduContext", "register", "spark_session"]
