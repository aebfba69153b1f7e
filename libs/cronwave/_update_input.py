"""The keyword form of an update, turned into the UpdateSchedule request it stands
for: the new values and the field mask that names them. A keyword left ``None`` is
not in the mask, so that field keeps its value."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from cronwave_proto.v1 import common_pb2 as pb

from cronwave._spec_input import policy_of, spec_of
from cronwave_core.domain.labels import labels_value
from cronwave_core.domain.spec import Interval, Policy, Spec
from cronwave_core.errors import InvalidArgument

#: The field of the refusal of an update that names nothing to change.
NOTHING_TO_UPDATE = "update_schedule"
#: A keyword whose policy field has another name.
_POLICY_PATHS = {"notify": "policy.notifiers", "notify_format": "policy.notifiers"}


def update_of(
    schedule_id: str,
    spec: Spec | None = None,
    policy: Policy | None = None,
    *,
    job_type: str | None = None,
    payload: dict[str, Any] | None = None,
    cron: str | Sequence[str] | None = None,
    time_zone: str | None = None,
    dst_gap: str | None = None,
    dst_repeat: str | None = None,
    overlap: str | None = None,
    catchup: str | None = None,
    catchup_window: timedelta | None = None,
    catchup_max_runs: int | None = None,
    exclude_dates: Iterable[date | str] | None = None,
    intervals: Iterable[Interval] | None = None,
    one_off: Iterable[datetime] | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    max_runs: int | None = None,
    jitter: timedelta | None = None,
    deadline: timedelta | None = None,
    notify: Sequence[str] | None = None,
    notify_format: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> tuple[pb.Schedule, list[str]]:
    """The schedule message and the mask paths of ``Client.update_schedule``'s
    arguments. Raises ``InvalidArgument`` when nothing is to change, or a spec or
    policy is given both whole and by keywords."""
    spec_keywords: dict[str, Any] = {
        "cron": cron,
        "time_zone": time_zone,
        "dst_gap": dst_gap,
        "dst_repeat": dst_repeat,
        "exclude_dates": exclude_dates,
        "intervals": intervals,
        "one_off": one_off,
        "start_at": start_at,
        "end_at": end_at,
        "max_runs": max_runs,
        "jitter": jitter,
    }
    policy_keywords: dict[str, Any] = {
        "overlap": overlap,
        "catchup": catchup,
        "catchup_window": catchup_window,
        "catchup_max_runs": catchup_max_runs,
        "deadline": deadline,
        "notify": notify,
    }
    given_spec = {k: v for k, v in spec_keywords.items() if v is not None}
    given_policy = {k: v for k, v in policy_keywords.items() if v is not None}
    if spec is not None and given_spec:
        raise InvalidArgument("spec", "give the spec whole or by its keywords, not both")
    if policy is not None and given_policy:
        raise InvalidArgument("policy", "give the policy whole or by its keywords, not both")
    msg = pb.Schedule(schedule_id=schedule_id)
    paths: list[str] = []
    if spec is not None:
        msg.spec.CopyFrom(spec.to_proto())
        paths.append("spec")
    elif given_spec:
        msg.spec.CopyFrom(spec_of(**given_spec).to_proto())
        paths.extend(f"spec.{name}" for name in given_spec)
    if policy is not None:
        msg.policy.CopyFrom(policy.to_proto())
        paths.append("policy")
    elif given_policy:
        if notify is not None:
            given_policy["notify_format"] = notify_format
        msg.policy.CopyFrom(policy_of(**given_policy).to_proto())
        named = (_POLICY_PATHS.get(name, f"policy.{name}") for name in given_policy)
        paths.extend(dict.fromkeys(named))
    if job_type is not None:
        msg.job_type = job_type
        paths.append("job_type")
    if payload is not None:
        try:
            msg.payload_json = json.dumps(payload)
        except (TypeError, ValueError) as exc:
            raise InvalidArgument("payload", f"must be JSON-serializable data: {exc}") from exc
        paths.append("payload_json")
    if labels is not None:
        msg.labels.update(dict(labels_value(labels)))
        paths.append("labels")
    if not paths:
        raise InvalidArgument(
            NOTHING_TO_UPDATE, "name at least one field to change, e.g. cron=... or payload=..."
        )
    return msg, paths
