"""Owns the PEP 249 connection and cursor (issue 6).

Not built yet: the package exists so the layer contracts in pyproject.toml hold.
"""
