"""``TlsSettings``: the certificates a process presents and trusts, and the API key a
client sends (``cronwave_core.security``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from cronwave_core.config import Derived, Directory, Duration, File, Switch, Text, setting
from cronwave_core.settings_base import PREFIX, FromEnv, ProcessSettings


def _data_dir(env: Mapping[str, str]) -> Path:
    return ProcessSettings.from_env(env).data_dir


def _tls_file(suffix: str) -> Derived[Path]:
    return Derived(
        f"<TLS dir>/<identity>{suffix}",
        lambda values, _env: values["tls_dir"] / f"{values['identity']}{suffix}",
    )


@dataclass(frozen=True, kw_only=True)
class TlsSettings(FromEnv):
    """Mutual TLS on every connection, and the bearer token a client sends (see
    *Security*). The files are read again when they change."""

    insecure: bool = setting(
        PREFIX + "INSECURE",
        Switch(),
        False,
        "`1`: plaintext gRPC and no authentication, for a suite on loopback only (a "
        "service refuses to listen on any other address); `cronwave up --insecure`",
    )
    tls_dir: Path = setting(
        PREFIX + "TLS_DIR",
        Directory(),
        Derived("<data dir>/tls", lambda _v, env: _data_dir(env) / "tls"),
        "where the suite's local CA and certificates are (`cronwave up` creates them)",
    )
    identity: str = setting(
        PREFIX + "TLS_IDENTITY",
        Text(),
        "local-admin",
        "whose certificate in the TLS dir this process presents: a service's name "
        "(the suite sets it per process), `local-admin`, or `client` (no role: an "
        "API key says who calls)",
    )
    ca: Path = setting(
        PREFIX + "TLS_CA", File(), Derived(
            "<TLS dir>/ca.pem", lambda values, _env: values["tls_dir"] / "ca.pem"
        ), "PEM CA certificate(s) every peer's certificate is verified against",
    )  # fmt: skip
    cert: Path = setting(
        PREFIX + "TLS_CERT",
        File(),
        _tls_file(".pem"),
        "this process's PEM certificate (Kubernetes: `tls.crt` of its Secret)",
    )
    key: Path = setting(
        PREFIX + "TLS_KEY",
        File(),
        _tls_file("-key.pem"),
        "this process's PEM private key",
    )
    token: str = setting(
        PREFIX + "TOKEN",
        Text(),
        "",
        "an API key (`cronwave auth create-key`) the CLI and SDK send as a bearer token; "
        "it, not the certificate, then says who calls",
        secret=True,
    )
    auth_cache_ttl: timedelta = setting(
        PREFIX + "AUTH_CACHE_TTL",
        Duration(),
        timedelta(seconds=10),
        "how long a service trusts an API key it has checked; a revoked key is refused "
        "within this time",
    )
