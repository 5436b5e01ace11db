"""Durable file writes: whole-file atomic replacement and directory fsync."""

from __future__ import annotations

import contextlib
import os

from kudusql.common.errors import OperationalError
from kudusql.storage.fs import faults


def fsync_dir(path: str) -> None:
    """fsync a directory so that a rename or create inside it is durable."""
    try:
        faults.check("fsync_dir", path)
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise OperationalError(f"could not sync directory {path}: {e.strerror or e}") from e


def write_file_atomic(path: str, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data``: write a temp file, fsync, rename, fsync the directory.

    A crash leaves either the old file or the new one, never a mix.
    """
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "wb") as f:
            faults.check("write", tmp)
            f.write(data)
            if sync:
                f.flush()
                faults.check("fsync", tmp)
                os.fsync(f.fileno())
        faults.check("rename", path)
        os.replace(tmp, path)
        if sync:
            fsync_dir(os.path.dirname(os.path.abspath(path)))
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OperationalError(f"could not write {path}: {e.strerror or e}") from e


def write_new_file(path: str, chunks: list[bytes] | list[memoryview], *, sync: bool = True) -> int:
    """Write a new immutable file from ``chunks`` (fsynced); returns its size."""
    size = 0
    try:
        with open(path, "wb") as f:
            for c in chunks:
                faults.check("write", path)
                f.write(c)
                size += len(c)
            if sync:
                f.flush()
                faults.check("fsync", path)
                os.fsync(f.fileno())
    except OSError as e:
        raise OperationalError(f"could not write {path}: {e.strerror or e}") from e
    return size
