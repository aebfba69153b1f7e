"""What the failover tests share: short leases and planners started with their own
environment. The TCP proxy and the Redis a test owns are in ``cronwave_bench.faults``."""

from __future__ import annotations

from collections.abc import Mapping

from cronwave_bench.failover import FAST, Drill
from cronwave_core.suite import Proc, Suite

LEASE_ENV = FAST.env()
TTL = FAST.ttl.total_seconds()
RETRY = FAST.retry_interval.total_seconds()
# Taking over costs a few RPCs on top of the lease timing (campaign, the store's newest
# run, the start); on a busy 2-core machine they stay well inside this.
TAKEOVER_WORK = 0.5


def start_planner(suite: Suite, index: int, env: Mapping[str, str] | None = None) -> Proc:
    """Start planner replica ``index`` with ``env`` on top of the suite's environment."""
    base = suite.config.env
    suite.config.env = {**base, **(env or {})}
    try:
        return suite.start_service("cron-planner", index=index)
    finally:
        suite.config.env = base


def log_text(drill: Drill, name: str) -> str:
    return drill.suite.procs[name].log_path.read_text(errors="replace")
