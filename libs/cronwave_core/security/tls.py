"""TLS credentials for servers and channels, from ``TlsSettings`` (``CRONWAVE_TLS_*``).

Every server requires and verifies a client certificate (mutual TLS: gRPC's Python
servers cannot ask for one without requiring it); every channel presents this
process's certificate and verifies the server's against the CA, by the name it
dialled (``127.0.0.1``, ``localhost`` or the service's name). A bearer token
(``CRONWAVE_TOKEN``), when set, is sent on every call: the caller is then the API
key's user, and the certificate only lets it connect.

The files are read again when they change: a server on its next handshake
(``grpc.dynamic_ssl_server_credentials``), a channel on its next call
(``ReloadingChannel`` moves to a new channel made with them).

``CRONWAVE_INSECURE=1`` turns all of it off, for a suite on loopback: a server then
refuses any other address (``check_bind``). Imports grpc alone (the light SDK uses it).
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from cronwave_core.errors import ConfigurationError
from cronwave_core.settings import TlsSettings
from cronwave_core.targets import target

#: How often a server looks at its certificate files' modification times.
_RELOAD_CHECK_SECONDS = 1.0


@dataclass(frozen=True)
class Pem:
    """One identity's certificate and key and the CA to verify peers with, as read."""

    ca: bytes
    cert: bytes
    key: bytes
    stamp: tuple[int, ...]  # the files' (mtime_ns, size), to notice a change


def _stamp(paths: Sequence[Path]) -> tuple[int, ...]:
    out: list[int] = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            out += (-1, -1)
        else:
            out += (st.st_mtime_ns, st.st_size)
    return tuple(out)


def read_pem(ca: Path, cert: Path, key: Path) -> Pem:
    """The three files, or ``ConfigurationError`` naming the one that cannot be read
    (never its contents)."""
    values = []
    for what, path in (("CA certificate", ca), ("certificate", cert), ("private key", key)):
        try:
            values.append(path.read_bytes())
        except OSError as exc:
            raise ConfigurationError(
                f"cannot read the TLS {what} {path} ({exc.strerror}); `cronwave up` "
                "creates the local ones, or set CRONWAVE_TLS_CA, CRONWAVE_TLS_CERT and "
                "CRONWAVE_TLS_KEY"
            ) from None
    return Pem(values[0], values[1], values[2], _stamp((ca, cert, key)))


class CredentialFiles:
    """The PEM files of one identity, read again when they change (checked at most
    once a second)."""

    def __init__(self, ca: Path, cert: Path, key: Path) -> None:
        self.paths = (ca, cert, key)
        self._lock = threading.Lock()
        self._pem = read_pem(ca, cert, key)
        self._checked = 0.0

    def current(self, now: float) -> tuple[Pem, bool]:
        """The files as they are now and whether they changed since the last call."""
        with self._lock:
            if now - self._checked < _RELOAD_CHECK_SECONDS:
                return self._pem, False
            self._checked = now
            if _stamp(self.paths) == self._pem.stamp:
                return self._pem, False
            try:
                self._pem = read_pem(*self.paths)
            except ConfigurationError:
                return self._pem, False  # mid-rotation: keep serving the last good ones
            return self._pem, True


def server_credentials(files: CredentialFiles) -> grpc.ServerCredentials:
    """Mutual TLS for a server: its certificate from ``files``, reloaded on the first
    handshake after they change; every client must present a certificate the CA
    signed."""

    def config(pem: Pem) -> Any:
        return grpc.ssl_server_certificate_configuration([(pem.key, pem.cert)], pem.ca)

    first, _ = files.current(time.monotonic())

    def fetch() -> Any:
        pem, changed = files.current(time.monotonic())
        return config(pem) if changed else None

    return grpc.dynamic_ssl_server_credentials(config(first), fetch, True)


_channel_lock = threading.Lock()
_channel_files: dict[tuple[Path, Path, Path], CredentialFiles] = {}


def _files(ca: Path, cert: Path, key: Path) -> CredentialFiles:
    with _channel_lock:
        files = _channel_files.get((ca, cert, key))
        if files is None:
            files = _channel_files[(ca, cert, key)] = CredentialFiles(ca, cert, key)
        return files


def _credentials(pem: Pem, token: str) -> Any:
    creds = grpc.ssl_channel_credentials(pem.ca, pem.key, pem.cert)
    if token:
        creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
    return creds


#: How long a channel replaced after its files changed keeps serving the calls (and
#: streams) begun on it before it is closed.
_RETIRE_SECONDS = 60.0


class ReloadingChannel(grpc.Channel):
    """A mutual-TLS channel whose credentials follow their files: the first call after
    they changed (looked at at most once a second) goes over a new channel made with
    the new files, and so do all later ones; the old channel is closed a minute
    later. Multi-callables made before the change (a stub's) follow too."""

    def __init__(self, address: str, options: Sequence[tuple[str, Any]], tls: TlsSettings) -> None:
        self._address, self._options, self._token = address, list(options), tls.token
        self._files = _files(tls.ca, tls.cert, tls.key)
        self._lock = threading.Lock()
        self._checked = time.monotonic()
        self.generation = 0
        pem, _ = self._files.current(self._checked)
        self._stamp = pem.stamp
        self._channel = grpc.secure_channel(address, _credentials(pem, self._token), self._options)

    def current(self) -> tuple[grpc.Channel, int]:
        """The channel to call over now, and its generation."""
        now = time.monotonic()
        if now - self._checked < _RELOAD_CHECK_SECONDS:
            return self._channel, self.generation
        with self._lock:
            self._checked = now
            pem, _ = self._files.current(now)
            if pem.stamp != self._stamp:
                old = self._channel
                self._channel = grpc.secure_channel(
                    self._address, _credentials(pem, self._token), self._options
                )
                self._stamp = pem.stamp
                self.generation += 1
                retire = threading.Timer(_RETIRE_SECONDS, old.close)
                retire.daemon = True
                retire.start()
            return self._channel, self.generation

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _Following(self, "unary_unary", method, args, kwargs)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _Following(self, "unary_stream", method, args, kwargs)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _Following(self, "stream_unary", method, args, kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _Following(self, "stream_stream", method, args, kwargs)

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        self.current()[0].subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Any) -> None:
        self.current()[0].unsubscribe(callback)

    def close(self) -> None:
        with self._lock:
            self._channel.close()

    def __enter__(self) -> ReloadingChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Following:
    """A multi-callable of whichever channel a ``ReloadingChannel`` calls over now."""

    def __init__(
        self, owner: ReloadingChannel, kind: str, method: str, args: Any, kwargs: Any
    ) -> None:
        self._owner, self._kind, self._method = owner, kind, method
        self._args, self._kwargs = args, kwargs
        self._made: tuple[int, Any] = (-1, None)

    def _callable(self) -> Any:
        channel, generation = self._owner.current()
        made_for, made = self._made
        if made_for != generation:
            made = getattr(channel, self._kind)(self._method, *self._args, **self._kwargs)
            self._made = (generation, made)
        return made

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._callable()(*args, **kwargs)

    def with_call(self, *args: Any, **kwargs: Any) -> Any:
        return self._callable().with_call(*args, **kwargs)

    def future(self, *args: Any, **kwargs: Any) -> Any:
        return self._callable().future(*args, **kwargs)


def is_loopback(address: str) -> bool:
    """Whether ``HOST:PORT`` names a loopback host (``localhost``, 127.0.0.0/8, ::1)."""
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(address: str, service: str) -> None:
    """Refuse to serve plaintext anywhere but loopback."""
    if not is_loopback(address):
        raise ConfigurationError(
            f"{service}: CRONWAVE_INSECURE=1 serves plaintext without authentication, "
            f"so it listens on loopback only, not on {address}; unset it to serve with "
            "mutual TLS"
        )


_process: list[TlsSettings] = []


def process_tls() -> TlsSettings:
    """This process's ``TlsSettings``, read from the environment once."""
    with _channel_lock:
        if not _process:
            _process.append(TlsSettings.from_env())
        return _process[0]


def set_process_tls(tls: TlsSettings) -> TlsSettings:
    """Make ``tls`` this process's settings (a program that runs job code in-process,
    as a worker would); returns the previous ones."""
    previous = process_tls()
    with _channel_lock:
        _process[0] = tls
    return previous


def new_channel(
    address: str, options: Sequence[tuple[str, Any]], tls: TlsSettings | None = None
) -> grpc.Channel:
    """A channel to ``address`` (one address, or a service's replicas, calls spread
    over them: ``cronwave_core.targets``): mutual TLS as ``tls`` says (this process's
    settings when None), plaintext when it is insecure."""
    tls = tls or process_tls()
    dialled = target(address)
    options = dialled.with_options(options)
    if tls.insecure:
        return grpc.insecure_channel(dialled.target, options=options)
    return ReloadingChannel(dialled.target, options, tls)
