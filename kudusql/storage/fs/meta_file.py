"""Small metadata files: a JSON body behind a magic, a version and a CRC-32.

Layout: ``magic`` (8 bytes), u32 version, u32 body length, u32 CRC-32 of the body
(little-endian), then the UTF-8 JSON body. Written with ``write_file_atomic`` (temp file,
fsync, rename, fsync the directory), so a reader finds the old file or the new one.
Used by the tablet superblock and the database catalog; see their ``FORMAT.md``.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from kudusql.common.errors import CorruptionError, OperationalError
from kudusql.storage.fs.checksum import crc32, verify
from kudusql.storage.fs.files import write_file_atomic

# DO NOT CHANGE: on-disk.
_HEADER = struct.Struct("<8sIII")  # magic, version, body length, body crc32


def save_json(path: str, magic: bytes, version: int, body: Any, *, sync: bool = True) -> None:
    save_encoded(path, magic, version, json.dumps(body, separators=(",", ":")).encode(), sync=sync)


def encode_with_lists(fields: dict[str, Any], lists: dict[str, list[str]]) -> str:
    """``fields`` as a JSON object followed by ``lists``: each an array of items already
    encoded as JSON text (a caller that re-saves mostly the same items encodes each
    once and splices it in). ``fields`` must not be empty."""
    head = json.dumps(fields, separators=(",", ":"))[:-1]  # without the closing brace
    tail = "".join(f',"{k}":[{",".join(items)}]' for k, items in lists.items())
    return head + tail + "}"


def save_encoded(path: str, magic: bytes, version: int, data: bytes, *, sync: bool = True) -> None:
    """``save_json`` of a body the caller already encoded as UTF-8 JSON."""
    write_file_atomic(path, _HEADER.pack(magic, version, len(data), crc32(data)) + data, sync=sync)


def load_json(path: str, magic: bytes, version: int, what: str) -> Any:
    """The body of ``path``; CorruptionError (naming the file) if any check fails,
    OperationalError if the file does not exist."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise OperationalError(f"missing {what} {path}") from None
    except OSError as e:
        raise OperationalError(f"cannot read {what} {path}: {e.strerror or e}") from e
    if len(data) < _HEADER.size:
        raise CorruptionError(path, 0, f"{what} too short")
    got_magic, got_version, length, crc = _HEADER.unpack_from(data, 0)
    if got_magic != magic:
        raise CorruptionError(path, 0, f"bad {what} magic")
    if got_version != version:
        raise CorruptionError(path, 8, f"unsupported {what} version {got_version}")
    body = data[_HEADER.size :]
    if len(body) != length:
        raise CorruptionError(path, _HEADER.size, f"{what} length mismatch (truncated?)")
    verify(body, crc, path, _HEADER.size, what)
    try:
        return json.loads(body)
    except ValueError as e:
        raise CorruptionError(path, _HEADER.size, f"unreadable {what}: {e}") from e
