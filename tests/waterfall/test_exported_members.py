"""The package's public surface is exactly what ``__all__`` lists."""

from __future__ import annotations

import cronwave_waterfall


def test_exported_members():
    assert sorted(cronwave_waterfall.__all__) == [
        "JaegerQuery",
        "Run",
        "RunFilter",
        "Span",
        "Stats",
        "TailAttribution",
        "Waterfall",
        "attribute_tail",
        "build_runs",
        "compare_scenarios",
        "export_jaeger",
        "export_otlp",
        "load_spans",
        "quantile",
        "query_jaeger",
        "read_jaeger",
        "read_otlp",
        "render_fragment",
        "render_html",
        "render_json",
        "render_run",
        "render_terminal",
        "select_runs",
        "trace_export_command",
        "waterfall",
        "waterfall_command",
    ]
    for name in cronwave_waterfall.__all__:
        assert getattr(cronwave_waterfall, name) is not None
