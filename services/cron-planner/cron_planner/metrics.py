"""The cron-planner's Prometheus metrics: whether this replica leads its scope, how
often that changed, and the slots it fired (served by the bootstrap, see
``cronwave_core.metrics``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cronwave_core.metrics import register

LEADER_CHANGES = Counter(
    "cronwave_leader_changes",
    "Times this planner replica became leader (change=acquired) or stopped leading "
    "(change=lost: lease lost, refused, or stepped down on a stale token), by scope",
    ["scope", "change"],
)

#: The planner's liveness as an operator judges it: slots fired, not a process that
#: answers (the alert PlannerNotFiring, deploy/prometheus/alerts.yaml).
SLOTS_FIRED = Counter(
    "cronwave_slots_fired",
    "Slots this planner replica fired and the dispatcher accepted (a run recorded, or "
    "the one already recorded returned), by trigger: scheduled, catchup, backfill",
    ["trigger"],
)


class LeaderGauge(Collector):
    """``cronwave_leader``: 1 while this replica's lease is valid, else 0; read on
    scrape from the elector (``is_leader`` takes its lock briefly), so it drops to 0
    the moment the validity runs out, with no timer of its own."""

    def __init__(self, scope: str, is_leader: Callable[[], bool]) -> None:
        self.scope, self.is_leader = scope, is_leader

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            "cronwave_leader",
            "1 while this planner replica holds the scope's lease, else 0",
            labels=["scope"],
        )
        gauge.add_metric([self.scope], 1.0 if self.is_leader() else 0.0)
        yield gauge

    def describe(self) -> Iterator[Metric]:
        return iter(())


def install(scope: str, is_leader: Callable[[], bool]) -> None:
    register(LeaderGauge(scope, is_leader))
