"""Reader of the local span store: ``<data dir>/spans/*.jsonl``.

Each line is one span as ``cronwave_core.telemetry.export.span_to_dict`` writes it,
or the runs of a batch call (``cronwave_core.telemetry.fanout.batch_record``): the
batch's spans are then read as one copy per run, in each run's trace. A process
appends to its own file, so the only line that can be incomplete is a file's last one
(the process was killed mid-write, or is writing right now); that line is skipped. A
malformed line anywhere else means the file is not a span store, and reading stops
with an error naming the file and line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from cronwave_core.errors import InvalidArgument
from cronwave_core.telemetry.fanout import ATTR_BATCH_SIZE, copy_span_id
from cronwave_waterfall.span import SPAN_KINDS, STATUSES, Span, as_int, checked_span, normalize_id


def span_files(path: Path) -> list[Path]:
    """The ``.jsonl`` files of a data dir (its ``spans/`` folder), of a spans
    folder itself, or the one file given; sorted so reads are repeatable."""
    if path.is_file():
        return [path]
    folder = path / "spans" if (path / "spans").is_dir() else path
    return sorted(folder.glob("*.jsonl"))


def read_local_store(path: Path) -> Iterator[Span]:
    """Every span stored under ``path`` (see ``span_files``)."""
    if not path.exists():
        raise InvalidArgument("source", f"{path} does not exist; pass a data dir or a spans file")
    for file in span_files(path):
        yield from read_jsonl(file)


def read_jsonl(file: Path) -> Iterator[Span]:
    """The spans of one JSON-lines file; its last line is skipped if incomplete."""
    with file.open("r", encoding="utf-8", errors="replace") as handle:
        numbered = [
            (n, line) for n, line in enumerate(handle.read().split("\n"), 1) if line.strip()
        ]
    lines = [line for _, line in numbered]
    records = _parse_all(lines)
    if records is None:
        records = _parse_each(numbered, file)
    batches: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    spans: list[Span] = []
    for (number, _), record in zip(numbered, records, strict=False):
        if not isinstance(record, dict):
            raise InvalidArgument("source", f"{file}:{number} is not a JSON object")
        if "batch_trace_id" in record:
            _add_batch(batches, record, f"{file.name}:{number}")
        else:
            spans.append(span_from_dict(record, f"{file.name}:{number}"))
    for span in spans:
        items = batches.get(span.trace_id)
        if items is None:
            yield span
        else:
            yield from _copies(span, items)


def _add_batch(
    batches: dict[str, dict[tuple[str, str], dict[str, Any]]], record: dict[str, Any], where: str
) -> None:
    """A batch line (``cronwave_core.telemetry.fanout.batch_record``): the runs a batch call
    carried. A later line of the same batch adds what was learnt since (run ids)."""
    trace_id = normalize_id(record.get("batch_trace_id"), 32, f"{where}.batch_trace_id")
    items = record.get("items")
    if not isinstance(items, list):
        raise InvalidArgument(f"{where}.items", "expected a list of [trace_id, span_id, {}]")
    known = batches.setdefault(trace_id, {})
    for n, entry in enumerate(items):
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], dict)):
            raise InvalidArgument(f"{where}.items[{n}]", "expected [trace_id, span_id, {}]")
        key = (
            normalize_id(entry[0], 32, f"{where}.items[{n}][0]"),
            normalize_id(entry[1], 16, f"{where}.items[{n}][1]"),
        )
        known.setdefault(key, {}).update(entry[2])


def _copies(span: Span, items: dict[tuple[str, str], dict[str, Any]]) -> Iterator[Span]:
    """The batch span ``span`` in the trace of each of ``items`` (see
    ``cronwave_core.telemetry.fanout``: same ids as the copies an OTLP export carries)."""
    span_id = int(span.span_id, 16)
    parent = int(span.parent_span_id, 16) if span.parent_span_id else 0
    for (trace_hex, item_span), attrs in items.items():
        trace_id = int(trace_hex, 16)
        parent_id = f"{copy_span_id(parent, trace_id):016x}" if parent else item_span
        yield replace(
            span,
            trace_id=trace_hex,
            span_id=f"{copy_span_id(span_id, trace_id):016x}",
            parent_span_id=parent_id,
            attributes={**span.attributes, **attrs, ATTR_BATCH_SIZE: len(items)},
        )


def _parse_all(lines: list[str]) -> list[Any] | None:
    """All lines in one parse (much faster than one parse per line), or ``None``
    when any line is not exactly one JSON value."""
    try:
        records = json.loads("[" + ",".join(lines) + "]")
    except json.JSONDecodeError:
        return None
    return records if isinstance(records, list) and len(records) == len(lines) else None


def _parse_each(numbered: list[tuple[int, str]], file: Path) -> list[Any]:
    records = []
    for index, (number, line) in enumerate(numbered):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if index == len(numbered) - 1:
                break  # a write cut short; every earlier span is whole
            raise InvalidArgument(
                "source", f"{file}:{number} is not a JSON span ({exc.msg}); is this a span store?"
            ) from exc
    return records


_IDS = re.compile(r"[0-9a-f]{48}(?:[0-9a-f]{16})?")


def span_from_dict(record: dict[str, Any], where: str) -> Span:
    """A span from ``span_to_dict``'s format."""
    fast = _as_written(record)
    if fast is not None:
        return fast
    attributes = record.get("attributes") or {}
    if not isinstance(attributes, dict):
        raise InvalidArgument(f"{where}.attributes", "expected an object")
    return checked_span(
        trace_id=normalize_id(record.get("trace_id"), 32, f"{where}.trace_id"),
        span_id=normalize_id(record.get("span_id"), 16, f"{where}.span_id"),
        parent_span_id=normalize_id(record.get("parent_span_id"), 16, f"{where}.parent_span_id"),
        name=str(record.get("name", "")),
        service=str(record.get("service", "")),
        start_ns=as_int(record.get("start_ns"), f"{where}.start_ns"),
        end_ns=as_int(record.get("end_ns"), f"{where}.end_ns"),
        attributes=attributes,
        status=str(record.get("status") or "UNSET"),
        span_kind=str(record.get("kind") or "INTERNAL"),
        where=where,
    )


def _as_written(record: dict[str, Any]) -> Span | None:
    """The span, when the record is exactly as ``span_to_dict`` writes it (the
    common case, checked cheaply); ``None`` sends it through the full checks."""
    trace_id = record.get("trace_id")
    span_id = record.get("span_id")
    parent = record.get("parent_span_id")
    start = record.get("start_ns")
    end = record.get("end_ns")
    attributes = record.get("attributes")
    kind = record.get("kind")
    status = record.get("status")
    if not (
        type(trace_id) is str
        and type(span_id) is str
        and type(parent) is str
        and type(start) is int
        and type(end) is int
        and type(attributes) is dict
        and kind in SPAN_KINDS
        and status in STATUSES
        and start <= end
        and _IDS.fullmatch(trace_id + span_id + parent)
    ):
        return None
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent if parent.strip("0") else "",
        name=str(record.get("name", "")),
        service=str(record.get("service", "")),
        start_ns=start,
        end_ns=end,
        attributes=attributes,
        status=status,
        span_kind=kind,
    )
