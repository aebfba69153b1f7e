"""What an audit row says of a change and of its caller (``workflow_store.audit_store``):
small values old and new, large ones and payloads by size, the caller by its identity."""

from __future__ import annotations

from cronwave_core.security.identity import INSECURE, Identity, serving
from workflow_store.audit_store import SMALL, Actor, change, schedule_changes


def test_the_caller_is_its_identitys_audit_name_from_its_peer() -> None:
    alice = Identity("user", "alice", role="operator")

    with serving(alice, "ipv4:10.0.3.7:53122"):
        assert Actor.current("ipv4:127.0.0.1:1") == Actor("user:alice", "ipv4:10.0.3.7:53122")
    with serving(INSECURE, ""):
        assert Actor.current("ipv4:127.0.0.1:1") == Actor("insecure", "ipv4:127.0.0.1:1")
    # no interceptor made the caller known
    assert Actor.current("ipv6:[::1]:2") == Actor("unauthenticated", "ipv6:[::1]:2")


def test_small_values_are_kept_and_large_ones_by_size() -> None:
    assert change("skip", "allow_all") == {"old": "skip", "new": "allow_all"}
    large = "x" * SMALL

    assert change("a", large) == {"old_bytes": 3, "new_bytes": SMALL + 2}


def test_a_schedules_changes_name_each_field_and_a_payload_only_by_size() -> None:
    old = {
        "spec": {"cron": ["0 2 * * *"], "time_zone": "UTC"},
        "payload_json": '{"card": "4111 1111 1111 1111"}',
        "paused": False,
        "job_type": "billing.nightly",
    }
    new = {
        "spec": {"cron": ["30 3 * * *"], "time_zone": "UTC"},
        "payload_json": '{"card": "4000 0000 0000 0002", "n": 1}',
        "paused": False,
        "job_type": "billing.nightly",
    }

    changes = schedule_changes(old, new)

    assert changes == {
        "spec.cron": {"old": ["0 2 * * *"], "new": ["30 3 * * *"]},
        "payload_json": {
            "old_bytes": len(old["payload_json"]),
            "new_bytes": len(new["payload_json"]),
        },
    }
    assert "4000" not in repr(changes)


def test_a_created_schedules_fields_are_new_values() -> None:
    changes = schedule_changes({}, {"spec": {"cron": ["@daily"]}, "payload_json": "{}"})

    assert changes == {
        "spec.cron": {"old": None, "new": ["@daily"]},
        "payload_json": {"old_bytes": 0, "new_bytes": 2},
    }
