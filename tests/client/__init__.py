"""Tests of the Kudu-style Python client API (kudusql.client)."""
