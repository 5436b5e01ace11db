"""Tests of the write-ahead log (kudusql.storage.wal)."""
