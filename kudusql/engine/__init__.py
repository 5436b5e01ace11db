"""Owns the SQL entry point: a session parses, plans and executes statements.

Modules: ``session`` (the ``Session``: open database, current database, settings,
statement dispatch, DML), ``result`` (what a statement returns), ``ddl`` (DDL, settings
and maintenance statements), ``introspect`` (SHOW, DESCRIBE, COMPUTE STATS, EXPLAIN),
``params`` (parameter binding), ``fastpath`` (point lookups and parameterized INSERT
without DuckDB), ``plan_cache`` (query plans by statement text), ``databases`` (the
registry of SQL databases), ``settings`` (the ``SET`` options).
"""
