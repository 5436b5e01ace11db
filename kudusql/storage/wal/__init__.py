"""Owns the per-tablet write-ahead log (issue 3).

Not built yet: the package exists so the layer contracts in pyproject.toml hold.
"""
