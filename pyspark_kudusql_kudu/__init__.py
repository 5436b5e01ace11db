"""kudu-spark's short name for the kudusql data source: ``spark.read.format("kudu")``.

Spark imports every top-level ``pyspark_*`` module in its Python workers and registers
the ``DefaultSource`` each exposes under its ``name()``; this one is ``kudu``, so a
kudu-spark job runs unchanged apart from ``kudu.master``. A JVM source of the same name
(kudu-spark's jar on the classpath) is resolved first: then use ``format("kudusql")``.
"""

from __future__ import annotations

from kudusql.spark.source import KuduAlias as DefaultSource

__all__ = ["DefaultSource"]
