"""How a worker runs ``billing.nightly``: its databases, its gateway, its heartbeat
timeout and the failure drill, from the worker's settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from cronwave_core.errors import ConfigurationError
from cronwave_core.settings import Settings

HEARTBEAT_VAR = "CRONWAVE_BILLING_HEARTBEAT_TIMEOUT"
CRASH_VAR = "CRONWAVE_BILLING_CRASH_AFTER_CHARGES"
#: Set by a worker in the environment of the job processes it starts.
WORKER_PID_VAR = "CRONWAVE_JOB_PARENT_PID"

#: A beat every second (a third of it), so the checkpoint a resumed attempt starts
#: from, and the progress a user watches, is at most about a second old; a dead
#: worker's run is taken over this long after its last beat.
DEFAULT_HEARTBEAT_TIMEOUT = timedelta(seconds=3)


@dataclass(frozen=True)
class BillingSettings:
    """``crash_after_charges`` is a failure drill, 0 (off) unless set in a worker started
    for tests (``CRONWAVE_TEST_HOOKS=1``): the attempt
    kills its worker with SIGKILL right after its N-th gateway answer, before
    recording it, i.e. in the one place where the gateway has charged and the job's
    database does not know yet. ``worker_pid`` is the worker that started the job
    process this runs in (0: the job runs in the worker's own process)."""

    database_url: str
    gateway_addr: str
    heartbeat_timeout: timedelta = DEFAULT_HEARTBEAT_TIMEOUT
    crash_after_charges: int = 0
    worker_pid: int = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> BillingSettings:
        return cls(
            database_url=settings.billing_database_url,
            gateway_addr=settings.gateway_addr,
            heartbeat_timeout=_seconds(settings.extra, HEARTBEAT_VAR, DEFAULT_HEARTBEAT_TIMEOUT),
            # A drill: only in a worker started for tests (Settings refuses it elsewhere).
            crash_after_charges=_count(settings.extra, CRASH_VAR) if settings.test_hooks else 0,
            worker_pid=_count(settings.extra, WORKER_PID_VAR),
        )


def _seconds(env: Mapping[str, str], name: str, default: timedelta) -> timedelta:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw.removesuffix("s"))
    except ValueError as exc:
        raise ConfigurationError(f"{name}: expected seconds (e.g. 3), got {raw!r}") from exc
    if value <= 0:
        raise ConfigurationError(f"{name}: must be positive, got {raw!r}")
    return timedelta(seconds=value)


def _count(env: Mapping[str, str], name: str) -> int:
    raw = env.get(name)
    if not raw:
        return 0
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name}: expected a whole number, got {raw!r}") from exc
    if value < 0:
        raise ConfigurationError(f"{name}: must not be negative, got {value}")
    return value
