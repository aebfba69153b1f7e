"""tools/jaeger_ui_check.py's reading of a trace page: how a span's rows and Jaeger's
critical-path segments add up, what the UI's server answers, and the inputs it refuses.
The check against a built Jaeger UI is run by hand (docs/operations/drills.md)."""

from __future__ import annotations

import importlib.util
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    path = ROOT / "tools" / "jaeger_ui_check.py"
    spec = importlib.util.spec_from_file_location("jaeger_ui_check", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _row(tool: ModuleType, operation: str, depth: int, left: float, width: float, *critical):
    return tool.Row("worker", operation, depth, left, width, "", tuple(critical))


def test_the_critical_path_over_a_span_joins_the_segments_of_the_rows_beneath_it(tool):
    # Given worker.execute over 10-90% of a trace, the path on its own row at its start
    # and end, on its children between (overlapping), and on a later sibling's row
    rows = [
        _row(tool, "cronwave.run", 0, 0.0, 1.0, (0.0, 0.1)),
        _row(tool, "worker.execute", 1, 0.1, 0.8, (0.1, 0.05), (0.85, 0.05)),
        _row(tool, "job.body", 2, 0.15, 0.7, (0.15, 0.4)),
        _row(tool, "billing.charge", 3, 0.5, 0.35, (0.5, 0.35)),
        _row(tool, "worker.complete", 1, 0.9, 0.1, (0.9, 0.1)),
    ]

    # When its subtree's segments are laid over its bar
    beneath = tool.subtree(rows, 1)

    # Then the subtree ends at the sibling, and the path covers all of it once
    assert [r.operation for r in beneath] == ["worker.execute", "job.body", "billing.charge"]
    assert tool.covered_share(rows[1], beneath) == pytest.approx(1.0)
    # while its own row alone carries an eighth of it
    assert rows[1].critical_share == pytest.approx(0.125)


def test_a_gap_in_the_path_is_not_covered(tool):
    # Given a span whose subtree's segments leave 20% to 40% of the trace uncovered
    span = _row(tool, "worker.execute", 1, 0.0, 1.0, (0.0, 0.2))
    child = _row(tool, "job.body", 2, 0.2, 0.8, (0.4, 0.6))

    # Then a fifth of it is off the path
    assert tool.covered_share(span, [span, child]) == pytest.approx(0.8)


def test_the_ui_is_served_with_an_empty_query_service(tool, tmp_path: Path):
    # Given a built UI's folder
    (tmp_path / "index.html").write_text("<html>app</html>")
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "app.js").write_text("let app;")

    with tool.serving(tmp_path) as base:
        # When the app's files, its routes and the query API are asked for
        def get(path: str) -> tuple[int, str]:
            try:
                with urllib.request.urlopen(base + path, timeout=10) as answer:
                    return answer.status, answer.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()

        # Then files are files, a route is the app's page, and there are no services
        assert get("/static/app.js") == (200, "let app;")
        assert get("/trace/abc?uiFind=x") == (200, "<html>app</html>")
        status, body = get("/api/services")
        assert status == 200 and json.loads(body)["data"] == []
        assert get("/api/traces/abc")[0] == 404


def test_a_file_that_is_not_one_jaeger_trace_is_refused_naming_trace(tool, tmp_path: Path):
    not_json = tmp_path / "notes.txt"
    not_json.write_text("hello")
    two = tmp_path / "two.json"
    two.write_text(json.dumps({"data": [{"traceID": "a"}, {"traceID": "b"}]}))

    with pytest.raises(tool.CheckError, match=r"^TRACE: .* is not a Jaeger JSON file"):
        tool.trace_id_of(not_json)
    with pytest.raises(tool.CheckError, match=r"^TRACE: expected one trace .* found 2"):
        tool.trace_id_of(two)
    assert tool.main([str(tmp_path), str(not_json)]) == 2
