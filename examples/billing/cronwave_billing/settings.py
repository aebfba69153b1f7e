"""The billing example's settings, from ``CRONWAVE_*`` variables as cronwave's own are
(``cronwave_core.config``): shown in cronwave's configuration table and checked by
``check_env`` because the package's extension lists them (``cronwave_billing.extension``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from cronwave_core.config import Duration, FromEnv, Integer, setting
from cronwave_core.settings import DATABASE_URL, in_data_dir, listen_address
from cronwave_core.settings_base import PREFIX

#: The sandbox payment gateway's port on a suite of fixed ports (``cronwave up``).
GATEWAY_PORT = 7406


@dataclass(frozen=True, kw_only=True)
class BillingDemoSettings(FromEnv):
    """The billing demo (the job package ``examples/billing``): the ``billing.nightly``
    job's database and its sandbox payment gateway (``cronwave_billing.gateway``)."""

    billing_database_url: str = setting(
        PREFIX + "BILLING_DATABASE_URL",
        DATABASE_URL,
        in_data_dir("billing.db"),
        "the billing job's own database",
        secret=True,
    )
    billing_heartbeat_timeout: timedelta = setting(
        PREFIX + "BILLING_HEARTBEAT_TIMEOUT",
        Duration(positive=True),
        timedelta(seconds=3),
        "heartbeat timeout of `billing.nightly`",
    )
    gateway_addr: str = listen_address(
        "GATEWAY_ADDR", GATEWAY_PORT, "the billing demo's sandbox payment gateway"
    )
    gateway_database_url: str = setting(
        PREFIX + "GATEWAY_DATABASE_URL",
        DATABASE_URL,
        in_data_dir("gateway.db"),
        "the payment gateway's own database",
        secret=True,
    )


@dataclass(frozen=True, kw_only=True)
class BillingDrills(FromEnv):
    """The billing demo's failure drills, for tests only; never set in production. A
    process given one without `CRONWAVE_TEST_HOOKS=1` does not start (``TestHooks``), and
    the gateway answers `SetFaults` with UNIMPLEMENTED."""

    gateway_timeout_after_commit: int = setting(
        PREFIX + "GATEWAY_TIMEOUT_AFTER_COMMIT",
        Integer(0),
        0,
        "the gateway holds the answers of the first N charge calls past their callers' "
        "deadlines (see *Drills*)",
    )
    billing_crash_after_charges: int = setting(
        PREFIX + "BILLING_CRASH_AFTER_CHARGES",
        Integer(0),
        0,
        "a billing attempt SIGKILLs its worker right after its N-th gateway answer (see *Drills*)",
    )
