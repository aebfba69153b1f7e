"""``load_spans(source)``: one entry point for every place spans live.

A source is
- a data dir (its ``spans/*.jsonl``), a spans folder, or one ``.jsonl`` file: the
  local span store;
- a ``.json`` file: Jaeger JSON (has ``data``) or OTLP JSON (has ``resourceSpans``,
  possibly under ``result``), told apart by content;
- an ``http(s)://`` URL or a ``JaegerQuery``: a Jaeger query service.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cronwave_core.errors import InvalidArgument
from cronwave_waterfall.jaeger_json import read_jaeger
from cronwave_waterfall.jaeger_query import JaegerQuery, query_jaeger
from cronwave_waterfall.local_store import read_local_store
from cronwave_waterfall.otlp_json import read_otlp
from cronwave_waterfall.span import Span

Source = str | Path | JaegerQuery


def load_spans(source: Source, **query: Any) -> list[Span]:
    """Every span of ``source`` (see the module docstring). ``query`` overrides a
    URL source's ``JaegerQuery`` fields (``service``, ``start_min``, ``limit``...)."""
    if isinstance(source, JaegerQuery):
        return query_jaeger(source)
    text = str(source)
    if text.startswith(("http://", "https://")):
        return query_jaeger(JaegerQuery.from_url(text, **query))
    path = Path(text).expanduser()
    if not path.exists():
        raise InvalidArgument(
            "source", f"{path} does not exist; pass a data dir, a .jsonl/.json file or a URL"
        )
    if path.is_file() and path.suffix.lower() == ".json":
        return read_trace_document(path)
    return list(read_local_store(path))


def read_trace_document(path: Path) -> list[Span]:
    """The spans of a Jaeger JSON or OTLP JSON file."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgument("source", f"{path} is not a readable JSON file: {exc}") from exc
    return parse_trace_document(document, str(path))


def parse_trace_document(document: Any, name: str = "document") -> list[Span]:
    """The spans of a parsed Jaeger JSON or OTLP JSON document."""
    if isinstance(document, dict):
        if "data" in document:
            return list(read_jaeger(document))
        if "resourceSpans" in document or "result" in document:
            return list(read_otlp(document))
    raise InvalidArgument(
        "source", f"{name} is neither Jaeger JSON ('data') nor OTLP JSON ('resourceSpans')"
    )
