"""Owns the PySpark data source (issue 8).

Not built yet: the package exists so the layer contracts in pyproject.toml hold.
"""
