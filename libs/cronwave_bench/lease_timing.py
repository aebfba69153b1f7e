"""The planner lease settings a drill runs with; drills and tests use the production
defaults (``FAST``) unless they say otherwise."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from cronwave_core.settings import LeaseSettings


@dataclass(frozen=True)
class LeaseTiming:
    """The planner lease settings a drill runs with (``CRONWAVE_LEASE_*``)."""

    ttl: timedelta = timedelta(seconds=1.5)
    renew_interval: timedelta = timedelta(seconds=0.3)
    retry_interval: timedelta = timedelta(seconds=0.2)

    def __post_init__(self) -> None:
        if not timedelta(0) < self.renew_interval < self.ttl:
            raise ValueError("LeaseTiming needs 0 < renew_interval < ttl")
        if self.retry_interval <= timedelta(0):
            raise ValueError("LeaseTiming needs a positive retry_interval")

    @classmethod
    def defaults(cls) -> LeaseTiming:
        """The production defaults, as ``LeaseSettings`` has them with nothing set."""
        lease = LeaseSettings.from_env({})
        return cls(lease.ttl, lease.renew_interval, lease.retry_interval)

    @property
    def safety_margin(self) -> timedelta:
        # How long before the lease can expire the planner stops leading; the formula
        # of cron_planner.elector.safety_margin (a library never imports a service).
        return max(self.renew_interval, self.ttl * 0.2)

    def env(self) -> dict[str, str]:
        return {
            "CRONWAVE_LEASE_TTL": str(self.ttl.total_seconds()),
            "CRONWAVE_LEASE_RENEW_INTERVAL": str(self.renew_interval.total_seconds()),
            "CRONWAVE_LEASE_RETRY_INTERVAL": str(self.retry_interval.total_seconds()),
        }

    def figures(self) -> dict[str, float]:
        return {
            "ttl_s": self.ttl.total_seconds(),
            "renew_interval_s": self.renew_interval.total_seconds(),
            "retry_interval_s": self.retry_interval.total_seconds(),
            "safety_margin_s": self.safety_margin.total_seconds(),
        }


#: The production defaults (a crash costs under two seconds): the tests' and the
#: drills' lease unless they name another.
FAST = LeaseTiming()
