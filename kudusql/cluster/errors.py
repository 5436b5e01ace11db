"""The errors a remote call raises, and their names on the wire.

A server turns a kudusql error raised by a handler into an error response naming its
class (``code``) and message; the client raises the same class again. Only classes
listed here travel: every ``kudusql.common.errors`` class and the RPC errors below. Any
other exception is a server-side bug: the server logs it with its traceback and the
client gets an ``InternalError`` that names the server, never the traceback.
"""

from __future__ import annotations

import inspect
import re

from kudusql.common import errors as common_errors
from kudusql.common.errors import DatabaseError, Error, InterfaceError, OperationalError

__all__ = [
    "ConnectionRefused",
    "MalformedMessage",
    "NotTheLeader",
    "RequestStale",
    "RpcTimedOut",
    "SafeTimeTimeout",
    "ServiceUnavailable",
    "TabletNotFound",
    "Unauthenticated",
    "error_class",
    "error_code",
    "make_error",
]


class ServiceUnavailable(OperationalError):
    """A server could not be reached (down, restarting, refusing connections)."""


class ConnectionRefused(ServiceUnavailable):
    """Nothing listens at the server's address: the call was never sent (so even a
    write may be sent again, elsewhere)."""


class RpcTimedOut(OperationalError):
    """A server did not answer within the call's deadline (it may have acted)."""


class RequestStale(OperationalError):
    """A retried write whose result the tablet server no longer remembers (Kudu's
    ERROR_REQUEST_STALE): it may or may not have been applied, and is not applied again."""


class Unauthenticated(OperationalError):
    """A server refused a call without the cluster secret, or with a wrong one."""


class TabletNotFound(OperationalError):
    """A tablet server does not host the tablet a call names (Kudu's TABLET_NOT_FOUND):
    a client refreshes its cached locations from the master and tries again."""


class NotTheLeader(OperationalError):
    """A replicated tablet's replica that is not its leader refused a write (Kudu's
    NOT_THE_LEADER). The message ends with ``(leader_uuid=U leader_address=A)``, ``-``
    for what the replica does not know; ``leader_uuid`` and ``leader_address`` are read
    back from it on the client side, so a client can send the write to the leader."""

    _TAIL = re.compile(r"\(leader_uuid=(\S+) leader_address=(\S+)\)$")

    def __init__(self, message: str) -> None:
        super().__init__(message)
        found = self._TAIL.search(message)
        uuid, address = found.groups() if found else ("-", "-")
        self.leader_uuid: str | None = None if uuid == "-" else uuid
        self.leader_address: str | None = None if address == "-" else address

    @classmethod
    def naming(cls, why: str, leader_uuid: str | None, leader_address: str | None) -> NotTheLeader:
        return cls(
            f"{why} (leader_uuid={leader_uuid or '-'} leader_address={leader_address or '-'})"
        )


class SafeTimeTimeout(OperationalError):
    """A replica's safe time did not reach a read's snapshot in time (a follower cut off
    from its leader, a leader without its lease): another replica may serve the read."""


class MalformedMessage(InterfaceError):
    """A message that is not valid JSON, or of an unknown version, type or shape."""


def _classes() -> dict[str, type[Error]]:
    ours = (
        ServiceUnavailable,
        RpcTimedOut,
        Unauthenticated,
        MalformedMessage,
        TabletNotFound,
        RequestStale,
        NotTheLeader,
        SafeTimeTimeout,
    )
    members = [*inspect.getmembers(common_errors, inspect.isclass)]
    members += [(cls.__name__, cls) for cls in ours]
    return {name: cls for name, cls in members if issubclass(cls, Error)}


#: Wire code (the class name) → class. Codes are never renamed: a renamed class keeps
#: its old name here as an alias.
_BY_CODE: dict[str, type[Error]] = _classes()


def error_code(exc: Error) -> str:
    """The wire code of an error: its class, or the nearest listed base class."""
    for cls in type(exc).__mro__:
        if cls.__name__ in _BY_CODE and _BY_CODE[cls.__name__] is cls:
            return cls.__name__
    return "DatabaseError"


def error_class(code: str) -> type[Error]:
    """The class of a wire code; an unknown code (a newer server) is a DatabaseError."""
    return _BY_CODE.get(code, DatabaseError)


def make_error(code: str, message: str) -> Error:
    """The error a client raises for an error response: the class of ``code`` with the
    server's message (a class whose constructor takes more than a message, such as
    ``CorruptionError``, comes back as its nearest base that takes one)."""
    for cls in error_class(code).__mro__:
        if isinstance(cls, type) and issubclass(cls, Error):
            try:
                return cls(message)
            except TypeError:
                continue
    return DatabaseError(message)
