"""How a worker runs ``billing.nightly``: its databases, its gateway, its heartbeat
timeout and the failure drill, from the worker's settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from cronwave_billing.settings import BillingDemoSettings, BillingDrills
from cronwave_core import config
from cronwave_core.settings import TestHooks, WorkerSettings

#: A beat every second (a third of it), so the checkpoint a resumed attempt starts
#: from, and the progress a user watches, is at most about a second old; a dead
#: worker's run is taken over this long after its last beat
#: (``CRONWAVE_BILLING_HEARTBEAT_TIMEOUT``'s default).
DEFAULT_HEARTBEAT_TIMEOUT: timedelta = dict(config.variables(BillingDemoSettings))[
    "billing_heartbeat_timeout"
].default


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
    def from_settings(
        cls,
        demo: BillingDemoSettings,
        hooks: TestHooks,
        drills: BillingDrills,
        worker: WorkerSettings,
    ) -> BillingSettings:
        return cls(
            database_url=demo.billing_database_url,
            gateway_addr=demo.gateway_addr,
            heartbeat_timeout=demo.billing_heartbeat_timeout,
            # A drill: TestHooks refuses it in a worker not started for tests.
            crash_after_charges=drills.billing_crash_after_charges if hooks.enabled else 0,
            worker_pid=worker.parent_pid,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BillingSettings:
        return cls.from_settings(
            BillingDemoSettings.from_env(env),
            TestHooks.from_env(env),
            BillingDrills.from_env(env),
            WorkerSettings.from_env(env),
        )
