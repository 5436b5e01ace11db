"""Owns running plans: tablet scans to Arrow, DuckDB for joins and aggregates, DML application
(issue 6).

Not built yet: the package exists so the layer contracts in pyproject.toml hold.
"""
