"""Test-only rerouting of a server's outbound server-to-server calls through loopback
proxies, so a fault test can cut one pair of servers apart (a network partition).

What it owns: reading a server's route table. With the environment variable
``KUDUSQL_TEST_ROUTES`` set to a file name, a server reads ``<its directory>/<name>``, a
JSON object mapping a peer's address (``HOST:PORT``) to the address to dial instead,
each time it opens a client to a peer; a missing file, or an address it does not name,
means the address itself. Unset (every real deployment), ``route`` is the identity and
reads nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

__all__ = ["ROUTES_ENV", "Route", "route_for"]

ROUTES_ENV = "KUDUSQL_TEST_ROUTES"

#: Maps the address a server would dial to the one it dials.
Route = Callable[[str], str]


def _identity(address: str) -> str:
    return address


def route_for(directory: str) -> Route:
    """The route table of the server whose directory is ``directory``."""
    name = os.environ.get(ROUTES_ENV)
    if not name:
        return _identity
    path = os.path.join(directory, name)

    def route(address: str) -> str:
        try:
            with open(path, encoding="utf-8") as f:
                table = json.load(f)
        except FileNotFoundError:
            return address
        found = table.get(address, address) if isinstance(table, dict) else address
        return found if isinstance(found, str) else address

    return route
