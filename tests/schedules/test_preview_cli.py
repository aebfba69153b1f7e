"""``cronwave schedule preview`` needs no running suite: it computes fire times with
the planner's own calendar code and prints ``<local ISO-8601> <UTC ISO-8601>`` lines."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from cronwave.cli.main import app
from cronwave_core.domain.calendar import fire_times
from cronwave_core.domain.spec import Interval, Spec

LINE = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?[+-]\d\d:\d\d \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"
)


def preview(*args: str) -> list[str]:
    result = CliRunner().invoke(app, ["schedule", "preview", *args])
    assert result.exit_code == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize(
    ("gap", "third"),
    [
        ("shift", "2030-03-10T03:00:00-04:00 2030-03-10T07:00:00Z"),
        ("skip", "2030-03-11T02:30:00-04:00 2030-03-11T06:30:00Z"),
    ],
)
def test_across_the_spring_forward_gap(gap: str, third: str) -> None:
    lines = preview(
        "--cron", "30 2 * * *", "--tz", "America/New_York", "--dst-gap", gap,
        "--from", "2030-03-08T00:00:00", "--count", "3",
    )  # fmt: skip

    assert lines == [
        "2030-03-08T02:30:00-05:00 2030-03-08T07:30:00Z",
        "2030-03-09T02:30:00-05:00 2030-03-09T07:30:00Z",
        third,
    ]


def test_across_the_fall_back_overlap_twice() -> None:
    lines = preview(
        "--cron", "30 1 * * *", "--tz", "America/New_York", "--dst-repeat", "twice",
        "--from", "2030-11-03T00:00:00-04:00", "--count", "3",
    )  # fmt: skip

    assert lines == [
        "2030-11-03T01:30:00-04:00 2030-11-03T05:30:00Z",
        "2030-11-03T01:30:00-05:00 2030-11-03T06:30:00Z",
        "2030-11-04T01:30:00-05:00 2030-11-04T06:30:00Z",
    ]


def test_lord_howe_moves_half_an_hour_and_several_crons_merge() -> None:
    # 2030-10-06 02:00-02:30 does not exist on Lord Howe Island (+10:30 -> +11:00)
    lines = preview(
        "--cron", "15 2 * * *", "--cron", "0 3 * * *", "--tz", "Australia/Lord_Howe",
        "--from", "2030-10-05T12:00:00", "--count", "4",
    )  # fmt: skip

    assert lines == [
        "2030-10-06T02:30:00+11:00 2030-10-05T15:30:00Z",
        "2030-10-06T03:00:00+11:00 2030-10-05T16:00:00Z",
        "2030-10-07T02:15:00+11:00 2030-10-06T15:15:00Z",
        "2030-10-07T03:00:00+11:00 2030-10-06T16:00:00Z",
    ]


def test_count_lines_in_the_format_and_the_same_times_as_the_calendar() -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    lines = preview(
        "--cron", "*/7 * * * *", "--every", "45m", "--phase", "5m",
        "--from", start.isoformat(), "--count", "25",
    )  # fmt: skip

    assert len(lines) == 25
    assert all(LINE.fullmatch(line) for line in lines)
    every = Interval(timedelta(minutes=45), timedelta(minutes=5))
    spec = Spec(cron=("*/7 * * * *",), intervals=(every,))
    expected = list(itertools.islice(fire_times(spec, start - timedelta(microseconds=1)), 25))
    got = [datetime.fromisoformat(line.split()[1].replace("Z", "+00:00")) for line in lines]
    assert got == expected
    assert got[0] == start  # --from is inclusive


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--cron", "0 25 * * *"], "spec.cron[0]: "),
        (["--cron", "* * * * *", "--tz", "Nowhere/Land"], "spec.time_zone: "),
        (["--cron", "* * * * *", "--dst-gap", "sideways"], "--dst-gap: "),
        (["--cron", "* * * * *", "--from", "yesterday"], "--from: "),
        ([], "spec.cron: "),
    ],
)
def test_a_bad_argument_is_one_red_line_naming_it(args: list[str], field: str) -> None:
    result = CliRunner().invoke(app, ["schedule", "preview", *args])

    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {field}")
    assert "Traceback" not in result.stdout + result.stderr


def test_skip_and_shift_differ_only_on_the_gap_day() -> None:
    # London skips 01:00-02:00 on 2030-03-31
    common = ["--cron", "30 1 * * *", "--tz", "Europe/London", "--from", "2030-03-29"]
    shift = preview(*common, "--count", "5", "--dst-gap", "shift")
    skip = preview(*common, "--count", "4", "--dst-gap", "skip")

    assert shift[2] == "2030-03-31T02:00:00+01:00 2030-03-31T01:00:00Z"
    assert skip == shift[:2] + shift[3:]
