"""Fault injection for tests: make a chosen file-system call fail at a chosen point.

Storage code calls ``check(point, path)`` right before each write, fsync, rename and
deletion that matters for durability (points: ``write``, ``fsync``, ``rename``,
``fsync_dir``, ``delete``). Tests arm a fault with ``inject`` to raise an OSError
(ENOSPC, EIO, ...) at the n-th matching call, exercising flush, delta flush, metadata
swap and WAL append failures on real files; or, in a child process, to SIGKILL that
process right there (``kill=True``), a crash at an exact point between two steps.
With nothing armed, ``check`` is a dictionary lookup.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
from dataclasses import dataclass

_lock = threading.Lock()


@dataclass
class _Fault:
    point: str
    path_contains: str
    skip: int
    times: int
    err: int
    kill: bool


_armed: list[_Fault] = []
hits: dict[str, int] = {}


def inject(
    point: str,
    *,
    path_contains: str = "",
    skip: int = 0,
    times: int = 1,
    err: int = errno.ENOSPC,
    kill: bool = False,
) -> None:
    """Fail the (skip+1)-th to (skip+times)-th ``point`` calls on paths containing a text
    (``kill``: SIGKILL this process at the first of them instead)."""
    with _lock:
        _armed.append(_Fault(point, path_contains, skip, times, err, kill))


def clear() -> None:
    with _lock:
        _armed.clear()
        hits.clear()


def check(point: str, path: str) -> None:
    """Raise the armed OSError for this call, if any."""
    if not _armed:
        return
    with _lock:
        hits[point] = hits.get(point, 0) + 1
        for f in _armed:
            if f.point != point or f.path_contains not in path:
                continue
            if f.skip > 0:
                f.skip -= 1
                return
            if f.times > 0:
                f.times -= 1
                if f.kill:
                    os.kill(os.getpid(), signal.SIGKILL)
                raise OSError(f.err, f"{os.strerror(f.err)} (injected at {point})", path)
