"""Overlap policies end to end: a real planner fires a schedule every 2 s whose job
(``cronwave.sleep``) takes 5 s, once per policy, and the store shows what each policy
did with the fires that came while a run was still going."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from cronwave import Interval, Run
from cronwave_core.suite import Suite
from tests.harness.clients import client_for
from tests.harness.suites import SuiteFactory
from tests.helpers import eventually, fresh
from tests.schedules.conftest import LEASE_ENV, runs_of

pytestmark = pytest.mark.slow

POLICIES = ("skip", "buffer_one", "buffer_all", "cancel_other", "allow_all")


def executions(runs: list[Run]) -> list[tuple[Run, Run]]:
    """Pairs of runs whose executions overlapped in time (a run still going counts as
    going on forever)."""
    ran = [r for r in runs if r.started_at is not None and r.state != "CANCELLED"]
    far = max((r.started_at for r in ran), default=None)
    pairs = []
    for a, b in itertools.combinations(ran, 2):
        assert a.started_at is not None and b.started_at is not None and far is not None
        a_end = a.finished_at or far + timedelta(days=1)
        b_end = b.finished_at or far + timedelta(days=1)
        if a.started_at < b_end and b.started_at < a_end:
            pairs.append((a, b))
    return pairs


def reasons(runs: list[Run]) -> set[str]:
    return {r.error for r in runs if r.state == "MISSED"}


def test_each_overlap_policy_with_a_job_longer_than_the_interval(
    make_suite: SuiteFactory,
) -> None:
    # Given a planner and five schedules every 2 s whose job sleeps 5 s, one per policy
    suite: Suite = make_suite(env=LEASE_ENV, workers=2)
    client = client_for(suite)
    ids = {}
    for policy in POLICIES:
        ids[policy] = fresh(policy.replace("_", "-"))
        client.create_schedule(
            ids[policy],
            intervals=[Interval(timedelta(seconds=2))],
            job_type="cronwave.sleep",
            payload={"seconds": 5},
            overlap=policy,
        )

    # When they have fired for a while
    def seen(check: str, policy: str, timeout: float = 40) -> list[Run]:
        return eventually(
            lambda: _check(check, runs_of(client, ids[policy])),
            timeout=timeout,
            what=f"{policy}: {check}",
        )

    # Then skip records the fires that came during a run as MISSED overlap_skip,
    # and never runs two at once
    got = seen("skipped and ran twice", "skip")
    assert executions(got) == []

    # buffer_one keeps one fire for after the run (then starts it late, by the
    # buffer) and records the rest overlap_buffer_full
    got = seen("buffer full and a buffered start", "buffer_one")
    assert executions(got) == []

    # buffer_all keeps every fire for later: nothing MISSED, never two at once
    got = seen("a buffered start", "buffer_all")
    assert not {r for r in reasons(got) if not r.startswith("pending:")}
    assert executions(got) == []

    # cancel_other cancels the run in flight, whose worker then stops it
    got = seen("cancelled", "cancel_other")
    cancelled = [r for r in got if r.state == "CANCELLED"]
    assert all("cancel_other" in r.error for r in cancelled)
    first = cancelled[0]
    events = [e.kind for e in client.run_events(first.run_id)]
    assert "cancelled" in events and "succeeded" not in events
    assert first.result_json == ""

    # allow_all runs them side by side
    got = seen("overlapping executions", "allow_all")
    assert reasons(got) == set()
    client.close()


def _check(check: str, runs: list[Run]) -> list[Run] | None:
    """``runs`` once they show what ``check`` describes, else None."""
    done = [r for r in runs if r.state == "SUCCEEDED"]
    ok = {
        "skipped and ran twice": "overlap_skip" in reasons(runs) and len(done) >= 2,
        "buffer full and a buffered start": (
            "overlap_buffer_full" in reasons(runs) and bool(_late_starts(done))
        ),
        "a buffered start": len(done) >= 2 and bool(_late_starts(done)),
        "cancelled": any(r.state == "CANCELLED" for r in runs),
        "overlapping executions": bool(executions(runs)),
    }[check]
    return runs if ok else None


def _late_starts(done: list[Run]) -> list[Run]:
    """Runs that started well after their fire time: they waited in the buffer."""
    return [r for r in done if r.started_at and r.started_at - r.fire_time > timedelta(seconds=2)]
