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


# -- Kudu's Python client names ---------------------------------------------------------------
# ``kudusql.client`` raises these, so code written for kudu-python catches what it expects
# (``kudu.KuduNotFound``, ``KeyError``, ...) while PEP 249 code keeps catching the class
# kudusql raised before: each is also the PEP 249 class of its kind.


class KuduException(Error):
    """Base of the errors with the names of Kudu's Python client (``kudu.errors``)."""


class KuduBadStatus(KuduException, DatabaseError):
    """An operation failed with a Kudu status (Kudu's ``KuduBadStatus``)."""


class KuduNotFound(KuduBadStatus, ProgrammingError):
    """A table, column or soft-deleted table that does not exist."""


class KuduAlreadyPresent(KuduBadStatus, ProgrammingError):
    """A table name that is already taken (soft-deleted tables keep theirs)."""


class KuduInvalidArgument(KuduBadStatus, ProgrammingError):
    """An argument Kudu refuses (a bad schema, an alteration of a soft-deleted table)."""


class KuduNotSupported(KuduBadStatus, NotSupportedError):
    """A Kudu feature that an embedded database does not have."""


class KuduInvalidValue(KuduInvalidArgument, DataError):
    """A cell or predicate value its column cannot take (NULL in a NOT NULL column)."""


class KuduKeyError(KuduNotFound, KeyError):
    """An unknown column looked up by name (a ``KeyError`` too, as in kudu-python)."""

    def __str__(self) -> str:  # KeyError would show the message quoted
        return str(self.args[0]) if self.args else ""


class KuduIndexError(KuduInvalidArgument, IndexError):
    """A column position out of range (an ``IndexError`` too, as in kudu-python)."""


class KuduTypeError(KuduInvalidValue, TypeError):
    """A value or argument of the wrong type (a ``TypeError`` too, as in kudu-python)."""


class KuduValueError(KuduInvalidArgument, ValueError):
    """An option value that is not one of the known ones (a ``ValueError`` too)."""


class KuduOverflowError(KuduInvalidArgument, OverflowError):
    """A negative size or interval (an ``OverflowError`` too, as in kudu-python)."""


class KuduWriteIntegrityError(KuduBadStatus, IntegrityError):
    """A flush whose rows failed for their keys (AlreadyPresent, NotFound)."""


class KuduWriteDataError(KuduBadStatus, DataError):
    """A flush whose rows failed for their values (InvalidArgument, Immutable, ...)."""
