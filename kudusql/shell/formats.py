"""The names of the shell's output formats (``--format``, ``\\format``), kept apart from
``formatting`` so that the command line knows them without importing pyarrow."""

from __future__ import annotations

FORMATS = ("table", "csv", "tsv", "json", "markdown", "line")
