"""Checksums for on-disk blocks: CRC-32 (zlib's polynomial), as an unsigned 32-bit int."""

from __future__ import annotations

import zlib

from kudusql.common.errors import CorruptionError


def crc32(data: bytes | bytearray | memoryview, start: int = 0) -> int:
    """CRC-32 of ``data``, continuing from ``start``."""
    return zlib.crc32(data, start) & 0xFFFFFFFF


def verify(
    data: bytes | bytearray | memoryview, expected: int, path: str, offset: int, what: str
) -> None:
    """Raise CorruptionError naming ``path`` and ``offset`` if the checksum differs."""
    actual = crc32(data)
    if actual != expected:
        raise CorruptionError(
            path,
            offset,
            f"{what} checksum mismatch (stored {expected:#010x}, computed {actual:#010x})",
        )
