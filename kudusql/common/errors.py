"""The PEP 249 exception tree, shared by every layer.

Each layer raises the class a DB-API user expects: bad SQL or unknown objects are
ProgrammingError, constraint violations IntegrityError, bad values DataError,
environment problems (locks, disks) OperationalError, and damaged files CorruptionError,
a DatabaseError that names the file and the byte offset.
"""

from __future__ import annotations


class Warning(Exception):
    """Important warnings, such as data truncation."""


class Error(Exception):
    """Base of every kudusql error."""


class InterfaceError(Error):
    """Misuse of the database interface itself."""


class DatabaseError(Error):
    """Errors related to the database."""


class DataError(DatabaseError):
    """A value is of the wrong type, out of range or too large."""


class OperationalError(DatabaseError):
    """The environment failed: a lock is held, a disk is full, a file is missing."""


class IntegrityError(DatabaseError):
    """A key constraint was violated."""


class InternalError(DatabaseError):
    """The engine reached a state it should never reach."""


class ProgrammingError(DatabaseError):
    """Bad SQL, an unknown table or column, a wrong argument."""


class NotSupportedError(DatabaseError):
    """The feature exists in Kudu or SQL but not (yet) here."""


class CorruptionError(DatabaseError):
    """A file failed a checksum or a structural check.

    The message always names the file and the byte offset, so an operator knows what
    to restore; the engine never returns data from a file that failed its check.
    """

    def __init__(self, path: str, offset: int, what: str) -> None:
        super().__init__(f"corruption in {path} at offset {offset}: {what}")
        self.path = path
        self.offset = offset
        self.what = what

    def __reduce__(self) -> tuple[type, tuple[str, int, str]]:
        # Picklable (a merge worker process sends its errors back): rebuilt from the
        # constructor's arguments, not from the formatted message.
        return (type(self), (self.path, self.offset, self.what))
