"""Every id, key and name field of every RPC, against a real suite over mutual TLS:
a value with one character outside the field's alphabet, and a value one character
past its length, are each refused INVALID_ARGUMENT naming the field
(``runs[0].idempotency_key: ...``), as a failed call or as the item's error of a
batch call.

The fields come from the protos: every string field of every request (nested and
repeated ones too) is either an id, key or name here, with the rule it keeps (its
length and alphabet, read from the validation code), or listed in ``NOT_IDS`` with
what it is instead, so a field added to a request must be placed before this passes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from cronwave_proto.v1 import (
    api_key_service_pb2,
    cron_planner_service_pb2,
    dispatcher_service_pb2,
    leader_election_service_pb2,
    worker_service_pb2,
    workflow_store_service_pb2,
    workflow_store_service_pb2_grpc,
)
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message

from cronwave_billing.gateway import domain as gateway_domain
from cronwave_billing.v1 import payment_gateway_service_pb2
from cronwave_core import fields
from cronwave_core.domain import labels
from cronwave_core.limits import DEFAULT_LIMITS
from cronwave_core.suite import Suite
from tests.harness.suites import SuiteFactory
from tests.harness.tls import hop_channel
from workflow_store import api_keys, validate

MODULES = (
    workflow_store_service_pb2,
    api_key_service_pb2,
    dispatcher_service_pb2,
    cron_planner_service_pb2,
    leader_election_service_pb2,
    worker_service_pb2,
    payment_gateway_service_pb2,
)
SERVED_BY = {
    "WorkflowStoreService": "workflow-store",
    "ApiKeyService": "workflow-store",
    "DispatcherService": "dispatcher",
    "CronPlannerService": "cron-planner",
    "LeaderElectionService": "leader-election",
    "WorkerService": "worker",
    "PaymentGatewayService": "payment-gateway",
}


def longest(pattern: re.Pattern[str], char: str = "a", upto: int = 1_000) -> int:
    """The most repetitions of ``char`` that ``pattern`` matches whole (a rule's length)."""
    return max(n for n in range(1, upto) if pattern.fullmatch(char * n))


@dataclass(frozen=True)
class Rule:
    """What an id, key or name keeps: at most ``limit`` characters, and ``outside`` is
    a character not in its alphabet; ``valid`` is a value it takes."""

    name: str
    limit: int
    outside: str
    valid: str


#: Run ids, keys, cursors, names a caller chooses (``RequestLimits.identifier``).
ID = Rule("id", DEFAULT_LIMITS.id_chars, " ", "a1")
#: Schedule ids (``validate.SCHEDULE_ID``).
SCHEDULE_ID = Rule("schedule id", longest(validate.SCHEDULE_ID), " ", "s-1")
#: Job type names: the id rule and ``validate.JOB_TYPE_NAME``.
JOB_TYPE = Rule("job type", DEFAULT_LIMITS.id_chars, " ", "cronwave.noop")
#: Lease scopes and candidates (``fields.lease_name``); a scope is also one of the
#: suite's scopes.
LEASE = Rule("lease name", fields.MAX_NAME, " ", "planner")
#: Whom an API key is for (``api_keys._NAME``).
KEY_NAME = Rule("key name", longest(api_keys._NAME), " ", "ci")
#: An API key's id (``keys.new_token``): 16 lowercase letters and digits.
KEY_ID = Rule("key id", 16, " ", "a" * 16)
#: The example payment gateway's keys and ids (``fields.identifier``: any printable).
GATEWAY_KEY = Rule("gateway key", gateway_domain.MAX_KEY_LENGTH, "\x07", "k1")
GATEWAY_ID = Rule("gateway id", gateway_domain.MAX_ID_LENGTH, "\x07", "c1")
#: A currency: three lowercase letters.
CURRENCY = Rule("currency", longest(gateway_domain._CURRENCY), " ", "eur")
#: A claim's key (``validate.claim_key``): 16 to 64 letters, digits, '-' or '_'.
CLAIM_KEY = Rule("claim key", longest(validate._CLAIM_KEY), " ", "k" * 16)
#: A schedule's label key and value (``cronwave_core.domain.labels``).
LABEL_KEY = Rule("label key", labels.MAX_KEY_CHARS, " ", "team")
LABEL_VALUE = Rule("label value", labels.MAX_VALUE_CHARS, " ", "billing")
#: The entry a map's key or value under test is set with (a valid key and value).
MAP_ENTRY = ("team", "billing")

#: The rule of each id, key or name field, by its name (any message).
BY_NAME: dict[str, Rule] = {
    "schedule_id": SCHEDULE_ID,
    "schedule_ids": SCHEDULE_ID,
    "after_schedule_id": SCHEDULE_ID,
    "job_type": JOB_TYPE,
    "managed_by": ID,
    "run_id": ID,
    "after_run_id": ID,
    "idempotency_key": ID,
    "trace_id": ID,
    "traceparent": ID,
    "attempt_token": ID,
    "worker_id": ID,
    "queue": ID,
    "queues": ID,
    "kind": ID,
    "non_retryable_errors": ID,
    "fencing_scope": LEASE,
    "scope": LEASE,
    "candidate": LEASE,
    "key_id": KEY_ID,
    "claim_key": CLAIM_KEY,
}
#: Where one name stands for another rule in one message.
BY_FIELD: dict[str, Rule] = {
    "cronwave.v1.JobType.name": JOB_TYPE,
    "cronwave.v1.CreateApiKeyRequest.name": KEY_NAME,
    "cronwave_billing.v1.ChargeItem.idempotency_key": GATEWAY_KEY,
    "cronwave_billing.v1.ChargeItem.customer_id": GATEWAY_ID,
    "cronwave_billing.v1.ChargeItem.invoice_id": GATEWAY_ID,
    "cronwave_billing.v1.ChargeItem.currency": CURRENCY,
    "cronwave.v1.Schedule.LabelsEntry.key": LABEL_KEY,
    "cronwave.v1.Schedule.LabelsEntry.value": LABEL_VALUE,
    "cronwave.v1.RequeueStalledRunsRequest.QueueWaitsEntry.key": ID,
}
#: String fields that are not ids, keys or names, and what they are instead (their own
#: rules are tested where they are: tests/errors/test_refusals.py, test_limits.py).
NOT_IDS = {
    "cron": "a cron expression",
    "time_zone": "an IANA zone name",
    "exclude_dates": "a date",
    "url": "a webhook URL",
    "payload_json": "a JSON document",
    "result_json": "a JSON document",
    "checkpoint_json": "a JSON document",
    "message_json": "a JSON document",
    "pause_note": "a note",
    "note": "a note",
    "reason": "a note or reason",
    "detail": "free text",
    "error": "free text",
    "unit": "a progress unit shown to people",
    "withheld": "output only: why a reply carries a schedule by its identity alone",
    "role": "one of the three roles",
    "token": "a secret, checked whole: a malformed one is not valid, never named",
}

#: A valid request of each method with an id field, but for the field under test.
NOW = "2030-01-01T00:00:00Z"
TRACEPARENT = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
TOKEN = "0" * 32
SCHEDULE = {
    "schedule_id": "s-1",
    "job_type": "cronwave.noop",
    "spec": {"cron": ["0 2 * * *"]},
    "managed_by": "apply:x",
}
BASES: dict[str, dict[str, Any]] = {
    "WorkflowStoreService/CreateSchedule": {"schedule": {**SCHEDULE, "schedule_id": "s-2"}},
    "WorkflowStoreService/GetSchedule": {"schedule_id": "s-1"},
    "WorkflowStoreService/UpdateSchedule": {
        "schedule": SCHEDULE,
        "update_mask": "spec.cron,managedBy,jobType,labels",
    },
    "WorkflowStoreService/ListSchedules": {"after_schedule_id": "s-1"},
    "WorkflowStoreService/PauseSchedule": {"schedule_id": "s-1"},
    "WorkflowStoreService/ResumeSchedule": {"schedule_id": "s-1"},
    "WorkflowStoreService/DeleteSchedule": {"schedule_id": "s-1"},
    "WorkflowStoreService/RegisterJobType": {
        "job_type": {
            "name": "ids.test",
            "duration_limit": "60s",
            "queue": "default",
            "retry": {"non_retryable_errors": ["Declined"]},
        }
    },
    "WorkflowStoreService/RecordRuns": {
        "runs": [
            {
                "schedule_id": "s-1",
                "fire_time": NOW,
                "trigger": "TRIGGER_KIND_SCHEDULED",
                "fencing_token": "1",
                "fencing_scope": "planner",
                "idempotency_key": "k1",
                "queue": "default",
                "trace_id": "a" * 32,
                "traceparent": TRACEPARENT,
            }
        ]
    },
    "WorkflowStoreService/GetRuns": {"runs": [{"run_id": "r1", "traceparent": TRACEPARENT}]},
    "WorkflowStoreService/ListRuns": {"schedule_id": "s-1"},
    "WorkflowStoreService/ListRecentRuns": {"schedule_ids": ["s-1"], "per_schedule": 1},
    "WorkflowStoreService/ListRunEvents": {"run_id": "r1"},
    "WorkflowStoreService/AppendRunEvents": {
        "events": [{"run_id": "r1", "kind": "note", "traceparent": TRACEPARENT}]
    },
    "WorkflowStoreService/ClaimRuns": {
        "claims": [{"run_id": "r1", "worker_id": "w1", "traceparent": TRACEPARENT}],
        "queues": ["default"],
    },
    "WorkflowStoreService/Heartbeat": {"run_id": "r1", "attempt_token": TOKEN},
    "WorkflowStoreService/Heartbeats": {"beats": [{"run_id": "r1", "attempt_token": TOKEN}]},
    "WorkflowStoreService/CompleteRuns": {
        "completions": [
            {
                "run_id": "r1",
                "attempt_token": TOKEN,
                "state": "RUN_STATE_SUCCEEDED",
                "traceparent": TRACEPARENT,
            }
        ]
    },
    "WorkflowStoreService/ReleaseRun": {
        "run_id": "r1",
        "attempt_token": TOKEN,
        "traceparent": TRACEPARENT,
    },
    "WorkflowStoreService/CancelRun": {"run_id": "r1"},
    "WorkflowStoreService/GetFencingToken": {"fencing_scope": "planner"},
    "WorkflowStoreService/IssueFencingToken": {"fencing_scope": "planner"},
    "WorkflowStoreService/LatestFireTimes": {
        "schedule_ids": ["s-1"],
        "after_schedule_id": "s-0",
    },
    "WorkflowStoreService/RecordMissedSlots": {
        "slots": [{"schedule_id": "s-1", "fire_time": NOW, "reason": "missed"}],
        "fencing_token": "1",
        "fencing_scope": "planner",
    },
    "WorkflowStoreService/ListPendingFires": {"after_run_id": "r1"},
    "WorkflowStoreService/RequeueLostRuns": {"after_run_id": "r1", "lost_at": NOW},
    "WorkflowStoreService/RequeueStalledRuns": {"queue_waits": {"default": "1s"}},
    "WorkflowStoreService/DeadLetterRun": {
        "run_id": "r1",
        "attempt_token": TOKEN,
        "reason": "rejected",
        "queue": "default",
    },
    "WorkflowStoreService/ReplayDeadLetter": {"run_id": "r1"},
    "WorkflowStoreService/ListAuditEvents": {"schedule_id": "s-1"},
    "WorkflowStoreService/ListDeadlineBreaches": {"schedule_id": "s-1"},
    "ApiKeyService/CreateApiKey": {"name": "ci", "role": "viewer"},
    "ApiKeyService/RevokeApiKey": {"key_id": "a" * 16},
    "DispatcherService/StartRuns": {
        "starts": [
            {
                "schedule_id": "s-1",
                "fire_time": NOW,
                "fencing_token": "1",
                "fencing_scope": "planner",
                "idempotency_key": "k1",
                "trigger": "TRIGGER_KIND_SCHEDULED",
                "traceparent": TRACEPARENT,
            }
        ]
    },
    "DispatcherService/TriggerRun": {"schedule_id": "s-1", "idempotency_key": "k1"},
    "CronPlannerService/Backfill": {
        "schedule_id": "s-1",
        "start": "2029-01-01T00:00:00Z",
        "end": "2029-01-02T00:00:00Z",
        "dry_run": True,
    },
    "LeaderElectionService/Campaign": {"scope": "planner", "candidate": "c1", "ttl": "5s"},
    "LeaderElectionService/Renew": {"scope": "planner", "candidate": "c1", "fencing_token": "1"},
    "LeaderElectionService/Resign": {"scope": "planner", "candidate": "c1", "fencing_token": "1"},
    "LeaderElectionService/Observe": {"scope": "planner"},
    "LeaderElectionService/SyncShards": {"candidate": "c1", "shard_count": 2},
    "PaymentGatewayService/Charge": {
        "item": {
            "idempotency_key": "k1",
            "customer_id": "c1",
            "invoice_id": "i1",
            "amount_cents": "100",
            "currency": "eur",
        }
    },
    "PaymentGatewayService/ChargeMany": {
        "items": [
            {
                "idempotency_key": "k1",
                "customer_id": "c1",
                "invoice_id": "i1",
                "amount_cents": "100",
                "currency": "eur",
            }
        ]
    },
}


#: A valid request for one field where the method's base would be refused with it.
FIELD_BASES: dict[tuple[str, str], dict[str, Any]] = {
    # (one schedule, or a list of them: not both)
    ("WorkflowStoreService/ListRuns", "schedule_ids[0]"): {"schedule_ids": ["s-1"]},
}
#: The schedule the requests name exists (``BASES``' "s-1"), so a call refused for
#: another reason (NOT_FOUND) cannot stand in for the refusal of the field under test.
EXISTING = {"schedule_id": "s-1", "job_type": "cronwave.noop", "spec": {"cron": ["0 2 * * *"]}}


def methods() -> Iterator[MethodDescriptor]:
    for module in MODULES:
        for service in module.DESCRIPTOR.services_by_name.values():
            yield from service.methods


def string_fields(
    message: Descriptor, prefix: str = "", seen: frozenset[str] = frozenset()
) -> Iterator[tuple[str, FieldDescriptor]]:
    """(path as a refusal names it, field) of every string field in ``message``; a map
    entry's key and value as ``labels<key>`` and ``labels<value>`` (a refusal names
    the entry by its key: ``labels['Team']``)."""
    for field in message.fields:
        path = f"{prefix}{field.name}{'[0]' if field.is_repeated else ''}"
        if field.type == FieldDescriptor.TYPE_STRING:
            yield path, field
            continue
        nested = field.message_type
        if field.type != FieldDescriptor.TYPE_MESSAGE or nested is None:
            continue
        if nested.GetOptions().map_entry:
            for part in ("key", "value"):
                entry = nested.fields_by_name[part]
                if entry.type == FieldDescriptor.TYPE_STRING:
                    yield f"{prefix}{field.name}<{part}>", entry
        elif not nested.full_name.startswith("google.") and nested.full_name not in seen:
            yield from string_fields(nested, f"{path}.", seen | {nested.full_name})


def rule_of(field: FieldDescriptor) -> Rule | None:
    return BY_FIELD.get(field.full_name) or BY_NAME.get(field.name)


@dataclass(frozen=True)
class Case:
    method: MethodDescriptor
    path: str
    rule: Rule

    @property
    def name(self) -> str:
        return f"{self.method.containing_service.name}/{self.method.name}"

    def names(self, value: str) -> tuple[str, ...]:
        """How a refusal of ``value`` may name the field: by its path in the request, or
        within the one message a request carries (``CreateSchedule``'s
        ``spec.cron[0]`` for ``schedule.spec.cron[0]``); a map entry by its key."""
        path = self.path
        if path.endswith(("<key>", "<value>")):
            key = value if path.endswith("<key>") else MAP_ENTRY[0]
            path = f"{path.rsplit('<', 1)[0]}[{key!r}]"
        top, _, rest = path.partition(".")
        field = self.method.input_type.fields_by_name.get(top)
        within = field is not None and not field.is_repeated and bool(rest)
        return (path, rest) if within else (path,)


def cases() -> list[Case]:
    return [
        Case(method, path, rule)
        for method in methods()
        for path, field in string_fields(method.input_type)
        if (rule := rule_of(field)) is not None
    ]


def test_every_string_field_of_every_request_is_an_id_with_a_rule_or_said_otherwise() -> None:
    unplaced = sorted(
        f"{method.input_type.name}.{path}"
        for method in methods()
        for path, field in string_fields(method.input_type)
        if rule_of(field) is None and field.name not in NOT_IDS
    )
    assert not unplaced, f"string fields neither an id with a rule nor in NOT_IDS: {unplaced}"
    both = sorted(name for name in NOT_IDS if name in BY_NAME)
    assert not both, both
    found = cases()
    assert len(found) > 70
    missing = sorted({case.name for case in found} - set(BASES))
    assert not missing, f"methods with id fields but no valid request in BASES: {missing}"


def set_path(message: Message, path: str, value: str) -> None:
    """Set the string at ``path`` (``runs[0].queue``, ``schedule_ids[0]``,
    ``schedule.labels<key>``)."""
    *parents, leaf = path.split(".")
    target: Any = message
    for part in parents:
        name, indexed, _ = part.partition("[")
        target = getattr(target, name)
        if indexed:
            target = target[0] if len(target) else target.add()
    if leaf.endswith(("<key>", "<value>")):
        entries = getattr(target, leaf.rsplit("<", 1)[0])
        key, entry = MAP_ENTRY
        if leaf.endswith("<key>"):
            if hasattr(entries, "get_or_create"):  # a map of messages: a default value
                entries.get_or_create(value)
            else:
                entries[value] = entry
        else:
            entries[key] = value
        return
    name, indexed, _ = leaf.partition("[")
    if not indexed:
        setattr(target, name, value)
        return
    items = getattr(target, name)
    if len(items):
        items[0] = value
    else:
        items.append(value)


def request_of(case: Case, value: str) -> Message:
    request = message_factory.GetMessageClass(case.method.input_type)()
    json_format.ParseDict(FIELD_BASES.get((case.name, case.path), BASES[case.name]), request)
    set_path(request, case.path, value)
    return request


def bad_values(rule: Rule) -> dict[str, str]:
    """A value with a character outside the alphabet, and one a character too long."""
    inside = rule.valid
    return {
        "outside the alphabet": inside[:1] + rule.outside + inside[1:],
        "one past the length": (inside + "a" * rule.limit)[: rule.limit + 1],
    }


def item_errors(reply: Message) -> list[tuple[int, str]]:
    """(code, message) of every ItemError in a batch call's answer."""
    found = []
    for field, value in reply.ListFields():
        if field.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        for item in value if field.is_repeated else [value]:
            if item.DESCRIPTOR.full_name == "cronwave.v1.ItemError":
                found.append((item.code, item.message))
            else:
                found += item_errors(item)
    return found


def answer(suite: Suite, case: Case, request: Message) -> list[tuple[str, str]]:
    """(status code name, message) of the call and of each of its items' errors."""
    service = SERVED_BY[case.method.containing_service.name]
    reply_class = message_factory.GetMessageClass(case.method.output_type)
    with hop_channel(suite, service) as channel:
        call = channel.unary_unary(
            f"/{case.method.full_name.rsplit('.', 1)[0]}/{case.method.name}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=reply_class.FromString,
        )
        try:
            reply = call(request, timeout=30)
        except grpc.RpcError as exc:
            return [(exc.code().name, exc.details() or "")]
    return [("OK", "")] + [(_CODES.get(c, str(c)), m) for c, m in item_errors(reply)]


_CODES = {code.value[0]: code.name for code in grpc.StatusCode}


@pytest.fixture(scope="module")
def suite(shared_suite: SuiteFactory) -> Suite:
    suite = shared_suite(processes=("payment-gateway",))
    with hop_channel(suite, "workflow-store") as channel:
        workflow_store_service_pb2_grpc.WorkflowStoreServiceStub(channel).CreateSchedule(
            json_format.ParseDict(
                {"schedule": EXISTING}, workflow_store_service_pb2.CreateScheduleRequest()
            ),
            timeout=30,
        )
    return suite


def test_every_id_key_and_name_refuses_a_foreign_character_and_one_too_many(
    suite: Suite,
) -> None:
    wrong = []
    for case in cases():
        for what, value in bad_values(case.rule).items():
            said = answer(suite, case, request_of(case, value))
            named = [
                (code, message)
                for code, message in said
                if code == "INVALID_ARGUMENT"
                and any(message.startswith(f"{name}: ") for name in case.names(value))
            ]
            if not named:
                wrong.append(f"{case.name} {case.path} {what} ({case.rule.name}): {said}")
    assert not wrong, f"{len(wrong)} not refused naming the field:\n" + "\n".join(wrong)
