"""The keyword form of an update, turned into the UpdateSchedule request it stands
for: the new values and the field mask that names them. A keyword left ``None`` is
not in the mask, so that field keeps its value."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cronwave_proto.v1 import common_pb2 as pb

from cronwave._spec_input import policy_of, spec_of
from cronwave_core.domain.labels import labels_value
from cronwave_core.domain.schedule_fields import BY_KEYWORD, FIELDS
from cronwave_core.domain.spec import Policy, Spec
from cronwave_core.errors import InvalidArgument

#: The field of the refusal of an update that names nothing to change.
NOTHING_TO_UPDATE = "update_schedule"


def update_of(
    schedule_id: str,
    spec: Spec | None = None,
    policy: Policy | None = None,
    *,
    job_type: str | None = None,
    payload: dict[str, Any] | None = None,
    notify_format: str | None = None,
    labels: Mapping[str, str] | None = None,
    **fields: Any,
) -> tuple[pb.Schedule, list[str]]:
    """The schedule message and the mask paths of ``Client.update_schedule``'s
    arguments; ``fields`` are the spec's and policy's keywords (the field table's,
    ``cronwave_core.domain.schedule_fields``), each given one path. Raises
    ``InvalidArgument`` when nothing is to change, or a spec or policy is given both
    whole and by keywords; ``TypeError`` for a keyword that is no field."""
    unknown = [name for name in fields if name not in BY_KEYWORD]
    if unknown:
        raise TypeError(f"update_of() got an unexpected keyword argument {unknown[0]!r}")
    # In the table's order, whatever the order of the call.
    given = {f.keyword: fields[f.keyword] for f in FIELDS if fields.get(f.keyword) is not None}
    given_spec = {k: v for k, v in given.items() if BY_KEYWORD[k].part == "spec"}
    given_policy = {k: v for k, v in given.items() if BY_KEYWORD[k].part == "policy"}
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
        paths.extend(BY_KEYWORD[name].path for name in given_spec)
    if policy is not None:
        msg.policy.CopyFrom(policy.to_proto())
        paths.append("policy")
    elif given_policy:
        if "notify" in given_policy:
            given_policy["notify_format"] = notify_format
        msg.policy.CopyFrom(policy_of(**given_policy).to_proto())
        named = (BY_KEYWORD[name].path for name in given_policy if name in BY_KEYWORD)
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
