"""Head sampling per schedule (``trace_sample``), decided where a run's trace begins:
a run not sampled leaves no span anywhere when it succeeds on time and within its
deadline; when it fails, is retried or succeeds past its deadline, its worker's spans
and its job process's (held back until the outcome was known) are kept; a sampled
run, and every run of a schedule labelled critical, is traced whole across the
services."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronwave._models import Run
from cronwave_core.telemetry.run_span import RUN_SPAN, run_sampled
from cronwave_core.telemetry.vocabulary import ATTR_RUN_ID
from cronwave_waterfall import Span
from tests.harness.clients import client_for
from tests.harness.cluster import REPO
from tests.harness.suites import SuiteFactory
from tests.helpers import eventually, fresh
from tests.metrics.test_metrics_endpoints import scrape, value
from tests.tracing.jobs import CARD_SPAN, CHARGE_SPAN
from tests.tracing.support import QUIET, WAIT, spans_of

pytestmark = pytest.mark.slow

#: Every service a run crosses, each of which writes spans of a sampled run.
SERVICES = {"cron-planner", "dispatcher", "workflow-store", "worker"}
#: The one-off fires this long after the schedules are made (the planner sees them).
LEAD = timedelta(seconds=3)
ATTR_TRACE_KEPT = "cronwave.trace.kept"


def _env() -> dict[str, str]:
    """Drill job types, and no lateness rule in reach of a loaded machine: a run kept
    here is kept for its outcome, not for starting late."""
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))
    return {
        **QUIET,
        "CRONWAVE_JOB_MODULES": "tests.reliability.jobs,tests.tracing.jobs",
        "PYTHONPATH": pythonpath,
        "CRONWAVE_TRACE_KEEP_LATE": "1h",
    }


@dataclass(frozen=True)
class Case:
    """A schedule of one one-off fire, made with ``options``."""

    name: str
    options: dict[str, Any]
    state: str
    attempts: int


CASES = [
    Case("ratio 0, succeeds", {"trace_sample": 0.0, "job_type": "cronwave.noop"}, "SUCCEEDED", 1),
    Case(
        "ratio 0, fails",
        {"trace_sample": 0.0, "job_type": "drill.flaky", "payload": {"declined": True}},
        "FAILED",
        1,
    ),
    Case(
        "ratio 0, retried",
        {"trace_sample": 0.0, "job_type": "drill.flaky", "payload": {"succeed_at_attempt": 2}},
        "SUCCEEDED",
        2,
    ),
    Case(
        "ratio 0, fails in its job's own span",
        {"trace_sample": 0.0, "job_type": "drill.traced_failure"},
        "FAILED",
        1,
    ),
    Case(
        "ratio 0, overruns in its job's own span",
        {"trace_sample": 0.0, "job_type": "drill.traced_runaway"},
        "TIMED_OUT",
        1,
    ),
    Case(
        "ratio 0, succeeds past its deadline",
        {
            "trace_sample": 0.0,
            "job_type": "cronwave.sleep",
            "payload": {"seconds": 2.5},
            "deadline": timedelta(seconds=1),
        },
        "SUCCEEDED",
        1,
    ),
    Case(
        "ratio 0, succeeds within its deadline",
        {
            "trace_sample": 0.0,
            "job_type": "cronwave.sleep",
            "payload": {"seconds": 0.2},
            "deadline": timedelta(minutes=5),
        },
        "SUCCEEDED",
        1,
    ),
    Case("ratio 1", {"trace_sample": 1.0, "job_type": "cronwave.noop"}, "SUCCEEDED", 1),
    Case(
        "ratio 0, critical",
        {"trace_sample": 0.0, "job_type": "cronwave.noop", "labels": {"critical": "true"}},
        "SUCCEEDED",
        1,
    ),
]


@dataclass(frozen=True)
class Traced:
    runs: dict[str, Run]  # by case name
    spans: list[Span]
    worker_metrics: dict[str, Any]

    def of(self, name: str) -> list[Span]:
        """Every span of the case's run: in its trace, or naming its run."""
        run = self.runs[name]
        return [
            s
            for s in self.spans
            if s.trace_id == run.trace_id or s.attributes.get(ATTR_RUN_ID) == run.run_id
        ]


@pytest.fixture(scope="module")
def traced(shared_suite: SuiteFactory) -> Iterator[Traced]:
    """One run of each case, fired by the planner, finished; then every span the suite
    wrote (it is stopped for that)."""
    suite = shared_suite(env=_env())
    at = datetime.now(UTC) + LEAD
    ids = {}
    with client_for(suite) as client:
        for case in CASES:
            ids[case.name] = fresh("sampled")
            client.create_schedule(ids[case.name], one_off=[at], **case.options)
        runs = {}
        for case in CASES:

            def fired(sid: str = ids[case.name]) -> list[Run]:
                found = client.list_runs(sid, limit=1)
                assert found, f"{sid} has not fired yet"
                return found

            first = eventually(fired, timeout=30, what=f"the fire of {case.name}")[0]
            runs[case.name] = client.wait_run(first.run_id, timeout=WAIT)
    for case in CASES:
        run = runs[case.name]
        assert (run.state, run.attempt) == (case.state, case.attempts), (case.name, run)
    metrics = scrape(suite, "worker")
    yield Traced(runs, spans_of(suite), metrics)


def test_the_decision_is_in_each_run_s_trace_id(traced: Traced) -> None:
    sampled = {name: run_sampled(int(run.trace_id, 16)) for name, run in traced.runs.items()}
    assert sampled == {
        "ratio 0, succeeds": False,
        "ratio 0, fails": False,
        "ratio 0, retried": False,
        "ratio 0, fails in its job's own span": False,
        "ratio 0, overruns in its job's own span": False,
        "ratio 0, succeeds past its deadline": False,
        "ratio 0, succeeds within its deadline": False,
        "ratio 1": True,
        "ratio 0, critical": True,
    }


@pytest.mark.parametrize("name", ["ratio 0, succeeds", "ratio 0, succeeds within its deadline"])
def test_a_run_not_sampled_that_succeeds_in_time_leaves_no_span(traced: Traced, name: str) -> None:
    assert traced.of(name) == []


def test_a_failed_run_not_sampled_keeps_its_worker_s_spans(traced: Traced) -> None:
    spans = traced.of("ratio 0, fails")
    names = {s.name for s in spans}
    assert {RUN_SPAN, "cronwave.attempt", "worker.pickup", "worker.execute"} <= names, names
    assert "job.body" in names  # recorded in its job process, handed to the worker
    (run_span,) = [s for s in spans if s.name == RUN_SPAN]
    assert run_span.attributes[ATTR_TRACE_KEPT] == "failed"
    assert run_span.attributes["cronwave.run.state"] == "FAILED"
    # the other hops did not record the run, which was not sampled where they ran
    assert {s.service for s in spans} == {"worker"}


def test_a_failed_run_not_sampled_keeps_its_job_process_s_spans_in_place(traced: Traced) -> None:
    spans = traced.of("ratio 0, fails in its job's own span")
    by_name = {s.name: s for s in spans}
    assert {CHARGE_SPAN, CARD_SPAN, "job.body", "worker.execute", RUN_SPAN} <= set(by_name)
    # each beneath its parent: the job's spans beneath its body, the body beneath the
    # worker's execute, every span in the run's one trace
    assert by_name[CARD_SPAN].parent_span_id == by_name[CHARGE_SPAN].span_id
    assert by_name[CHARGE_SPAN].parent_span_id == by_name["job.body"].span_id
    assert by_name["job.body"].parent_span_id == by_name["worker.execute"].span_id
    ids = {s.span_id for s in spans}
    assert all(s.parent_span_id in ids for s in spans if s.name != RUN_SPAN)
    assert {s.trace_id for s in spans} == {
        traced.runs["ratio 0, fails in its job's own span"].trace_id
    }
    assert by_name[CHARGE_SPAN].attributes["drill.items"] == 3
    assert by_name[RUN_SPAN].attributes[ATTR_TRACE_KEPT] == "failed"


def test_a_body_stopped_at_its_limit_keeps_its_job_process_s_spans(traced: Traced) -> None:
    # its job process is stopped: it exported what it held itself, as it stopped
    spans = traced.of("ratio 0, overruns in its job's own span")
    by_name = {s.name: s for s in spans}
    assert {CHARGE_SPAN, "job.body", "worker.execute", RUN_SPAN} <= set(by_name), set(by_name)
    assert by_name[CHARGE_SPAN].parent_span_id == by_name["job.body"].span_id
    assert by_name["job.body"].parent_span_id == by_name["worker.execute"].span_id
    assert by_name[RUN_SPAN].attributes[ATTR_TRACE_KEPT] == "timed_out"


def test_a_run_not_sampled_that_succeeded_past_its_deadline_keeps_its_spans(
    traced: Traced,
) -> None:
    spans = traced.of("ratio 0, succeeds past its deadline")
    names = {s.name for s in spans}
    assert {RUN_SPAN, "cronwave.attempt", "worker.execute", "job.body"} <= names, names
    (run_span,) = [s for s in spans if s.name == RUN_SPAN]
    assert run_span.attributes[ATTR_TRACE_KEPT] == "deadline"
    assert run_span.attributes["cronwave.run.state"] == "SUCCEEDED"


def test_a_retried_run_not_sampled_keeps_each_attempt_s_spans(traced: Traced) -> None:
    spans = traced.of("ratio 0, retried")
    attempts = sorted(
        (s.attributes["cronwave.attempt"], s.attributes[ATTR_TRACE_KEPT])
        for s in spans
        if s.name == "cronwave.attempt"
    )
    assert attempts == [(1, "failed"), (2, "retried")], attempts
    assert [s.name for s in spans].count("worker.execute") == 2
    # each attempt's body, from its job process, once
    bodies = [s for s in spans if s.name == "job.body"]
    assert len(bodies) == len({s.span_id for s in bodies}) == 2
    assert [s.attributes[ATTR_TRACE_KEPT] for s in spans if s.name == RUN_SPAN] == ["retried"]


@pytest.mark.parametrize("name", ["ratio 1", "ratio 0, critical"])
def test_a_sampled_run_is_traced_whole_in_every_service(traced: Traced, name: str) -> None:
    spans = traced.of(name)
    assert {s.service for s in spans} == SERVICES
    assert len({s.trace_id for s in spans}) == 1
    assert [s.name for s in spans].count(RUN_SPAN) == 1
    assert not any(ATTR_TRACE_KEPT in s.attributes for s in spans)


def test_the_worker_counts_what_became_of_each_delivery_not_sampled(traced: Traced) -> None:
    # two deliveries dropped (on time and within the deadline, succeeded), three failed
    # (the failing runs, the retried run's first attempt), one retried (its second),
    # one timed out, one past its deadline
    counted = {
        decision: value(
            traced.worker_metrics, "cronwave_unsampled_deliveries_total", decision=decision
        )
        for decision in ("dropped", "failed", "retried", "timed_out", "deadline", "late")
    }
    assert counted == {
        "dropped": 2,
        "failed": 3,
        "retried": 1,
        "timed_out": 1,
        "deadline": 1,
        "late": 0,
    }
