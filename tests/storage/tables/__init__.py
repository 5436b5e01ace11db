"""Tests of the tables layer (kudusql.storage.tables)."""
