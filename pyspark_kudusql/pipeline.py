"""The Spark data pipeline (``kudusql.spark.pipeline``) under the ``pyspark_kudusql`` name."""

from kudusql.spark.pipeline import LoadSummary, TableLoad, load_tables, main, shape

__all__ = ["LoadSummary", "TableLoad", "load_tables", "main", "shape"]
