"""``cronwave apply``'s file reader and plan, without a suite: every value form the
file format allows, the refusals, and the diff against a stored schedule."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from cronwave_proto.v1 import common_pb2 as pb

from cronwave import Schedule
from cronwave.cli._apply_file import read
from cronwave.cli._apply_plan import Action, differing, message_of, plan
from cronwave_core.domain.spec import Interval, Overlap
from cronwave_core.errors import InvalidArgument


def file_of(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "schedules.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def stored(message: pb.Schedule, **fields: object) -> Schedule:
    """``message`` as the store would answer it."""
    answer = pb.Schedule()
    answer.CopyFrom(message)
    for name, value in fields.items():
        if isinstance(value, pb.ScheduleSpec):
            answer.spec.CopyFrom(value)
        else:
            setattr(answer, name, value)
    return Schedule.from_proto(answer)


def test_every_value_form_is_read(tmp_path: Path):
    path = file_of(
        tmp_path,
        """
manager: team-a
schedules:
  - id: full
    job_type: cronwave.noop
    cron: ["0 2 * * *", "30 14 * * 5"]
    time_zone: Europe/Berlin
    intervals: [15m, {every: 1h, phase: 300}]
    one_off: [2030-01-01T09:00:00, "2030-01-02T09:00:00+00:00"]
    exclude_dates: [2030-12-25, "2030-12-26"]
    start_at: 2030-01-01T00:00:00Z
    max_runs: 3
    jitter: 30s
    overlap: allow_all
    catchup_window: 1h30m
    payload: {customers: 5}
    paused: true
  - {id: small, job_type: cronwave.noop, cron: "* * * * *"}
""",
    )
    declared = read(path)
    assert declared.manager == "team-a" and declared.marker == "apply:team-a"
    full, small = declared.schedules
    assert full.spec.cron == ("0 2 * * *", "30 14 * * 5")
    assert full.spec.intervals == (
        Interval(timedelta(minutes=15)),
        Interval(timedelta(hours=1), timedelta(minutes=5)),
    )
    # a YAML timestamp without an offset is wall-clock time in the entry's zone
    assert full.spec.one_off == (
        datetime(2030, 1, 1, 8, 0, tzinfo=UTC),
        datetime(2030, 1, 2, 9, 0, tzinfo=UTC),
    )
    assert full.spec.exclude_dates == (date(2030, 12, 25), date(2030, 12, 26))
    assert full.spec.start_at == datetime(2030, 1, 1, tzinfo=UTC)
    assert (full.spec.max_runs, full.spec.jitter) == (3, timedelta(seconds=30))
    assert full.policy.overlap is Overlap.ALLOW_ALL
    assert full.policy.catchup_window == timedelta(hours=1, minutes=30)
    assert (full.payload, full.paused) == ({"customers": 5}, True)
    assert (small.spec.time_zone, small.payload, small.paused) == ("UTC", {}, None)
    assert read(file_of(tmp_path, "schedules: []\n")).manager == "default"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n", "schedules.yaml: must be a mapping with a 'schedules' list"),
        ("manager: Team A\nschedules: []\n", "schedules.yaml: manager: must be a name"),
        ("schedules: {}\n", "schedules.yaml: schedules: required: a list of schedules"),
        ("schedules: [7]\n", "schedules.yaml: schedules[0]: must be a mapping"),
        (
            "schedules: [{id: a, cron: '* * * * *'}]\n",
            "schedules[0] (id 'a'): job_type: required",
        ),
        (
            "schedules: [{id: a, job_type: j, cron: 5}]\n",
            "schedules[0] (id 'a'): cron: must be a cron expression or a list of them",
        ),
        (
            "schedules: [{id: a, job_type: j, cron: '* * * * *', paused: maybe}]\n",
            "schedules[0] (id 'a'): paused: must be true or false",
        ),
        (
            "schedules: [{id: a, job_type: j, intervals: [{every: 1h, phase: 2h}]}]\n",
            "schedules[0] (id 'a'): intervals[0].phase: must be in [0, every)",
        ),
        (
            "schedules: [{id: a, job_type: j, cron: '* * * * *', catchup: all}]\n",
            "schedules[0] (id 'a'): overlap: catch-up 'all' runs every late slot",
        ),
        (
            "schedules: [{id: a, job_type: j, cron: '* * * * *', max_runs: true}]\n",
            "schedules[0] (id 'a'): max_runs: must be a whole number",
        ),
    ],
)
def test_a_bad_file_is_refused_naming_the_entry_and_field(tmp_path: Path, text: str, message: str):
    with pytest.raises(InvalidArgument) as refused:
        read(file_of(tmp_path, text))
    assert message in refused.value.message


def test_the_plan_creates_updates_only_what_differs_and_prunes_only_its_own(tmp_path: Path):
    declared = read(
        file_of(
            tmp_path,
            """
manager: ops
schedules:
  - {id: same, job_type: cronwave.noop, cron: "0 1 * * *", payload: {a: 1}}
  - {id: moved, job_type: cronwave.noop, cron: "0 3 * * *", time_zone: Asia/Tokyo}
  - {id: new, job_type: cronwave.noop, cron: "0 4 * * *"}
""",
        )
    )
    same, moved, _ = declared.schedules
    live = [
        stored(message_of(same, "apply:ops", None)),
        stored(message_of(moved, "", None)),
        stored(message_of(same, "apply:ops", None), schedule_id="gone"),
        stored(message_of(same, "", None), schedule_id="by-hand"),
        stored(message_of(same, "apply:other", None), schedule_id="others"),
    ]
    # 'moved' differs in cron and zone and was made by hand; its pause is its own
    live[1] = stored(
        message_of(moved, "", None),
        spec=pb.ScheduleSpec(cron=["0 2 * * *"], time_zone="UTC"),
        paused=True,
    )

    changes = plan(declared, live, prune=True)

    assert [(c.action, c.schedule_id, c.paths) for c in changes.changes] == [
        (Action.UNCHANGED, "same", ()),
        (Action.UPDATE, "moved", ("spec.cron", "spec.time_zone", "managed_by")),
        (Action.CREATE, "new", ()),
        (Action.PRUNE, "gone", ()),
    ]
    assert plan(declared, live, prune=False).of(Action.PRUNE) == []
    # a payload written with other key order or spacing is the same payload
    respaced = stored(message_of(same, "apply:ops", None), payload_json='{ "a" : 1 }')
    assert differing(message_of(same, "apply:ops", respaced), respaced) == ()


def test_prune_never_touches_a_manager_whose_name_this_one_prefixes(tmp_path: Path):
    # Given the file of manager "team", and live schedules of managers "team-b",
    # "teams" and "team" (one it no longer lists)
    declared = read(
        file_of(
            tmp_path,
            "manager: team\nschedules:\n"
            '  - {id: kept, job_type: cronwave.noop, cron: "0 1 * * *"}\n',
        )
    )
    [kept] = declared.schedules
    live = [
        stored(message_of(kept, "apply:team", None)),
        stored(message_of(kept, "apply:team", None), schedule_id="dropped"),
        stored(message_of(kept, "apply:team-b", None), schedule_id="team-b-own"),
        stored(message_of(kept, "apply:teams", None), schedule_id="teams-own"),
    ]

    # When it is planned with prune
    pruned = [c.schedule_id for c in plan(declared, live, prune=True).of(Action.PRUNE)]

    # Then only "team"'s own undeclared schedule goes
    assert pruned == ["dropped"]
