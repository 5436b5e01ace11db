"""Where a cluster connection goes and how it proves itself: ``kudusql://HOST:PORT``.

Every interface that opens a cluster (the DB-API, the shell, the Kudu-style client,
Spark, SQLAlchemy) reads its target here, so each accepts the same forms:

- the URL ``kudusql://HOST:PORT`` (the master's address; several masters:
  ``kudusql://HOST:PORT,HOST:PORT,HOST:PORT``), optionally with query parameters
  ``secret_file=PATH``, ``tls_ca=PATH`` and ``timeout=SECONDS``;
- keyword options of the same names, and ``secret=TEXT``;
- else the environment: ``KUDUSQL_SECRET_FILE`` (a file holding the cluster secret,
  as ``kudusql cluster start`` writes it) and ``KUDUSQL_TLS_CA``.

A keyword option wins over the URL's parameter, which wins over the environment.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kudusql.cluster.addresses import parse_master_addresses
from kudusql.cluster.security import read_secret_file
from kudusql.common.errors import OperationalError, ProgrammingError

__all__ = ["CLUSTER_OPTIONS", "SCHEME", "ClusterTarget", "is_cluster_url"]

SCHEME = "kudusql://"
#: The keyword options a cluster connection takes.
CLUSTER_OPTIONS = frozenset({"secret", "secret_file", "tls_ca", "timeout"})
SECRET_FILE_ENV = "KUDUSQL_SECRET_FILE"
TLS_CA_ENV = "KUDUSQL_TLS_CA"


def is_cluster_url(target: object) -> bool:
    return isinstance(target, str) and target.lower().startswith(SCHEME)


@dataclass(frozen=True)
class ClusterTarget:
    """A master's address and the credentials to reach the cluster."""

    address: str
    secret: str | None = field(default=None, repr=False)
    tls_root: bytes | None = None
    timeout: float | None = None

    @classmethod
    def parse(cls, url: str, **options: Any) -> ClusterTarget:
        """The target of ``url`` with ``options`` (see the module docstring)."""
        unknown = set(options) - CLUSTER_OPTIONS
        if unknown:
            raise ProgrammingError(
                f"unknown option(s) {', '.join(sorted(unknown))} for a cluster connection; "
                f"known: {', '.join(sorted(CLUSTER_OPTIONS))}"
            )
        if not is_cluster_url(url):
            raise ProgrammingError(f"a cluster URL is kudusql://HOST:PORT, not {url!r}")
        parts = urllib.parse.urlsplit(url)
        if parts.path not in ("", "/") or parts.fragment or parts.username:
            raise ProgrammingError(f"a cluster URL is kudusql://HOST:PORT[?options], not {url!r}")
        address = ",".join(parse_master_addresses(parts.netloc))
        params: dict[str, str] = {}
        for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
            if k not in CLUSTER_OPTIONS - {"secret"}:
                raise ProgrammingError(
                    f"unknown parameter {k!r} in {url!r}; known: secret_file, tls_ca, timeout"
                )
            params[k] = v
        merged: dict[str, Any] = {**params, **{k: v for k, v in options.items() if v is not None}}
        secret = merged.get("secret")
        secret_file = merged.get("secret_file") or (
            None if secret else os.environ.get(SECRET_FILE_ENV)
        )
        if secret is None and secret_file:
            secret = read_secret_file(str(secret_file))
        tls_ca = merged.get("tls_ca") or os.environ.get(TLS_CA_ENV)
        tls_root = None
        if tls_ca:
            try:
                tls_root = Path(str(tls_ca)).read_bytes()
            except OSError as exc:
                raise OperationalError(
                    f"cannot read the TLS certificate {tls_ca}: {exc.strerror or exc}"
                ) from None
        timeout = merged.get("timeout")
        if timeout is not None:
            try:
                timeout = float(timeout)
            except (TypeError, ValueError):
                raise ProgrammingError(
                    f"timeout must be a number of seconds, got {timeout!r}"
                ) from None
            if not timeout > 0:
                raise ProgrammingError(f"timeout must be positive, got {timeout!r}")
        return cls(address, secret, tls_root, timeout)
