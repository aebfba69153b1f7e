"""The console process: ``python -P -m console``.

Reads its settings once (``ConsoleSettings``, ``NetworkSettings``, ``ProcessSettings``,
``MetricsSettings``; the suite's addresses, certificates and data dir by the CLI's rule,
``cronwave._suite_find``), binds its address itself -- so a taken port is reported as
``cannot listen on ADDRESS`` and the suite starts it again on another -- and serves the
application with uvicorn, which on SIGTERM stops taking connections, lets the requests
in progress finish, and exits 0.

Where the suite authenticates nobody (``CRONWAVE_INSECURE=1``) the console, like every
service then, refuses to listen on anything but loopback: there, whoever reaches it
may change things (see ``console.actions``).
"""

from __future__ import annotations

import logging
import os
import socket
import sys

import uvicorn

from console.app import build_app
from console.backend import Backend
from console.guard import Guard
from console.traces import SpanRuns
from cronwave import _suite_find
from cronwave_core.console_settings import ConsoleSettings
from cronwave_core.entry import entry_point
from cronwave_core.metrics import serve_metrics
from cronwave_core.security.tls import check_bind
from cronwave_core.settings import (
    MetricsSettings,
    NetworkSettings,
    ProcessSettings,
    TelemetrySettings,
    TlsSettings,
)
from cronwave_waterfall import JaegerQuery

log = logging.getLogger("console")


def listen(address: str) -> socket.socket:
    """A listening socket on ``address`` (``HOST:PORT``); exits naming it when taken."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, int(port)))
    except OSError as exc:
        sock.close()
        log.error("cannot listen on %s: %s", address, exc.strerror or exc)
        sys.exit(1)
    sock.listen(128)
    return sock


@entry_point("console")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s console %(message)s")
    settings = ConsoleSettings.from_env()
    process = ProcessSettings.from_env()
    metrics = MetricsSettings.from_env()
    # An insecure console off loopback is refused before anything else: whoever
    # reached it could change things, whatever suite it would show.
    if TlsSettings.from_env().insecure:
        check_bind(settings.console_addr, "console")
    # The suite it shows: its CRONWAVE_*_ADDR (a suite sets them all), else the running
    # suite of the data dir, as for the CLI (cronwave._suite_find); its own settings
    # above are checked first, so a malformed one is what a refusal names.
    env = _suite_find.suite_env(os.environ)
    network = NetworkSettings.from_env(env)
    data_dir = ProcessSettings.from_env(env).data_dir
    tls = TlsSettings.from_env(env)
    sock = listen(settings.console_addr)
    metrics_server = serve_metrics(metrics.metrics_addr) if metrics.metrics_addr else None
    backend = Backend(network, tls)
    jaeger = None
    if settings.jaeger_url and TelemetrySettings.from_env().otlp_endpoint:
        jaeger = JaegerQuery.from_url(settings.jaeger_url)
    app = build_app(
        backend,
        SpanRuns(data_dir / "spans", jaeger),
        Guard(),
        slots=settings.console_slots,
        late_after=settings.console_late_after,
        jaeger_url=settings.jaeger_url,
    )
    config = uvicorn.Config(
        app,
        log_level="warning",
        timeout_graceful_shutdown=max(1, int(process.grace.total_seconds())),
    )
    how = "changes by signed-in people" if backend.authenticates else "insecure: no sign-in"
    log.info("console on http://%s/ (%s)", settings.console_addr, how)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        backend.close()
        if metrics_server is not None:
            metrics_server.stop()


if __name__ == "__main__":
    main()
