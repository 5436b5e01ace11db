"""kudusql: Kudu's tablet storage design in Python, with a SQL engine on sqlglot and DuckDB.

Layers, bottom up: ``common`` (types, keys, time, predicates, errors), ``storage`` (fs,
cfile, wal, tablet, client), then the SQL layers (parser, planner, executor, engine)
and the user-facing ones (dbapi, shell, spark). See docs/ARCHITECTURE.md.
"""

__version__ = "0.1.0"
