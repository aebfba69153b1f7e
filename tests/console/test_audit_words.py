"""``console.audit_words``: an audit event's changes as a person reads them."""

from __future__ import annotations

from console.audit_words import Change, described, done


def test_an_update_names_each_field_with_its_old_and_new_value_in_words() -> None:
    changes = {
        "policy.overlap": {"old": "OVERLAP_POLICY_SKIP", "new": "OVERLAP_POLICY_ALLOW_ALL"},
        "policy.deadline": {"old": None, "new": "2700s"},
        "spec.time_zone": {"old": "UTC", "new": "Europe/Berlin"},
        "payload_json": {"old_bytes": 31, "new_bytes": 40},
        "spec.start_at": {"old": "2030-01-01T00:00:00Z", "new": None},
    }

    assert described("UpdateSchedule", changes) == [
        Change("overlap", "skip → allow_all"),
        Change("deadline", "45 min 0 s"),
        Change("time zone", "UTC → Europe/Berlin"),
        Change("payload", "31 → 40 bytes"),
        Change("start at", "2030-01-01 00:00:00Z → none"),
    ]
    assert done("UpdateSchedule", changes) == "updated"


def test_a_creation_shows_the_values_it_was_given_and_never_none() -> None:
    changes = {
        "spec.cron": {"old": None, "new": ["0 2 * * *"]},
        "spec.dst_gap": {"old": None, "new": "DST_GAP_POLICY_SKIP"},
        "spec.jitter": {"old": None, "new": "0s"},
        "policy.catchup": {"old": None, "new": "CATCHUP_POLICY_LATEST"},
        "payload_json": {"old_bytes": 0, "new_bytes": 22},
        "paused": {"old": None, "new": False},
        "pause_note": {"old": None, "new": ""},
    }

    assert described("CreateSchedule", changes) == [
        Change("cron", "0 2 * * *"),
        Change("DST gap", "skip"),
        Change("catch-up", "latest"),
        Change("payload", "22 bytes"),
    ]


def test_a_pause_a_cancel_and_a_trigger_read_as_what_was_done() -> None:
    paused = {"paused": {"old": False, "new": True}, "pause_note": {"old": "", "new": "audit"}}
    assert described("PauseSchedule", paused) == [
        Change("paused", "no → yes"),
        Change("note", "audit"),
    ]
    cancel = {"state": {"old": "RUNNING", "new": "CANCELLED"}, "grace_seconds": 30.0}
    assert described("CancelRun", cancel) == [
        Change("state", "running → cancelled"),
        Change("grace", "30.0 s"),
    ]
    assert done("RecordRuns", {"trigger": "manual"}) == "triggered"
    assert done("RecordRuns", {"trigger": "backfill"}) == "backfilled"
