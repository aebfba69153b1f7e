"""A local certificate authority and the certificates it issues (``cryptography``).

``cronwave up`` and the test suites call ``ensure_pki(tls_dir)``: the first time it
creates the folder (``<data dir>/tls`` by default) with a CA and one certificate per
service and for the local administrator; later calls reuse them (a certificate near
its end is issued again).

Identities live in a URI subject alternative name (SPIFFE-style):

- ``spiffe://cronwave/service/<name>``: a service (``workflow-store``, ``worker``, ...);
- ``spiffe://cronwave/user/<name>``: a person or program, with its role in a second
  URI, ``urn:cronwave:role:<role>`` (``viewer``, ``operator``, ``admin``);
- ``spiffe://cronwave/client/<name>``: a program that may connect but has no role of
  its own: its calls carry an API key, which says who calls.

A server certificate also names ``localhost``, ``127.0.0.1`` and the service's name
(the Kubernetes Service of ``deploy/k8s``) as DNS/IP names, so a client verifies the
server by the name it dialled.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cronwave_core.security.identity import ROLE_URN_PREFIX, SPIFFE_PREFIX, service_identities

#: The local administrator's certificate: what the CLI on the suite's machine uses.
LOCAL_ADMIN = "local-admin"
#: A certificate with no role: a program that calls with an API key.
CLIENT = "client"
_CA_DAYS = 3650
_LEAF_DAYS = 397
#: A certificate with less than this left is issued again by ``ensure_pki``.
_RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class CertFiles:
    """One identity's PEM files, and the CA's certificate to verify peers with."""

    cert: Path
    key: Path
    ca: Path


def service_uri(name: str) -> str:
    return f"{SPIFFE_PREFIX}service/{name}"


def user_uri(name: str) -> str:
    return f"{SPIFFE_PREFIX}user/{name}"


def client_uri(name: str) -> str:
    return f"{SPIFFE_PREFIX}client/{name}"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _write(path: Path, data: bytes, private: bool) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, so a reader
    (a service reloading its certificate) never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class LocalCA:
    """The CA in ``<dir>/ca.pem`` and ``<dir>/ca-key.pem`` (created when absent)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.cert_path = directory / "ca.pem"
        self.key_path = directory / "ca-key.pem"
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.cert_path.exists() and self.key_path.exists():
            self.cert = x509.load_pem_x509_certificate(self.cert_path.read_bytes())
            key = serialization.load_pem_private_key(self.key_path.read_bytes(), None)
            assert isinstance(key, ec.EllipticCurvePrivateKey), "the CA key is not EC"
            self.key = key
        else:
            self.key = ec.generate_private_key(ec.SECP256R1())
            name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cronwave local CA")])
            now = _now()
            self.cert = (
                x509.CertificateBuilder()
                .subject_name(name)
                .issuer_name(name)
                .public_key(self.key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(minutes=5))
                .not_valid_after(now + dt.timedelta(days=_CA_DAYS))
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(
                    x509.KeyUsage(
                        digital_signature=False,
                        content_commitment=False,
                        key_encipherment=False,
                        data_encipherment=False,
                        key_agreement=False,
                        key_cert_sign=True,
                        crl_sign=True,
                        encipher_only=False,
                        decipher_only=False,
                    ),
                    critical=True,
                )
                .add_extension(
                    x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()),
                    critical=False,
                )
                .sign(self.key, hashes.SHA256())
            )
            _write(self.key_path, _key_pem(self.key), private=True)
            _write(self.cert_path, self.cert.public_bytes(serialization.Encoding.PEM), False)

    def issue(
        self,
        uri: str,
        common_name: str,
        dns_names: tuple[str, ...] = (),
        role: str | None = None,
        days: int = _LEAF_DAYS,
    ) -> tuple[bytes, bytes]:
        """A new key and a certificate for ``uri`` (PEM key, PEM certificate), usable
        both to serve and to call."""
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        sans: list[x509.GeneralName] = [x509.UniformResourceIdentifier(uri)]
        if role is not None:
            sans.append(x509.UniformResourceIdentifier(ROLE_URN_PREFIX + role))
        sans += [x509.DNSName(name) for name in dns_names]
        if dns_names:
            sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
        now = _now()
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
            .sign(self.key, hashes.SHA256())
        )
        return _key_pem(key), cert.public_bytes(serialization.Encoding.PEM)

    def write(self, stem: str, key_pem: bytes, cert_pem: bytes) -> CertFiles:
        return write_pair(self.dir, stem, key_pem, cert_pem, self.cert_path)


def write_pair(directory: Path, stem: str, key_pem: bytes, cert_pem: bytes, ca: Path) -> CertFiles:
    """``<directory>/<stem>.pem`` and ``<stem>-key.pem`` (the key readable by its owner
    only)."""
    files = CertFiles(directory / f"{stem}.pem", directory / f"{stem}-key.pem", ca)
    _write(files.key, key_pem, private=True)
    _write(files.cert, cert_pem, private=False)
    return files


def _fresh(path: Path) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError):
        return False
    return cert.not_valid_after_utc - _now() > _RENEW_BEFORE


def ensure_pki(tls_dir: Path) -> Path:
    """``tls_dir`` (``<data dir>/tls`` by default) with the CA, a certificate per service
    (``service_identities()``: cronwave's and the installed packages' servers'), the
    local administrator's (``LOCAL_ADMIN``, role admin) and one with no role
    (``CLIENT``, for API-key callers); what exists and is not near its end is kept.
    Returns the folder."""
    ca = LocalCA(tls_dir)
    for name in service_identities():
        if not _fresh(ca.dir / f"{name}.pem"):
            key, cert = ca.issue(service_uri(name), name, dns_names=(name, "localhost"))
            ca.write(name, key, cert)
    if not _fresh(ca.dir / f"{LOCAL_ADMIN}.pem"):
        key, cert = ca.issue(user_uri(LOCAL_ADMIN), LOCAL_ADMIN, role="admin")
        ca.write(LOCAL_ADMIN, key, cert)
    if not _fresh(ca.dir / f"{CLIENT}.pem"):
        key, cert = ca.issue(client_uri(CLIENT), CLIENT)
        ca.write(CLIENT, key, cert)
    return ca.dir
