"""``console.pages.schedules``: the list of schedules costs the same few calls however
many schedules there are -- one for the page's schedules, one for all their recent
runs -- never one per schedule."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronwave_proto.v1 import common_pb2 as pb
from starlette.requests import Request

from console import pages
from console.app import Console, _environment
from console.guard import Guard
from console.sessions import Sessions
from console.traces import SpanRuns
from cronwave import DeadlineBreach, Run, Schedule
from cronwave_core.convert import dt_to_ts

FIRE = datetime(2030, 1, 7, 2, 0, tzinfo=UTC)


def _schedule(schedule_id: str) -> Schedule:
    spec = pb.ScheduleSpec(cron=["0 2 * * *"], time_zone="UTC")
    return Schedule.from_proto(
        pb.Schedule(schedule_id=schedule_id, spec=spec, job_type="cronwave.noop")
    )


def _run(schedule_id: str) -> Run:
    return Run.from_proto(
        pb.Run(
            run_id=f"run_{schedule_id}",
            schedule_id=schedule_id,
            fire_time=dt_to_ts(FIRE),
            state=pb.RUN_STATE_SUCCEEDED,
            trigger=pb.TRIGGER_KIND_SCHEDULED,
        )
    )


class CountingBackend:
    """A suite of ``n`` schedules with one run each, counting what is asked of it."""

    authenticates = False

    def __init__(self, n: int) -> None:
        self.all = [_schedule(f"s{i:05d}") for i in range(n)]
        self.calls: Counter[str] = Counter()

    def schedules(self) -> list[Schedule]:
        self.calls["schedules"] += 1
        return self.all

    def schedule_page(self, after: str, limit: int) -> list[Schedule]:
        self.calls["schedule_page"] += 1
        return [s for s in self.all if s.schedule_id > after][:limit]

    def runs(self, schedule_id: str | None = None, limit: int = 50) -> list[Run]:
        self.calls["runs"] += 1
        return [_run(schedule_id)] if schedule_id else []

    def recent_runs(self, schedule_ids: Sequence[str], per_schedule: int) -> dict[str, list[Run]]:
        self.calls["recent_runs"] += 1
        return {schedule_id: [_run(schedule_id)] for schedule_id in schedule_ids}

    def deadline_history(self, schedule_id: str | None, limit: int = 50) -> list[DeadlineBreach]:
        self.calls["deadline_history"] += 1
        return []


def _console(backend: CountingBackend, tmp_path: Path) -> Console:
    return Console(
        backend,  # type: ignore[arg-type]
        SpanRuns(tmp_path),
        Guard(),
        Sessions(),
        slots=24,
        late_after=timedelta(seconds=5),
        jaeger_url=None,
        templates=_environment(),
    )


def _get(console: Console, query: str = "") -> str:
    scope = {"type": "http", "method": "GET", "path": "/", "query_string": query.encode()}
    response = pages.schedules(console, Request({**scope, "headers": []}))
    assert response.status_code == 200
    return bytes(response.body).decode()


def test_the_list_asks_for_all_recent_runs_at_once_never_per_schedule(tmp_path: Path) -> None:
    # Given a suite of 450 schedules, each with a run
    backend = CountingBackend(450)
    console = _console(backend, tmp_path)

    # When a person opens the list
    page = _get(console)

    # Then its first page was read with one call for the schedules and one for all
    # their recent runs, and no call per schedule
    assert backend.calls["runs"] == 0
    assert backend.calls["recent_runs"] == 1
    assert backend.calls["schedule_page"] == 1
    # and it shows the first 200, each with its slot, and links the next page
    assert page.count('<tr data-schedule="') == pages.SCHEDULES_PER_PAGE
    assert page.count('data-outcome="ran"') == pages.SCHEDULES_PER_PAGE
    assert 'href="/?after=s00199"' in page


def test_the_next_page_lists_the_schedules_after_the_last_one_shown(tmp_path: Path) -> None:
    backend = CountingBackend(450)
    console = _console(backend, tmp_path)

    last = _get(console, "after=s00399")

    assert last.count('<tr data-schedule="') == 50
    assert '<tr data-schedule="s00400"' in last and '<tr data-schedule="s00449"' in last
    assert 'id="next-page"' not in last
    assert 'id="first-page"' in last
