"""Fingerprints of a database's on-disk state, for processes that keep a read-only open.

A read-only open reads the catalog, the commit log (``txnlog/``), and for each tablet
its superblock and its WAL segments; nothing else it holds in memory comes from
anywhere else. A fingerprint is
the identity (inode, size, modification time in ns) of exactly those files. Taken
*before* an open and equal later, it proves the open still sees what a fresh open would:
a writer that appends to the WAL, rolls a segment, flushes, compacts or runs DDL changes
one of them (the superblock and the catalog are replaced by rename: a new inode).
"""

from __future__ import annotations

import os

from kudusql.storage.tables import catalog
from kudusql.storage.tables.txn_log import TXN_LOG_DIR
from kudusql.storage.tablet.metadata import META_FILE
from kudusql.storage.tablet.tablet import WAL_DIR

Fingerprint = tuple[tuple[str, int, int, int], ...]


def _identity(path: str) -> tuple[str, int, int, int]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return (os.path.basename(path), -1, -1, -1)
    return (os.path.basename(path), st.st_ino, st.st_size, st.st_mtime_ns)


def _segments(directory: str) -> tuple[tuple[str, int, int, int], ...]:
    """The identity of every file in ``directory``, by name."""
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
            out = []
            for e in entries:
                try:
                    st = e.stat()
                except FileNotFoundError:  # deleted since the listing
                    continue
                out.append((e.name, st.st_ino, st.st_size, st.st_mtime_ns))
            return tuple(out)
    except FileNotFoundError:
        return ()


def catalog_fingerprint(db_path: str) -> Fingerprint:
    return (_identity(catalog.catalog_path(db_path)),)


def tablet_fingerprint(db_path: str, tablet_id: int) -> Fingerprint:
    d = catalog.tablet_path(db_path, tablet_id)
    return (_identity(os.path.join(d, META_FILE)), *_segments(os.path.join(d, WAL_DIR)))


def txn_log_fingerprint(db_path: str) -> Fingerprint:
    """The commit log's segments: an append grows one, a checkpoint makes new ones."""
    return _segments(os.path.join(db_path, TXN_LOG_DIR))
