"""Hypothesis strategies for any cronwave request, built from its proto descriptor.

Every field may be left unset or set to a value drawn for its type: strings with NUL,
control and non-BMP characters, huge ones and ones shaped like what the field names
(cron expressions, zones, JSON documents, ids), and ones at and one past the request
limits (an id of 128 and 129 characters, a 1,025-byte note, a payload one byte past
256 KiB); integers at the ends of their range;
doubles with NaN and the infinities; enum numbers no enum has; Timestamps and
Durations outside their valid range; nested messages a few levels deep; repeated fields
empty, short, or one item past a batch limit (of default items).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.descriptor import FieldDescriptor as F
from google.protobuf.message import Message
from hypothesis import strategies as st

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT32 = (0, 2**32 - 1)
UINT64 = (0, 2**64 - 1)
#: Nested messages go this deep; deeper ones are left unset.
MAX_DEPTH = 3
#: One item past the batch limits (1,000 runs, starts, slots...).
PAST_BATCH = 1_001

_STRINGS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\n",
    "\x1b[31m",
    "\u202e",
    "\ufeff",
    "é",
    "🙂",
    "x" * 5_000,
    "y" * 70_000,
    "SELECT 1; --",
    "../../etc/passwd",
    "%s %n",
    "nightly-billing",
    "cronwave.noop",
    "default",
    "planner",
    # at and one past the request limits (cronwave_core.limits): ids and names, notes,
    # payloads; all far under every server's receive cap, so the servicer names the field
    "k" * 128,
    "k" * 129,
    "n" * 1_025,
    "p" * (256 * 1024 + 1),
    "my key",
]
# Values shaped like what a field of that name holds, so requests also get past the
# first rule and reach the later ones.
_HINTS: list[tuple[str, list[str]]] = [
    (
        "json",
        [
            "{}",
            '{"a": 1}',
            "[1, 2]",
            '"text"',
            '{"a": NaN}',
            '{"a": -Infinity}',
            "1e999",
            '{"n": ' + "9" * 5_000 + "}",
            "[" * 100 + "]" * 100,
            '{"a":' * 100_000,
            "not json",
            '{"a": "' + "x" * (256 * 1024) + '"}',  # one object 9 bytes past the limit
        ],
    ),
    (
        "cron",
        [
            "* * * * *",
            "0 2 * * *",
            "@daily",
            "*/" + "9" * 20 + " * * * *",
            "61 * * * *",
            "0 0 30 2 *",
            "1," * 50_000 + "1 * * * *",
            "H * * * *",
        ],
    ),
    ("time_zone", ["UTC", "Europe/Berlin", "a" * 5_000, "/etc/localtime", "../UTC", "Mars/Base"]),
    ("exclude_dates", ["2030-01-01", "2030-02-30", "01/02/2030"]),
    ("currency", ["eur", "EUR", "eu"]),
    ("reason", ["rejected", "retries_exhausted", "pending:buffered", "paused"]),
    ("kind", ["enqueued", "claimed"]),
    ("traceparent", ["00-" + "a" * 32 + "-" + "b" * 16 + "-01", "00-zz"]),
    ("scope", ["planner", "planner\x00"]),
]

_TIMESTAMP_SECONDS = [
    0,
    1_800_000_000,
    -62_135_596_800,
    -62_135_596_801,
    253_402_300_799,
    253_402_300_800,
    *INT64,
]
_NANOS = [0, 999_999_999, 1_000_000_000, -1, *INT32]
_DURATION_SECONDS = [0, 1, 60, 86_400, 86_401, -1, 315_576_000_001, *INT64]
_DEFAULTS: dict[int, Any] = {
    F.TYPE_STRING: "",
    F.TYPE_BYTES: b"",
    F.TYPE_BOOL: False,
    F.TYPE_DOUBLE: 0.0,
    F.TYPE_FLOAT: 0.0,
}
_DOUBLES = [0.0, -0.0, 1.0, 2.5, 1e308, -1e308, 5e-324, float("nan"), float("inf"), float("-inf")]


def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    ends = [0, 1, -1, low, high, low + 1, high - 1]
    return st.sampled_from([v for v in ends if low <= v <= high]) | st.integers(low, high)


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each drawn with its weight (``st.one_of`` would merge
    equal strategies into one)."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(table.__getitem__)


def _one_of(values: list[Any]) -> st.SearchStrategy[Any]:
    """``sampled_from(values)`` that shows as an index, not as the (huge) values."""

    def pick(index: int) -> Any:
        return values[index]

    return st.integers(0, len(values) - 1).map(pick)


def _strings(name: str) -> st.SearchStrategy[str]:
    hinted = [value for key, values in _HINTS if key in name for value in values]
    valid_id = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,30}", fullmatch=True)
    # Half the draws are well-formed ids (or what the field's name asks for), so a
    # request often gets past its first field to the next.
    return weighted((1, _one_of(hinted + _STRINGS)), (1, st.text(max_size=40)), (2, valid_id))


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        return _strings(field.name)
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.sampled_from(_DOUBLES) | st.floats(allow_nan=True, allow_infinity=True)
    if kind == FieldDescriptor.TYPE_ENUM:
        known = [value.number for value in field.enum_type.values]
        return st.sampled_from(known) | _ints(*INT32)  # proto3 enums are open
    if kind in (
        FieldDescriptor.TYPE_INT32,
        FieldDescriptor.TYPE_SINT32,
        FieldDescriptor.TYPE_SFIXED32,
    ):
        return _ints(*INT32)
    if kind in (
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_SFIXED64,
    ):
        return _ints(*INT64)
    if kind in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return _ints(*UINT32)
    if kind in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return _ints(*UINT64)
    raise AssertionError(f"no strategy for field type {kind} of {field.full_name}")


def _well_known(descriptor: Descriptor) -> st.SearchStrategy[Message] | None:
    cls = message_factory.GetMessageClass(descriptor)
    # About half the values are valid, so a request gets past one field to the next.
    nanos = st.one_of(st.just(0), st.integers(0, 999_999_999), st.sampled_from(_NANOS))
    if descriptor.full_name == "google.protobuf.Timestamp":
        seconds = st.one_of(
            st.integers(1_500_000_000, 2_200_000_000),
            st.sampled_from(_TIMESTAMP_SECONDS),
            st.integers(*INT64),
        )
        return st.builds(cls, seconds=seconds, nanos=nanos)
    if descriptor.full_name == "google.protobuf.Duration":
        seconds = st.one_of(
            st.integers(0, 100_000), st.sampled_from(_DURATION_SECONDS), st.integers(*INT64)
        )
        return st.builds(cls, seconds=seconds, nanos=nanos)
    return None


def _is_map(field: FieldDescriptor) -> bool:
    return field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry


def _map(field: FieldDescriptor) -> st.SearchStrategy[dict[Any, Any]]:
    """A map of scalars (``labels``) or of well-known messages (``queue_waits``): a few
    entries of any keys and values, or past a limit of entries."""
    key, value = (field.message_type.fields_by_name[name] for name in ("key", "value"))
    past: Any = "v"
    if value.type == FieldDescriptor.TYPE_MESSAGE:
        known = _well_known(value.message_type)
        assert known is not None, f"no strategy for {field.full_name}"
        values = known
        past = message_factory.GetMessageClass(value.message_type)()
    else:
        values = _scalar(value)
    few = st.dictionaries(_scalar(key), values, max_size=3)
    past_limit = st.just(PAST_BATCH).map(lambda n: {f"k{i}": past for i in range(n)})
    return weighted((5, few), (1, past_limit))


def _field(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any] | None:
    if _is_map(field):
        return _map(field)
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if depth >= MAX_DEPTH:
            return None
        one = messages(field.message_type, depth + 1)
    else:
        one = _scalar(field)
    if not field.is_repeated:
        return one
    many = st.lists(one, max_size=3)
    # Past a batch limit with default items: cheap to build, and the limit is checked
    # before the items are.
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        item: Any = message_factory.GetMessageClass(field.message_type)()
    else:
        item = _DEFAULTS.get(field.type, 0)
    past_limit = st.just(PAST_BATCH).map(lambda n: [item] * n)
    return weighted((5, many), (1, past_limit))


def _setter(cls: type[Message], descriptor: Descriptor) -> Callable[[dict[str, Any]], Message]:
    by_name = descriptor.fields_by_name

    def build(values: dict[str, Any]) -> Message:
        msg = cls()
        for name, value in values.items():
            field = by_name[name]
            target = getattr(msg, name)
            if _is_map(field) and field.message_type.fields_by_name["value"].message_type:
                for key, item in value.items():  # a map of messages: copied in
                    target[key].CopyFrom(item)
            elif _is_map(field):
                target.update(value)
            elif field.is_repeated:
                if field.type == FieldDescriptor.TYPE_MESSAGE:
                    for item in value:
                        target.add().CopyFrom(item)
                else:
                    target.extend(value)
            elif field.type == FieldDescriptor.TYPE_MESSAGE:
                target.CopyFrom(value)
            else:
                setattr(msg, name, value)
        return msg

    return build


def messages(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    """Messages of ``descriptor``'s type, any field set or unset."""
    known = _well_known(descriptor)
    if known is not None:
        return known
    cls = message_factory.GetMessageClass(descriptor)
    fields = {}
    for field in descriptor.fields:
        strategy = _field(field, depth)
        if strategy is not None:  # set three times in four
            fields[field.name] = weighted((1, st.none()), (3, strategy))
    build = _setter(cls, descriptor)
    return st.fixed_dictionaries(fields).map(
        lambda values: build({k: v for k, v in values.items() if v is not None})
    )
