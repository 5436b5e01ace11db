"""The PySpark integration (needs the ``spark`` extra): the ``kudusql`` data source, the
KuduContext-like helper and the Spark data pipeline.

Modules: ``options`` (the source's options), ``spark_schema`` (types between kudusql,
Spark and Spark's Arrow batches), ``reader`` (scan tokens as Spark partitions; Spark
applies every filter), ``staging`` / ``writer`` / ``publish`` (tasks stage rows,
the commit applies them at one timestamp: all-or-nothing writes), ``source``
(``DefaultSource``), ``session`` (session settings, explicit registration), ``context``
(``KuduContext``), ``pipeline`` (files through Spark into tables). The top-level module
``pyspark_kudusql`` exposes ``DefaultSource`` where Spark looks for it.
"""
