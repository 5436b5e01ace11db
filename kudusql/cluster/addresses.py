"""Server addresses: ``host:port`` strings, parsed once, and the loopback test.

An address is an IPv4 address or a host name and a port; IPv6 literals are not
supported yet (a bracketed ``[::1]:7051`` is refused with a clear error).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from kudusql.common.errors import ProgrammingError

__all__ = ["HostPort", "parse_host_port", "parse_master_addresses"]


@dataclass(frozen=True)
class HostPort:
    """A server's host and TCP port (port 0 asks the system for a free one)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        """True when only processes of this machine can reach the address."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_host_port(text: str) -> HostPort:
    """``"127.0.0.1:7051"`` → ``HostPort("127.0.0.1", 7051)``."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not host or not port_text.isdigit() or host.startswith("["):
        raise ProgrammingError(f"a server address is HOST:PORT (IPv4 or a name), not {text!r}")
    port = int(port_text)
    if port > 65535:
        raise ProgrammingError(f"port {port} of {text!r} is out of range (0 to 65535)")
    return HostPort(host, port)


def parse_master_addresses(text: str) -> list[str]:
    """``"h1:p1,h2:p2,h3:p3"`` (Kudu's ``--master_addresses``) → the masters'
    ``HOST:PORT`` strings, in order; at least one, none twice."""
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise ProgrammingError("a masters list is HOST:PORT[,HOST:PORT...], not empty")
    addresses = [str(parse_host_port(p)) for p in parts if p]
    if len(set(addresses)) != len(addresses):
        raise ProgrammingError(f"a master is listed twice in {text!r}")
    return addresses
