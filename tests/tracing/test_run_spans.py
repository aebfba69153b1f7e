"""Every run's trace is its whole waterfall: one root, ``cronwave.run``, from the fire
decision (or the trigger's arrival) to after its durable completion, each attempt a
child of it, and every span of it placed (``cronwave.hop`` and ``cronwave.kind``),
on each path a run takes: fired by the planner, triggered, backfilled, retried,
cancelled before a worker took it, and resumed after its worker was killed."""

from __future__ import annotations

import json
import os
import re
import signal
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave._models import Run
from cronwave_core.suite import Suite
from cronwave_core.telemetry.run_span import attempt_span_id, run_span_id, run_start_ns
from cronwave_core.telemetry.vocabulary import ATTR_HOP, ATTR_KIND, ATTR_RUN_ID, RUN_HOP
from cronwave_waterfall import Span, build_runs
from cronwave_waterfall.critical_path import critical_path, steps
from tests.harness.clients import backfill_last_slot, client_for
from tests.harness.cluster import REPO
from tests.helpers import eventually, fresh
from tests.reliability.jobs import HEARTBEAT_TIMEOUT
from tests.reliability.support import register_drill
from tests.tracing.support import QUIET, WAIT, scheduled_tick, spans_of

pytestmark = pytest.mark.slow

#: The root covers at least this share of its trace's extent (the issue's goal).
ROOT_SHARE = 0.99
#: A SQL span is named by its operation and table (``INSERT runs``), never a path.
SQL_NAME = re.compile(r"^[A-Z]+( [A-Za-z_][A-Za-z0-9_]*)?$|^connect$")
#: The gap in ``worker.execute`` before its first child (the body's span, or the
#: hand-over to it) that is not accounted for by a span.
UNACCOUNTED_NS = 2_000_000
#: The worker's spans of an attempt, from its claim on: beneath the attempt's span.
ATTEMPT_PARTS = {"worker.hold", "worker.execute", "worker.complete"}
#: The killed worker dies this many 50-ms steps into its run's body.
KILL_AT_STEP = 20


def _env() -> dict[str, str]:
    """Drill job types (short heartbeat timeouts, scaled retries) and a sweeper that
    looks often, so a killed worker's run is handed out again within seconds."""
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))
    return {
        "CRONWAVE_JOB_MODULES": "tests.reliability.jobs",
        "PYTHONPATH": pythonpath,
        "CRONWAVE_SWEEP_INTERVAL": "0.2",
        "CRONWAVE_SWEEP_PENDING_AFTER": "2",
        "CRONWAVE_JOB_KILL_GRACE": "0.5",
    }


@dataclass(frozen=True)
class Path:
    name: str
    run_id: str
    attempts: int


def _triggered(suite: Suite, job_type: str = "cronwave.noop", payload: dict | None = None) -> Run:
    sid = fresh("traced")
    with client_for(suite) as client:
        client.create_schedule(sid, cron="0 2 * * *", job_type=job_type, payload=payload)
        return client.trigger(sid)


def _finished(suite: Suite, run_id: str) -> Run:
    with client_for(suite) as client:
        return client.wait_run(run_id, timeout=WAIT)


def _killed_and_resumed(suite: Suite) -> Path:
    """A run of checkpointed steps whose worker is killed (SIGKILL) half-way; the other
    worker resumes it once its heartbeat lapsed."""
    run = _triggered(suite, "drill.steps", {"steps": 80, "step_seconds": 0.05})
    with client_for(suite) as client:

        def running() -> str:
            now = client.get_run(run.run_id)
            assert now.state == "RUNNING" and now.checkpoint_json, now.state
            # a second into the body: the worker has sent the spans of its claim (it
            # sends every 500 ms; what it had not sent dies with it)
            assert json.loads(now.checkpoint_json)["step"] >= KILL_AT_STEP, now.checkpoint_json
            return now.worker_id

        holder = eventually(running, timeout=30, what="the run's body checkpointing")
        os.kill(suite.procs[holder].pid, signal.SIGKILL)  # a pool's worker id is its name
        done = client.wait_run(run.run_id, timeout=WAIT + HEARTBEAT_TIMEOUT)
    assert (done.state, done.attempt) == ("SUCCEEDED", 2), (done.state, done.attempt)
    return Path("resumed after a kill", run.run_id, 2)


def _paths(suite: Suite) -> list[Path]:
    scheduled = scheduled_tick(suite)
    triggered = _finished(suite, _triggered(suite).run_id)
    assert triggered.state == "SUCCEEDED"
    sid = fresh("backfilled")
    with client_for(suite) as client:
        client.create_schedule(sid, cron="0 3 * * *", job_type="cronwave.noop")
        backfilled = backfill_last_slot(client, sid)
    retried = _finished(suite, _triggered(suite, "drill.flaky", {"succeed_at_attempt": 3}).run_id)
    assert (retried.state, retried.attempt) == ("SUCCEEDED", 3)
    # a run of a queue no worker serves, cancelled while it waits: the store ends it
    with suite.channel("workflow-store") as channel:
        register_drill(store_grpc.WorkflowStoreServiceStub(channel), "drill.bulk")
    waiting = _triggered(suite, "drill.bulk")
    with client_for(suite) as client:
        cancelled = client.cancel_run(waiting.run_id, reason="not needed")
    assert (cancelled.state, cancelled.attempt) == ("CANCELLED", 0)
    return [
        Path("scheduled", scheduled, 1),
        Path("triggered", triggered.run_id, 1),
        Path("backfill", backfilled.run_id, 1),
        Path("retried", retried.run_id, 3),
        Path("cancelled before any attempt", cancelled.run_id, 0),
        _killed_and_resumed(suite),
    ]


def _held_together(suite: Suite, count: int = 40) -> None:
    """``count`` runs due at one instant a few seconds away, all finished: claimed
    ahead and held, each released to its pool thread at once (its fire time is within
    the release lead) while the consumer thread that claimed it is still returning."""
    at = (datetime.now(UTC) + timedelta(seconds=4)).replace(microsecond=0)
    ids = [fresh("held") for _ in range(count)]
    with client_for(suite) as client:
        for sid in ids:
            client.create_schedule(sid, job_type="cronwave.noop", one_off=[at])
        for sid in ids:
            runs = eventually(lambda sid=sid: client.list_runs(sid, limit=1), timeout=30,
                              what="the fire")  # fmt: skip
            assert client.wait_run(runs[0].run_id, timeout=WAIT).state == "SUCCEEDED"


def test_each_path_s_trace_has_one_run_span_over_it_and_every_span_placed(make_suite) -> None:
    # Given runs of every path through a traced suite of two workers (the second
    # resumes the run of the one killed)
    suite = make_suite(env={**QUIET, **_env()}, worker_pools={"default": 2})
    paths = _paths(suite)
    _held_together(suite)

    # When their spans are read back
    spans = spans_of(suite)

    # Then each run's trace is whole, placed and covered by its run span
    problems = {p.name: _problems(spans, p) for p in paths}
    assert not any(problems.values()), problems
    # and every trace context a worker entered for a run it held (the scheduled run
    # and a burst were claimed ahead of their fire time) was left where it was entered
    logs = "".join(path.read_text() for path in suite.log_dir.glob("worker*.log"))
    assert "Failed to detach context" not in logs


def _problems(spans: list[Span], path: Path) -> list[str]:
    """What is wrong with the trace of ``path``'s run (nothing: an empty list)."""
    traces = {s.trace_id for s in spans if s.attributes.get(ATTR_RUN_ID) == path.run_id}
    if len(traces) != 1:
        return [f"{len(traces)} traces name the run"]
    (trace_hex,) = traces
    trace = [s for s in spans if s.trace_id == trace_hex]
    trace_id = int(trace_hex, 16)
    problems = []
    # every span says its hop and its kind ...
    unplaced = sorted({s.name for s in trace if not _placed(s)})
    if unplaced:
        problems.append(f"spans without hop or kind: {unplaced}")
    # ... a SQL span its operation and table, not where the database lives
    badly_named = sorted({s.name for s in trace if "db.system" in s.attributes} - _sql_names(trace))
    if badly_named:
        problems.append(f"SQL spans not named by operation and table: {badly_named}")
    # the trace has one root, the run span, begun when its trace id says ...
    ids = {s.span_id for s in trace}
    roots = [s for s in trace if s.parent_span_id not in ids]
    if [r.name for r in roots] != ["cronwave.run"]:
        return [*problems, f"roots: {sorted(r.name for r in roots)}"]
    (root,) = roots
    if root.span_id != f"{run_span_id(trace_id):016x}" or root.parent_span_id:
        problems.append(f"the run span's ids: {root.span_id} under {root.parent_span_id!r}")
    if root.start_ns != run_start_ns(trace_id) or root.attributes.get(ATTR_RUN_ID) != path.run_id:
        problems.append(f"the run span: {root}")
    # ... which covers the trace
    first, last = min(s.start_ns for s in trace), max(s.end_ns for s in trace)
    share = (min(root.end_ns, last) - max(root.start_ns, first)) / (last - first)
    if share < ROOT_SHARE:
        problems.append(f"the run span covers {share:.1%} of the trace")
    # each attempt is a child of the run span, with the spans of its claim beneath it
    attempts = [s for s in trace if s.name == "cronwave.attempt"]
    expected = {f"{attempt_span_id(trace_id, n):016x}" for n in range(1, path.attempts + 1)}
    if {a.span_id for a in attempts} != expected or len(attempts) != path.attempts:
        problems.append(
            f"attempt spans: {sorted(a.attributes.get('cronwave.attempt') for a in attempts)}"
        )
    if any(a.parent_span_id != root.span_id for a in attempts):
        problems.append("an attempt's span is not a child of the run span")
    outside = sorted(
        s.name
        for s in trace
        if s.name in ATTEMPT_PARTS and s.parent_span_id not in {a.span_id for a in attempts}
    )
    if outside:
        problems.append(f"spans of an attempt not beneath an attempt's span: {outside}")
    problems += _execute_accounted(trace)
    # and the waterfall places every span but the run's own in a hop
    (run,) = [r for r in build_runs(trace) if r.run_id == path.run_id]
    own = {"cronwave.run", "cronwave.attempt", "worker.hold"}
    hopless = sorted({s.name for s in run.spans if s.attributes.get(ATTR_HOP) == RUN_HOP} - own)
    if hopless:
        problems.append(f"spans of no hop: {hopless}")
    # and its critical path (`cronwave waterfall --run`) covers the run and, when a
    # worker ran it, goes through the body
    on_path = critical_path(run)
    if on_path[0].start_ns != first or on_path[-1].end_ns != last:
        problems.append("the critical path does not cover the run")
    hops = [step.hop for step in steps(on_path)]
    if path.attempts and "execute" not in hops:
        problems.append(f"the critical path misses execute: {hops}")
    return problems


def _placed(span: Span) -> bool:
    return bool(span.attributes.get(ATTR_HOP)) and bool(span.attributes.get(ATTR_KIND))


def _sql_names(trace: list[Span]) -> set[str]:
    return {s.name for s in trace if SQL_NAME.match(s.name)}


def _execute_accounted(trace: list[Span]) -> list[str]:
    """Each execute span's time before its first child is a span's: the body's, or the
    hand-over to it (``job.start``)."""
    children: dict[str, list[Span]] = defaultdict(list)
    for s in trace:
        children[s.parent_span_id].append(s)
    problems = []
    for execute in (s for s in trace if s.name == "worker.execute"):
        inside = children[execute.span_id]
        if not any(c.name == "job.body" for c in inside):
            problems.append("an execute span without the body's span")
            continue
        gap = min(c.start_ns for c in inside) - execute.start_ns
        if gap > UNACCOUNTED_NS:
            problems.append(f"{gap / 1e6:.1f} ms of execute before its first span")
    return problems
