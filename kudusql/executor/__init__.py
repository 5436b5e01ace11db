"""Owns running plans: scans of storage tables to Arrow, DuckDB for the rest of a query,
and writing DML rows.

Modules: ``duck`` (the session's DuckDB connection and every call into it),
``dml`` (query output written to a table by key, in batches), ``impala_functions``
(Impala's functions DuckDB lacks, as macros). The only package that imports duckdb.
"""
