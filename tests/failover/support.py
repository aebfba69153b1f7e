"""What the failover tests share: short leases. Planner replicas started with their own
environment are ``tests.harness.planner.start_planner_process``; the TCP proxy is
``cronwave_bench.faults``'s, the Redis a test owns ``tests.harness.redis.own_redis``."""

from __future__ import annotations

from cronwave_bench.failover import FAST, Drill

LEASE_ENV = FAST.env()
TTL = FAST.ttl.total_seconds()
RETRY = FAST.retry_interval.total_seconds()
# Taking over costs a few RPCs on top of the lease timing (campaign, the store's newest
# run, the start); on a busy 2-core machine they stay well inside this.
TAKEOVER_WORK = 0.5


def log_text(drill: Drill, name: str) -> str:
    return drill.suite.procs[name].log_path.read_text(errors="replace")
