"""The normalized span record every source yields and every analysis reads.

Readers of the local span store, Jaeger JSON and OTLP JSON all produce ``Span``
values with the same conventions, so the analysis never knows where a span came
from: ids are lowercase hex (32 digits for a trace, 16 for a span, ``""`` for no
parent), times are integer nanoseconds since the Unix epoch, ``span_kind`` is the
OpenTelemetry kind name and ``status`` the OpenTelemetry status code name.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cronwave_core.errors import InvalidArgument

_HEX = re.compile(r"[0-9a-f]+")
SPAN_KINDS = ("INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
STATUSES = ("UNSET", "OK", "ERROR")


@dataclass(frozen=True, slots=True)
class Span:
    """One finished span.

    ``span_kind`` is OpenTelemetry's kind (``CLIENT``, ``SERVER``, ...), not
    ``cronwave.kind`` (the kind of time), which lives in ``attributes`` like every
    other cronwave attribute. ``end_ns`` is never before ``start_ns``.
    """

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    service: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any] = field(default_factory=dict)
    status: str = "UNSET"
    span_kind: str = "INTERNAL"

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def normalize_id(raw: object, digits: int, where: str) -> str:
    """A trace or span id as lowercase hex of ``digits`` digits.

    Accepts hex of any length up to ``digits`` (Jaeger's 64-bit trace ids are
    left-padded) and base64 of the id's bytes (OTLP JSON from older gateways).
    An empty or all-zero id is ``""``: OTLP's way of saying "no parent".
    """
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise InvalidArgument(where, f"expected a hex string, got {raw!r}")
    text = raw.strip().lower()
    if not text:
        return ""
    if len(text) <= digits and _HEX.fullmatch(text):
        hexed = text.rjust(digits, "0")
    else:
        try:
            decoded = base64.b64decode(raw.strip(), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidArgument(where, f"expected {digits} hex digits, got {raw!r}") from exc
        if len(decoded) * 2 > digits:
            raise InvalidArgument(where, f"expected {digits} hex digits, got {raw!r}")
        hexed = decoded.hex().rjust(digits, "0")
    return "" if hexed.strip("0") == "" else hexed


def as_int(raw: object, where: str) -> int:
    """An integer from a JSON number or a decimal string (proto3 JSON int64)."""
    if isinstance(raw, bool):
        raise InvalidArgument(where, f"expected an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str):
        try:
            return int(raw.strip())
        except ValueError:
            pass
    raise InvalidArgument(where, f"expected an integer, got {raw!r}")


def checked_span(
    *,
    trace_id: str,
    span_id: str,
    parent_span_id: str,
    name: str,
    service: str,
    start_ns: int,
    end_ns: int,
    attributes: Mapping[str, Any],
    status: str,
    span_kind: str,
    where: str,
) -> Span:
    """A ``Span`` after the checks every reader shares; ``where`` names the record."""
    if not trace_id:
        raise InvalidArgument(f"{where}.trace_id", "must not be empty")
    if not span_id:
        raise InvalidArgument(f"{where}.span_id", "must not be empty")
    if end_ns < start_ns:
        raise InvalidArgument(f"{where}.end", f"ends before it starts ({end_ns} < {start_ns})")
    kind = span_kind.upper().removeprefix("SPAN_KIND_")
    if kind not in SPAN_KINDS:
        kind = "INTERNAL"
    state = status.upper().removeprefix("STATUS_CODE_")
    if state not in STATUSES:
        state = "UNSET"
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_span_id,
        name=name,
        service=service,
        start_ns=start_ns,
        end_ns=end_ns,
        attributes=dict(attributes),
        status=state,
        span_kind=kind,
    )
