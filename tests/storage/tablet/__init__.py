"""Tests of the tablet (kudusql.storage.tablet)."""
