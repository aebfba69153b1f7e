"""The web console's settings (``services/console``), one of ``settings.COMPONENTS``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from cronwave_core.config import Address, Duration, FromEnv, Integer, Url, setting

#: The console's port under ``cronwave up``; apart from ``settings.DEFAULT_PORTS``
#: because only a suite asked for it (``cronwave up``, ``cronwave demo``) runs one.
CONSOLE_PORT = 7407


@dataclass(frozen=True, kw_only=True)
class ConsoleSettings(FromEnv):
    """The web console (``services/console``): where it listens and what it links to."""

    console_addr: str = setting(
        "CRONWAVE_CONSOLE_ADDR",
        Address(),
        f"127.0.0.1:{CONSOLE_PORT}",
        "the web console's HTTP address; changes need a person signed in with an API "
        "key, on any address (see *The web console*)",
    )
    jaeger_url: str | None = setting(
        "CRONWAVE_JAEGER_URL",
        Url("the Jaeger UI's base URL, such as http://localhost:16686", "http", "https"),
        None,
        "a run's page links its trace at `<url>/trace/<trace id>`, and with "
        "`OTEL_EXPORTER_OTLP_ENDPOINT` set the console reads its waterfalls' spans from "
        "that Jaeger; unset: no link",
    )
    console_slots: int = setting(
        "CRONWAVE_CONSOLE_SLOTS",
        Integer(minimum=1, maximum=200),
        24,
        "how many recent runs (slots and manual runs) each schedule's strip shows",
    )
    console_late_after: timedelta = setting(
        "CRONWAVE_CONSOLE_LATE_AFTER",
        Duration(),
        timedelta(seconds=5),
        "fire lateness above which a run that succeeded is shown as late",
    )
