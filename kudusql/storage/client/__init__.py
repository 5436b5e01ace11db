"""Owns the only door into storage for the layers above: catalog, partitioning, tables, write
sessions, scanners (issue 5).

Not built yet: the package exists so the layer contracts in pyproject.toml hold.
"""
