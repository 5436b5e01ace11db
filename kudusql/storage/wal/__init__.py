"""Owns the per-tablet write-ahead log: a directory of checksummed, append-only segments.

``Log`` appends records (seq, ts, opaque payload) with a choice of fsync policy and
group commit, rolls and garbage-collects segments; ``read_log`` replays a directory
and cuts a torn tail left by a crash. The byte layout is in FORMAT.md. This package
imports only ``kudusql.common`` and ``kudusql.storage.fs``.
"""

from kudusql.storage.wal.log import (
    COMPRESS_THRESHOLD,
    DEFAULT_SEGMENT_SIZE,
    AppendTicket,
    FsyncPolicy,
    Log,
    SegmentInfo,
)
from kudusql.storage.wal.reader import LogRecord, read_log

__all__ = [
    "COMPRESS_THRESHOLD",
    "DEFAULT_SEGMENT_SIZE",
    "AppendTicket",
    "FsyncPolicy",
    "Log",
    "LogRecord",
    "SegmentInfo",
    "read_log",
]
