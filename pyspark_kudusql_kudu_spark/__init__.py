"""kudu-spark's package name for the kudusql data source:
``spark.read.format("org.apache.kudu.spark.kudu")``.

Registered by Spark like ``pyspark_kudusql`` (see ``pyspark_kudusql_kudu``); Spark looks
for a JVM class of that name first, so with kudu-spark's jar on the classpath the name
is kudu-spark's: then use ``format("kudusql")``.
"""

from __future__ import annotations

from kudusql.spark.source import KuduSparkAlias as DefaultSource

__all__ = ["DefaultSource"]
