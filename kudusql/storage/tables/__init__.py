"""The tables layer: Kudu's master and client on one machine, and the only door into
storage for the layers above.

It owns the database directory and its durable catalog (``database.py``, ``catalog.py``,
``directory.py``), partition schemas and routing (``partition.py``, ``pruning.py``,
``range_key.py``, ``batch_keys.py``, ``range_format.py``), tables that split writes and
scans across their tablets (``table.py``), multi-tablet transactions and their commit log
(``txn_log.py``), schema changes (``alter.py``), scan tokens (``scan_token.py``), staged
inserts written by many workers and adopted at one timestamp (``staging.py``), the
``sys`` tables (``system_tables.py``) and the fingerprints a read-only view uses to follow
the writer (``fingerprint.py``). Nothing above this package imports ``storage.tablet``,
``storage.cfile``, ``storage.wal`` or ``storage.fs`` (an import contract).
"""
