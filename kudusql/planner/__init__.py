"""Owns binding statements to the catalog, predicate and projection pushdown, plan nodes (issue 6).

Not built yet: the package exists so the layer contracts in pyproject.toml hold.
"""
