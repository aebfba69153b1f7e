"""The web console's health check over HTTP (the services' are gRPC health checks)."""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import timedelta

from cronwave_core.errors import Unavailable

#: What the console's ``/healthz`` answers, so that another server on the port is
#: not taken for it.
CONSOLE_HEALTH = b"cronwave-console ok"


def wait_http_healthy(address: str, timeout: timedelta, alive: Callable[[], bool]) -> None:
    """Block until the console at ``address`` answers its ``/healthz``, or raise
    ``Unavailable`` -- at once when ``alive`` says its process has exited."""
    deadline = time.monotonic() + timeout.total_seconds()
    last = "no answer"
    while time.monotonic() < deadline:
        if not alive():
            raise Unavailable(f"{address}: the process exited before it was healthy")
        try:
            with urllib.request.urlopen(f"http://{address}/healthz", timeout=1.0) as resp:
                if resp.status == 200 and resp.read(64).startswith(CONSOLE_HEALTH):
                    return
                last = f"HTTP {resp.status}"
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            # HTTPException: not an HTTP answer at all, e.g. a connection to a port
            # nobody listens on yet that the kernel joined to itself (it echoes back)
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(0.05)
    raise Unavailable(f"{address} not healthy after {timeout.total_seconds():.0f}s ({last})")
