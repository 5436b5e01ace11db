"""The exclusive writer lock of a database (or tablet) directory.

One writer process per directory: ``DirLock.acquire`` takes an exclusive, non-blocking
``flock`` on ``<dir>/LOCK`` and writes the holder's pid into it. A second writer gets an
OperationalError naming that pid. The lock dies with the process (the kernel drops it
on exit or SIGKILL), so a crash never leaves a stale lock behind. Read-only openers do
not take it.
"""

from __future__ import annotations

import errno
import fcntl
import os

from kudusql.common.errors import OperationalError

LOCK_FILE = "LOCK"


class DirLock:
    """An exclusive lock held by this process on a directory."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, LOCK_FILE)
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise OperationalError(f"cannot lock {self.path}: {e.strerror or e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                holder = self.holder()
                who = f"process {holder}" if holder else "another process"
                raise OperationalError(
                    f"database {self.directory} is locked by {who}: only one writer process "
                    "may open it (open it read-only to read while that process writes)"
                ) from None
            raise OperationalError(f"cannot lock {self.path}: {e.strerror or e}") from e
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def holder(self) -> int | None:
        """The pid written by the current holder, if any."""
        try:
            with open(self.path) as f:
                text = f.read().strip()
            return int(text) if text else None
        except (OSError, ValueError):
            return None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None
