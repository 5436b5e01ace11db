"""Owns the interactive SQL shell on prompt_toolkit (issue 7).

Not built yet: the package exists so the layer contracts in pyproject.toml hold.
"""
