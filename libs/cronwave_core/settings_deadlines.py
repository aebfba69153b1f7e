"""The workflow-store's deadline sweep and the webhooks it notifies
(``workflow_store.deadline_sweep``, ``workflow_store.notifier``); listed in
``settings.COMPONENTS``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from cronwave_core.config import Choice, Duration, Integer, Kind, setting
from cronwave_core.domain.deadlines import notifier_url
from cronwave_core.errors import InvalidArgument
from cronwave_core.settings_base import PREFIX, FromEnv


class _Urls(Kind[tuple[str, ...]]):
    """Comma-separated http(s) URLs."""

    rule = "comma-separated http:// or https:// URLs"

    def parse(self, raw: str) -> tuple[str, ...]:
        urls = tuple(u.strip() for u in raw.split(",") if u.strip())
        try:
            for url in urls:
                notifier_url(url, "url")
        except InvalidArgument:
            raise ValueError() from None
        return urls

    def show(self, value: tuple[str, ...]) -> str:
        return ",".join(value)


@dataclass(frozen=True, kw_only=True)
class DeadlineSettings(FromEnv):
    """Deadlines per schedule: the workflow-store's sweep that detects breaches and the
    webhooks it sends them to (see *Deadlines and notifiers*)."""

    sweep_interval: timedelta = setting(
        PREFIX + "DEADLINE_SWEEP_INTERVAL",
        Duration(maximum=timedelta(minutes=1)),
        timedelta(seconds=1),
        "between two deadline sweeps of the store: a breach is recorded within this long "
        "(plus one sweep's work) of its deadline; `0` turns the sweep off",
    )
    notify_urls: tuple[str, ...] = setting(
        PREFIX + "NOTIFY_URLS",
        _Urls(),
        (),
        "webhooks every schedule's breaches are sent to, besides the schedule's own (`--notify`)",
    )
    notify_format: str = setting(
        PREFIX + "NOTIFY_FORMAT",
        Choice("json", "slack"),
        "json",
        "the body of the `CRONWAVE_NOTIFY_URLS` posts: the breach as JSON, or Slack's "
        '`{"text": ...}`',
    )
    notify_timeout: timedelta = setting(
        PREFIX + "NOTIFY_TIMEOUT",
        Duration(positive=True, maximum=timedelta(minutes=1)),
        timedelta(seconds=5),
        "one webhook POST's timeout (connect and answer)",
    )
    notify_attempts: int = setting(
        PREFIX + "NOTIFY_ATTEMPTS",
        Integer(1, 20),
        5,
        "POSTs per delivery before it is recorded failed; a 2xx answer delivers it",
    )
    notify_backoff: timedelta = setting(
        PREFIX + "NOTIFY_BACKOFF",
        Duration(positive=True, maximum=timedelta(minutes=10)),
        timedelta(seconds=1),
        "the wait before a delivery's second POST, doubled before each next one (at most 5 min)",
    )
