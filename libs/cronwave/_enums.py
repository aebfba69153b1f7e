"""Proto enums as plain strings: run states and trigger kinds upper-case
(``"SUCCEEDED"``), policies lower-case like ``cronwave_core.spec`` (``"shift"``)."""

from __future__ import annotations

from typing import Any

from cronwave.v1 import common_pb2 as pb
from cronwave_core.errors import InvalidArgument

TERMINAL_STATES = frozenset(
    {"SUCCEEDED", "FAILED", "TIMED_OUT", "MISSED", "CANCELLED", "DEAD_LETTERED"}
)
"""Run states that never change again."""

# What the server treats an UNSPECIFIED (0) policy as; see common.proto.
_POLICY_DEFAULTS = {
    "DST_GAP_POLICY_": "shift",
    "DST_REPEAT_POLICY_": "once",
    "OVERLAP_POLICY_": "skip",
    "CATCHUP_POLICY_": "latest",
}


def _short(wrapper: Any, prefix: str, value: int) -> str:
    try:
        return str(wrapper.Name(value)).removeprefix(prefix)
    except ValueError:  # a value from a newer server than this SDK
        return str(value)


def state_name(value: int) -> str:
    return _short(pb.RunState, "RUN_STATE_", value)


def trigger_name(value: int) -> str:
    return _short(pb.TriggerKind, "TRIGGER_KIND_", value)


def policy_name(wrapper: Any, prefix: str, value: int) -> str:
    if value == 0:
        return _POLICY_DEFAULTS[prefix]
    return _short(wrapper, prefix, value).lower()


def _choices(wrapper: Any, prefix: str, upper: bool = False) -> list[str]:
    names = [
        str(name).removeprefix(prefix)
        for name in wrapper.DESCRIPTOR.values_by_name
        if not str(name).endswith("_UNSPECIFIED")
    ]
    return names if upper else [n.lower() for n in names]


def _parse(wrapper: Any, prefix: str, text: str | None, field: str, upper: bool = False) -> int:
    """The enum number of ``text`` (case-insensitive short name); 0 for ``None``."""
    if text is None or text == "":
        return 0
    name = prefix + str(text).strip().upper().replace("-", "_")
    if name.endswith("_UNSPECIFIED") or name not in wrapper.DESCRIPTOR.values_by_name:
        choices = ", ".join(_choices(wrapper, prefix, upper))
        raise InvalidArgument(field, f"{text!r} is not one of {choices}")
    return int(wrapper.Value(name))


def parse_dst_gap(text: str | None) -> int:
    return _parse(pb.DstGapPolicy, "DST_GAP_POLICY_", text, "spec.dst_gap")


def parse_dst_repeat(text: str | None) -> int:
    return _parse(pb.DstRepeatPolicy, "DST_REPEAT_POLICY_", text, "spec.dst_repeat")


def parse_overlap(text: str | None) -> int:
    return _parse(pb.OverlapPolicy, "OVERLAP_POLICY_", text, "policy.overlap")


def parse_catchup(text: str | None) -> int:
    return _parse(pb.CatchupPolicy, "CATCHUP_POLICY_", text, "policy.catchup")


def parse_state(text: str, field: str) -> int:
    return _parse(pb.RunState, "RUN_STATE_", text, field, upper=True)


DST_GAP_CHOICES = _choices(pb.DstGapPolicy, "DST_GAP_POLICY_")
DST_REPEAT_CHOICES = _choices(pb.DstRepeatPolicy, "DST_REPEAT_POLICY_")
OVERLAP_CHOICES = _choices(pb.OverlapPolicy, "OVERLAP_POLICY_")
CATCHUP_CHOICES = _choices(pb.CatchupPolicy, "CATCHUP_POLICY_")
