"""A data dir's ``suite.json``: written whole, read back, marked stopped, and a record
whose process is gone reads as a stopped suite."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from cronwave import _suite_record as record
from cronwave_core.errors import FailedPrecondition, InvalidArgument

ADDRS = {
    "store": "127.0.0.1:7501",
    "leader": "127.0.0.1:7502",
    "dispatcher": "127.0.0.1:7503",
    "planner": "127.0.0.1:7504",
    "worker": "127.0.0.1:7505",
}


def test_a_started_suite_reads_back_as_running_with_its_addresses(tmp_path):
    written = record.started(tmp_path, ADDRS)

    found = record.running_suite(tmp_path)

    assert found == written
    assert found.pid == os.getpid()
    assert found.env()["CRONWAVE_STORE_ADDR"] == "127.0.0.1:7501"
    assert found.env()["CRONWAVE_WORKER_ADDR"] == "127.0.0.1:7505"
    assert [p.name for p in tmp_path.iterdir()] == [record.FILE]  # no partial file left


def test_the_record_keeps_what_a_joining_worker_needs_readable_by_its_owner_only(tmp_path):
    # Its Redis URL may carry a password.
    written = record.started(tmp_path, ADDRS, redis_url="redis://:pw@127.0.0.1:7579/0")

    assert record.read(tmp_path) == written
    assert written.extra["redis_url"] == "redis://:pw@127.0.0.1:7579/0"
    assert stat.S_IMODE((tmp_path / record.FILE).stat().st_mode) == 0o600


def test_a_stopped_suite_is_refused_saying_how_to_start_one(tmp_path):
    written = record.started(tmp_path, ADDRS)

    record.stopped(tmp_path, written)

    assert record.read(tmp_path) == replace(written, stopped=True)
    with pytest.raises(FailedPrecondition, match="is not running any more") as caught:
        record.running_suite(tmp_path)
    assert f"cronwave up --data-dir {tmp_path}" in caught.value.message


def test_marking_stopped_leaves_a_newer_suites_record_alone(tmp_path):
    old = record.started(tmp_path, ADDRS)
    new = record.started(tmp_path, {**ADDRS, "store": "127.0.0.1:7601"})

    record.stopped(tmp_path, old)

    assert record.read(tmp_path) == new


def test_a_record_whose_process_is_gone_is_a_stopped_suite(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    pid = int(gone.stdout)
    record.write(tmp_path, record.SuiteRecord(ADDRS, pid, datetime.now(UTC)))

    with pytest.raises(FailedPrecondition, match=f"pid {pid}"):
        record.running_suite(tmp_path)


def test_an_empty_or_garbled_data_dir_says_so(tmp_path):
    with pytest.raises(FailedPrecondition, match="no cronwave suite was started there"):
        record.running_suite(tmp_path)

    (tmp_path / record.FILE).write_text("{not json")
    with pytest.raises(FailedPrecondition, match="is not a suite record"):
        record.running_suite(tmp_path)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"addresses": {"store": "nowhere"}}, "addresses.store"),
        ({"addresses": {"queue": "127.0.0.1:1"}}, "addresses"),
        ({"pid": 0}, "pid"),
        ({"started_at": datetime(2030, 1, 1)}, "started_at"),
    ],
)
def test_a_malformed_record_is_refused_naming_the_field(change, field):
    fields = {"addresses": ADDRS, "pid": 1, "started_at": datetime.now(UTC), **change}

    with pytest.raises(InvalidArgument) as caught:
        record.SuiteRecord(**fields)

    assert caught.value.field == field
