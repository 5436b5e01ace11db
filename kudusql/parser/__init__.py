"""Owns the sqlglot dialect (Kudu/Impala DDL, UPSERT) and the statement model; syntax only
(issue 6).

Not built yet: the package exists so the layer contracts in pyproject.toml hold.
"""
