"""Every service serves Prometheus metrics over HTTP, and the figures match what
happened: a whole suite of real processes, scraped on loopback."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime

import grpc
import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import dispatcher_service_pb2 as dispatcher_pb
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from cronwave_core.convert import dt_to_ts, ts_to_dt
from cronwave_core.suite import Suite
from tests.harness.cluster import Cluster
from tests.harness.leases import leading_token
from tests.harness.suites import SuiteFactory, make_suite  # noqa: F401  (fixture)

SERVICES = ("workflow-store", "leader-election", "dispatcher", "worker", "cron-planner")
LAST_SUCCESS = "cronwave_schedule_last_success_timestamp_seconds"
LAST_RUN = "cronwave_schedule_last_run_timestamp_seconds"


def scrape(suite: Suite, name: str) -> dict[str, Metric]:
    address = suite.procs[name].metrics_address
    assert address, f"{name} has no metrics address"
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
        assert reply.status == 200
        text = reply.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(families: dict[str, Metric], sample: str, **labels: str) -> float:
    """The value of the one sample ``sample`` with exactly ``labels`` (0 if none)."""
    family = sample.removesuffix("_total").removesuffix("_count").removesuffix("_sum")
    found = [
        s.value
        for s in families[family].samples
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) <= 1, found
    return found[0] if found else 0.0


@pytest.fixture
def suite(make_suite: SuiteFactory) -> Iterator[Suite]:  # noqa: F811
    yield make_suite()


def trigger(cluster: Cluster, schedule_id: str) -> common_pb2.Run:
    reply = cluster.dispatcher.TriggerRun(
        dispatcher_pb.TriggerRunRequest(schedule_id=schedule_id), timeout=10
    )
    return cluster.finished(reply.run.run_id)


def test_every_service_serves_the_metrics_of_what_happened(suite: Suite) -> None:
    cluster = Cluster(suite)
    try:
        # Given two succeeded runs of one schedule and a failed run of another
        ok = cluster.schedule("cronwave.noop")
        bad = cluster.schedule("cronwave.fail", {"message": "card declined"})
        succeeded = [trigger(cluster, ok), trigger(cluster, ok)]
        failed = trigger(cluster, bad)
        assert {r.state for r in succeeded} == {common_pb2.RUN_STATE_SUCCEEDED}
        assert failed.state == common_pb2.RUN_STATE_FAILED
        # and a slot the leader recorded MISSED (an overlap skip), with its token
        token = leading_token(suite)
        missed = store_pb.MissedSlot(
            schedule_id=ok,
            fire_time=dt_to_ts(datetime(2024, 1, 1, 2, tzinfo=UTC)),
            reason="overlap_skip",
        )
        recorded = cluster.store.RecordMissedSlots(
            store_pb.RecordMissedSlotsRequest(slots=[missed], fencing_token=token), timeout=10
        )
        assert recorded.recorded == 1
        # and a write with a token the store never issued (refused)
        with pytest.raises(grpc.RpcError):
            cluster.store.RecordMissedSlots(
                store_pb.RecordMissedSlotsRequest(slots=[missed], fencing_token=token + 1000),
                timeout=10,
            )

        # When every service is scraped over HTTP
        scraped = {name: scrape(suite, name) for name in SERVICES}

        # Then the store counted the runs where they completed, by schedule, job type
        # and state, as the SDK saw them
        store = scraped["workflow-store"]
        runs = "cronwave_runs_total"
        assert value(store, runs, schedule=ok, job_type="cronwave.noop", state="succeeded") == 2
        assert value(store, runs, schedule=bad, job_type="cronwave.fail", state="failed") == 1
        assert value(store, runs, schedule=bad, state="succeeded") == 0
        # (triggers, no slots: no last success, but a last run by trigger)
        last = max(ts_to_dt(r.finished_at) for r in succeeded).timestamp()
        assert value(store, LAST_SUCCESS, schedule=ok) == 0
        assert value(store, LAST_RUN, schedule=ok, trigger="manual") == pytest.approx(
            last, abs=0.01
        )
        assert value(store, LAST_RUN, schedule=bad, trigger="manual") == pytest.approx(
            ts_to_dt(failed.finished_at).timestamp(), abs=0.01
        )
        missed_total = "cronwave_missed_slots_total"
        assert value(store, missed_total, schedule=ok, reason="overlap_skip") == 1
        assert value(store, "cronwave_fencing_rejections_total", reason="unissued") == 1
        assert value(store, "cronwave_store_rpc_duration_seconds_count", method="CompleteRuns") >= 1
        assert value(store, "cronwave_store_batch_size_sum", method="CompleteRuns") >= 3
        assert value(store, "cronwave_runs_running") == 0
        assert "cronwave_runs_pending" in store
        assert "cronwave_dead_letters" in store
        # and the worker the lateness per schedule and trigger (these runs are manual:
        # the lateness alert judges scheduled slots alone), the duration per job type
        worker = scraped["worker"]
        lateness = "cronwave_fire_lateness_seconds_count"
        assert value(worker, lateness, schedule=ok, trigger="manual") == 2
        assert value(worker, lateness, schedule=bad, trigger="manual") == 1
        assert value(worker, lateness, schedule=ok, trigger="scheduled") == 0
        duration = "cronwave_run_duration_seconds_count"
        assert value(worker, duration, job_type="cronwave.noop") == 2
        assert value(worker, duration, job_type="cronwave.fail") == 1
        assert value(worker, "cronwave_queue_depth", queue="default") == 0
        # and the planner that it leads its scope
        planner = scraped["cron-planner"]
        assert value(planner, "cronwave_leader", scope="planner") == 1
        # (a planner starved of CPU past its lease by a loaded test machine loses the
        # lease and wins it back: the counters then say so, and still add up)
        changes = "cronwave_leader_changes_total"
        acquired = value(planner, changes, scope="planner", change="acquired")
        lost = value(planner, changes, scope="planner", change="lost")
        assert acquired >= 1
        assert acquired - lost == 1  # it leads now
        # and every service serves its process metrics, and counts its lost spans
        for name, families in scraped.items():
            assert "process_cpu_seconds" in families, name
            assert value(families, "cronwave_spans_dropped_total", reason="export_failed") == 0
    finally:
        cluster.close()


def test_only_a_slot_sets_the_last_success_and_a_trigger_shows_as_a_manual_last_run(
    suite: Suite,
) -> None:
    cluster = Cluster(suite)
    try:
        # Given a schedule whose only run is a manual trigger that succeeded
        schedule_id = cluster.schedule("cronwave.noop")
        manual = trigger(cluster, schedule_id)
        assert manual.state == common_pb2.RUN_STATE_SUCCEEDED
        # When the store is scraped
        store = scrape(suite, "workflow-store")
        # Then the schedule has no last success (the alert on it stays armed), and the
        # trigger shows as its last manual run
        assert value(store, LAST_SUCCESS, schedule=schedule_id) == 0
        manual_at = ts_to_dt(manual.finished_at).timestamp()
        assert value(store, LAST_RUN, schedule=schedule_id, trigger="manual") == pytest.approx(
            manual_at, abs=0.01
        )
        assert value(store, LAST_RUN, schedule=schedule_id, trigger="scheduled") == 0

        # When a slot of it runs (a scheduled start, fenced with the planner's token)
        started = cluster.start(schedule_id, fencing_token=leading_token(suite))
        slot = cluster.finished(started.run.run_id)
        assert (slot.trigger, slot.state) == (
            common_pb2.TRIGGER_KIND_SCHEDULED,
            common_pb2.RUN_STATE_SUCCEEDED,
        )
        # Then the last success is the slot's, and each trigger keeps its last run
        store = scrape(suite, "workflow-store")
        slot_at = ts_to_dt(slot.finished_at).timestamp()
        assert value(store, LAST_SUCCESS, schedule=schedule_id) == pytest.approx(slot_at, abs=0.01)
        assert value(store, LAST_RUN, schedule=schedule_id, trigger="scheduled") == pytest.approx(
            slot_at, abs=0.01
        )
        assert value(store, LAST_RUN, schedule=schedule_id, trigger="manual") == pytest.approx(
            manual_at, abs=0.01
        )
    finally:
        cluster.close()


_UNIT_WORDS = re.compile(r"(duration|lateness|latency|timestamp|seconds|time)")


def test_metric_names_follow_the_prometheus_conventions(suite: Suite) -> None:
    # Given every service's metrics
    families = [f for name in SERVICES for f in scrape(suite, name).values()]
    ours = [f for f in families if f.name.startswith("cronwave_")]
    assert len({f.name for f in ours}) >= 12
    for family in ours:
        # Then a counter's samples end in _total
        if family.type == "counter":
            assert family.samples == [] or all(
                s.name == family.name + "_total" for s in family.samples
            ), family.name
        # and a time is in seconds, named so (no _ms, no _millis)
        if _UNIT_WORDS.search(family.name):
            assert family.name.endswith("_seconds"), family.name
        assert not re.search(r"_(ms|millis|milliseconds|us|minutes|hours)(_|$)", family.name)
        # and a name is snake case
        assert re.fullmatch(r"[a-z][a-z0-9_]*", family.name), family.name
