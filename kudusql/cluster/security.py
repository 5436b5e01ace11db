"""The cluster secret, the local cluster's TLS certificate, and the bind rule.

- **Secret.** A random token that every call carries in the ``x-kudusql-cluster-secret``
  header; the server compares it in constant time (``hmac.compare_digest``) before any
  handler runs.
- **TLS.** ``generate_self_signed`` makes an EC P-256 key and a self-signed certificate
  valid for ``127.0.0.1`` and ``localhost`` (subject alternative names: gRPC checks the
  name dialled against them) with the ``openssl`` command-line tool. Clients trust it by
  passing the certificate as their root.
- **Bind rule.** A server on a loopback address needs neither; a server reachable from
  other machines refuses to start without both (``check_bind``).

Secret and key files are created readable by their owner only.
"""

from __future__ import annotations

import hmac
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kudusql.cluster.addresses import HostPort
from kudusql.common.errors import OperationalError, ProgrammingError

__all__ = [
    "SECRET_HEADER",
    "TlsFiles",
    "check_bind",
    "generate_secret",
    "generate_self_signed",
    "read_secret_file",
    "secret_matches",
    "write_secret_file",
]

#: The header that carries the cluster secret (gRPC header names are lower case).
SECRET_HEADER = "x-kudusql-cluster-secret"

#: Days a generated local-cluster certificate is valid.
CERTIFICATE_DAYS = 3650


def generate_secret() -> str:
    """A new cluster secret: 256 random bits, URL-safe text."""
    return secrets.token_urlsafe(32)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def write_secret_file(path: str | os.PathLike[str], secret: str) -> None:
    """Write a secret to a file only its owner can read."""
    _write_private(Path(path), secret.encode() + b"\n")


def read_secret_file(path: str | os.PathLike[str]) -> str:
    """The secret in a file (surrounding whitespace ignored); it must not be empty."""
    try:
        text = Path(path).read_text().strip()
    except OSError as exc:
        raise OperationalError(f"cannot read the cluster secret file {path}: {exc}") from None
    if not text:
        raise ProgrammingError(f"the cluster secret file {path} is empty")
    return text


def secret_matches(expected: str, presented: str | bytes | None) -> bool:
    """Whether a presented secret is the cluster's, in time independent of the content."""
    if presented is None:
        return False
    if isinstance(presented, str):
        presented = presented.encode()
    return hmac.compare_digest(expected.encode(), presented)


@dataclass(frozen=True)
class TlsFiles:
    """A PEM certificate and its private key."""

    certificate: Path
    private_key: Path

    def read(self) -> tuple[bytes, bytes]:
        """The certificate and key PEM bytes."""
        try:
            return self.certificate.read_bytes(), self.private_key.read_bytes()
        except OSError as exc:
            raise OperationalError(f"cannot read the TLS certificate or key: {exc}") from None


def generate_self_signed(directory: str | os.PathLike[str], name: str = "server") -> TlsFiles:
    """Create ``<name>.crt`` and ``<name>.key`` in ``directory``: a self-signed EC P-256
    certificate for ``127.0.0.1`` and ``localhost``, usable as its own trust root."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise OperationalError(
            "generating a TLS certificate needs the openssl command (install the openssl"
            " package), or pass a certificate and key"
        )
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(out / f"{name}.crt", out / f"{name}.key")
    # The key is created with owner-only permissions before openssl writes it.
    _write_private(files.private_key, b"")
    command = [
        openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", str(files.private_key), "-out", str(files.certificate),
        "-days", str(CERTIFICATE_DAYS), "-subj", "/CN=kudusql local cluster",
        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        "-addext", "basicConstraints=critical,CA:TRUE",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise OperationalError(f"openssl could not create a certificate: {done.stderr.strip()}")
    return files


def check_bind(address: HostPort, *, secret: str | None, tls: TlsFiles | None) -> None:
    """Refuse to serve on an address other machines can reach without both the cluster
    secret and TLS (the secret would otherwise cross the network in clear text)."""
    if address.is_loopback:
        return
    missing = [what for what, given in (("a cluster secret", secret), ("TLS", tls)) if not given]
    if missing:
        raise ProgrammingError(
            f"refusing to listen on {address}: an address other machines can reach needs"
            f" {' and '.join(missing)} (bind to 127.0.0.1 for a cluster on this machine)"
        )
