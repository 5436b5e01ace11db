"""Tests of the CFile format, encodings, bloom filters and block cache (kudusql.storage.cfile)."""
