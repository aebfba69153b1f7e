"""Renderings: terminal (tail line first), JSON (the documented schema), HTML
(self-contained, with an inline SVG)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from cronwave_core.telemetry.vocabulary import KINDS
from cronwave_waterfall import (
    build_runs,
    compare_scenarios,
    render_html,
    render_json,
    render_terminal,
    waterfall,
)
from cronwave_waterfall.render_html import KIND_COLORS
from cronwave_waterfall.render_json import COMPARE_SCHEMA, SCHEMA

from .synth import Injection, all_spans, make_runs

STATS_KEYS = {"count", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"}


@pytest.fixture(scope="module")
def runs():
    return build_runs(all_spans(make_runs(800, Injection("persist", "database", 30.0), seed=9)))


def test_terminal_puts_the_tail_line_first_then_bars_then_numbers(runs):
    result = waterfall(runs)
    text = render_terminal(result, width=100)
    lines = text.splitlines()
    assert lines[0] == result.tail.headline  # one line, never wrapped
    assert lines[0].startswith("p99 tail: ")
    assert "\x1b[" not in text  # no colour unless asked
    bar_rows = [line for line in lines if re.match(r"^(plan|persist|complete) +[ █▓░]*█", line)]
    assert len(bar_rows) == 3
    assert any(line.split()[:1] == ["end-to-end"] and "█" in line for line in lines)
    table = [line for line in lines if line.strip().startswith("database ")]
    assert table, "the numbers table lists kinds"
    assert max(len(line) for line in lines[1:]) <= 100
    assert "\x1b[" in render_terminal(result, color=True)


def test_terminal_compare_shows_each_scenario(runs):
    text = render_terminal(compare_scenarios(runs), width=120)
    first_lines = text.splitlines()[:3]
    assert [line.split()[0] for line in first_lines] == ["[local]", "[redis]", "[miss]"]
    assert "persist miss" in text
    assert "side by side" in text


def test_json_follows_the_schema(runs):
    document = json.loads(render_json(waterfall(runs, last=500)))
    assert document["schema"] == SCHEMA
    assert document["unit"] == "ms"
    assert document["runs"] == 500
    assert document["selection"] == {"last": 500}
    assert document["tail"]["headline"].startswith("p99 tail: ")
    assert set(document["end_to_end"]) == STATS_KEYS
    assert set(document["lateness"]) == STATS_KEYS
    hops = [h["hop"] for h in document["hops"]]
    assert hops == ["plan", "leader", "dispatch", "persist", "pickup", "execute", "complete"]
    for hop in document["hops"]:
        assert set(hop) == {"hop", "offset_ms", "end_offset_ms", "wall", "kinds"}
        assert set(hop["wall"]) == STATS_KEYS
        for kind in hop["kinds"]:
            assert set(kind) == {"kind", "present", "stats"}
            assert set(kind["stats"]) == STATS_KEYS
    contribution = document["tail"]["contributions"][0]
    assert set(contribution) == {"hop", "kind", "excess_ms", "share", "tail_mean_ms", "median_ms"}
    attribute = document["tail"]["attributes"][0]
    assert set(attribute) == {"key", "value", "label", "tail_frequency", "rest_frequency"}
    # stable: the same input renders byte for byte the same
    assert render_json(waterfall(runs, last=500)) == render_json(waterfall(runs, last=500))


def test_json_compare_wraps_one_waterfall_per_scenario(runs):
    document = json.loads(render_json(compare_scenarios(runs)))
    assert document["schema"] == COMPARE_SCHEMA
    assert [w["scenario"] for w in document["scenarios"]] == ["local", "redis", "miss"]
    assert all(w["schema"] == SCHEMA for w in document["scenarios"])


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)


def test_html_is_one_self_contained_file_with_an_svg(runs):
    page = render_html(waterfall(runs))
    parser = _Tags()
    parser.feed(page)
    assert "http://" not in page and "https://" not in page
    assert "svg" in parser.tags and "rect" in parser.tags
    for forbidden in ("script", "link", "img", "iframe"):
        assert forbidden not in parser.tags
    assert not any(name in ("src", "href") for name, _ in parser.attrs)
    headline = waterfall(runs).tail.headline
    assert page.index("p99 tail:") < page.index("<svg")
    assert headline.split(",")[0] in page


def test_html_escapes_what_spans_say():
    spans = all_spans(make_runs(5, seed=4, schedule_id="<script>alert(1)</script>"))
    page = render_html(waterfall(build_runs(spans), schedule_id="<script>alert(1)</script>"))
    assert "<script>" not in page
    assert "&lt;script&gt;" in page


def test_html_compare_has_a_chart_per_scenario(runs):
    page = render_html(compare_scenarios(runs))
    assert page.count("<svg") == 3


def test_every_kind_of_time_has_a_colour_of_its_own():
    assert [k for k in KIND_COLORS] == [str(k) for k in KINDS]
    assert len(set(KIND_COLORS.values())) == len(KIND_COLORS)
