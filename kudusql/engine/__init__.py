"""Owns the SQL entry point: parse, plan, execute, settings (issue 6).

Not built yet: the package exists so the layer contracts in pyproject.toml hold.
"""
