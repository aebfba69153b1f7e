"""The console's pages (GET): each reads what it shows from the suite and renders one
template. An unknown schedule or run is a 404 page naming it."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from console import audit_words, calendar_view
from console.progress import checkpoint_fields
from console.slots import Slot, by_slot, classify, deadline_reason, last_slot, strip
from console.traces import CACHE_HITS, TRIGGERS, Scenario
from cronwave import Run, RunEvent, Schedule
from cronwave_core.domain import calendar
from cronwave_core.errors import InvalidArgument, NotFound

if TYPE_CHECKING:
    from console.app import Console

#: Schedules on one page of the list: the page stays quick however many there are.
SCHEDULES_PER_PAGE = 200


@dataclass(frozen=True)
class Row:
    """A schedule as the list shows it: ``last`` is its newest slot among ``slots`` (a
    manual run is none); ``no_slot`` what is said when there is none."""

    schedule: Schedule
    last: Slot | None
    next_fire: datetime | None
    slots: list[Slot]
    no_slot: str = "no slot yet"


@dataclass(frozen=True)
class Attempt:
    number: int
    first: datetime
    last: datetime
    outcome: str
    events: int


def _now() -> datetime:
    return datetime.now(UTC)


def _next_fire(schedule: Schedule, now: datetime) -> datetime | None:
    if schedule.paused or schedule.withheld:
        return None
    return calendar.next_fire_time(schedule.spec, now)


def _missing(console: Console, request: Request, what: str, ident: str) -> Response:
    return console.error(request, 404, "Not found", f"There is no {what} “{ident[:200]}”.")


def schedules(console: Console, request: Request) -> Response:
    """A page of schedules by id (``?after=<id>``: the page after that id), each with
    its strip of recent runs. A page costs the same three calls however many schedules
    the suite has: one for the page's schedules, one for all their recent runs
    (``ListRecentRuns``), one for the deadline breaches."""
    now = _now()
    after = request.query_params.get("after", "")[:200]
    listed = console.backend.schedule_page(after, SCHEDULES_PER_PAGE + 1)
    page, more = listed[:SCHEDULES_PER_PAGE], len(listed) > SCHEDULES_PER_PAGE
    recent = console.backend.recent_runs([s.schedule_id for s in page], console.slots)
    breaches = by_slot(console.backend.deadline_history(None, limit=1000))
    rows = []
    for schedule in page:
        runs = recent.get(schedule.schedule_id, [])
        cells = strip(runs, console.late_after, breaches)
        # A full strip of manual runs may hide an older slot: say only what it shows.
        no_slot = "no slot yet" if len(runs) < console.slots else "no slot in this strip"
        last = last_slot(cells)
        rows.append(Row(schedule, last, _next_fire(schedule, now), cells, no_slot))
    return console.render(
        request,
        "schedules.html",
        rows=rows,
        now=now,
        after=after,
        next_after=page[-1].schedule_id if more else None,
    )


def schedule(console: Console, request: Request) -> Response:
    schedule_id = request.path_params["schedule_id"]
    try:
        found = console.backend.schedule(schedule_id)
    except (NotFound, InvalidArgument):
        return _missing(console, request, "schedule", schedule_id)
    now = _now()
    runs = console.backend.runs(schedule_id, limit=100)
    deadlines = console.backend.deadline_history(schedule_id)
    past = strip(runs, console.late_after, by_slot(deadlines))
    dst_days = calendar_view.dst_days(found.spec, now)
    return console.render(
        request,
        "schedule.html",
        schedule=found,
        past=past,
        upcoming=[] if found.paused else calendar_view.upcoming(found.spec, now, 20),
        dst_days=dst_days,
        dst_policy={d.day: f"{d.change}, {d.policy}" for d in dst_days},
        utc=calendar_view.is_utc(found.spec.time_zone),
        deadlines=[(b, deadline_reason(b)) for b in deadlines],
        audit=[
            (e, audit_words.done(e.rpc, e.changes), audit_words.described(e.rpc, e.changes))
            for e in console.backend.audit(schedule_id)
        ],
        next_fire=_next_fire(found, now),
        now=now,
    )


def attempts_of(events: list[RunEvent]) -> list[Attempt]:
    """Each attempt's span of the history, and the last thing that happened in it."""
    grouped: OrderedDict[int, list[RunEvent]] = OrderedDict()
    for event in events:
        if event.attempt > 0:
            grouped.setdefault(event.attempt, []).append(event)
    return [Attempt(n, evs[0].at, evs[-1].at, evs[-1].kind, len(evs)) for n, evs in grouped.items()]


def _run_context(console: Console, request: Request) -> dict[str, Any] | None:
    run_id = request.path_params["run_id"]
    try:
        run: Run = console.backend.run(run_id)
    except (NotFound, InvalidArgument):
        return None
    events = console.backend.events(run_id)
    try:
        zone = console.backend.schedule(run.schedule_id).time_zone
    except (NotFound, InvalidArgument):
        zone = "UTC"
    return {
        "run": run,
        "zone": zone,
        "slot": classify(run, console.late_after),
        "events": events,
        "attempts": attempts_of(events),
        "progress": run.progress,
        "checkpoint": checkpoint_fields(run.checkpoint_json),
    }


def run(console: Console, request: Request) -> Response:
    context = _run_context(console, request)
    if context is None:
        return _missing(console, request, "run", request.path_params["run_id"])
    chart = console.spans.run_html(context["run"].run_id)
    return console.render(request, "run.html", chart=chart, **context)


def run_live(console: Console, request: Request) -> Response:
    """The part of a run's page that changes while it runs (polled by the page)."""
    context = _run_context(console, request)
    if context is None:
        return _missing(console, request, "run", request.path_params["run_id"])
    return console.render(request, "run_live.html", **context)


def _scenario(request: Request) -> Scenario:
    return Scenario.parse(dict(request.query_params))


def waterfall_page(console: Console, request: Request) -> Response:
    scenario = _scenario(request)
    chart, count = console.spans.scenario_html(scenario)
    return console.render(
        request,
        "waterfall.html",
        scenario=scenario,
        chart=chart,
        count=count,
        query=request.url.query,
        cache_hits=CACHE_HITS,
        triggers=TRIGGERS,
        schedule_ids=[s.schedule_id for s in console.backend.schedules()],
    )


def waterfall_chart(console: Console, request: Request) -> Response:
    chart, count = console.spans.scenario_html(_scenario(request))
    return console.render(
        request, "waterfall_chart.html", chart=chart, count=count, query=request.url.query
    )


def dead_letters(console: Console, request: Request) -> Response:
    include = request.query_params.get("all") == "1"
    letters = console.backend.dead_letters(include_replayed=include)
    return console.render(request, "dead_letters.html", letters=letters, include=include)


def health(console: Console, request: Request) -> Response:
    return console.render(
        request,
        "health.html",
        lease=console.backend.lease(),
        services=console.backend.health(),
        now=_now(),
    )
