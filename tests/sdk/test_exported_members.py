"""The SDK's public surface is exactly this list; changing it is a decision."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import cronwave

EXPORTED = [
    "NO_RETRY",
    "TERMINAL_STATES",
    "AlreadyExists",
    "AttemptSuperseded",
    "AuditEvent",
    "Catchup",
    "Checkpoint",
    "Client",
    "ConfigurationError",
    "CronwaveError",
    "DeadlineBreach",
    "DeadlineDelivery",
    "DstGap",
    "DstRepeat",
    "FailedPrecondition",
    "Interval",
    "InvalidArgument",
    "JobContext",
    "JobType",
    "Lease",
    "NonRetryable",
    "NotFound",
    "Notifier",
    "NotifyFormat",
    "Overlap",
    "PermissionDenied",
    "PlannerStatus",
    "Policy",
    "Progress",
    "RetryPolicy",
    "Run",
    "RunEvent",
    "RunNotFound",
    "Schedule",
    "ScheduleExists",
    "ScheduleNotFound",
    "Spec",
    "StaleAttempt",
    "StaleFencingToken",
    "Unauthenticated",
    "Unavailable",
    "WaitTimeout",
    "WorkerStopping",
    "job",
]


def test_all_is_pinned():
    assert cronwave.__all__ == EXPORTED


def test_every_public_member_is_in_all_and_exists():
    # (the members load on first use: asking for each first, then listing)
    for name in cronwave.__all__:
        assert getattr(cronwave, name) is not None
    public = {
        name
        for name, value in vars(cronwave).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(cronwave.__all__)
    assert {n for n in dir(cronwave) if not n.startswith("_")} >= public


def test_a_name_outside_all_is_an_attribute_error():
    with pytest.raises(AttributeError, match="Clientele"):
        cronwave.Clientele  # type: ignore[attr-defined]  # noqa: B018


def test_importing_the_generated_code_does_not_load_the_sdk():
    # The services import cronwave_proto.v1 for its messages, and nothing of the SDK.
    code = "import sys, cronwave_proto.v1.common_pb2; print('cronwave' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_errors_are_the_cores_so_except_clauses_match_server_side_classes():
    from cronwave_core import errors

    assert cronwave.InvalidArgument is errors.InvalidArgument
    assert cronwave.NotFound is errors.NotFound
    assert issubclass(cronwave.WaitTimeout, cronwave.CronwaveError)


def test_importing_the_core_before_the_sdk_has_no_import_cycle():
    # Services import cronwave_core.convert, which imports cronwave.v1, which runs
    # cronwave/__init__.py: the SDK must not need convert while it is half loaded.
    code = "import cronwave_core.convert, cronwave_core.suite; import cronwave; cronwave.Client"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
