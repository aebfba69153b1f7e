"""The HTML waterfall as a browser lays it out (Debian's chromium, driven by
playwright, as the console's tests do): the chart takes the page's width, and every
axis label is whole inside the chart, none over its neighbour, at a wide, a middling
and a phone's width."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from cronwave_waterfall import build_runs, render_html, waterfall
from cronwave_waterfall.render_path import render_path_html

from .synth import all_spans, make_run, make_runs

CHROMIUM = Path("/usr/bin/chromium")
WIDTHS = (1600, 900, 380)

# Per visible tick label: its box, and the chart's; per row label: clipped or not.
MEASURE = """() => [...document.querySelectorAll('.chart')].map(chart => {
  const svg = chart.querySelector('svg').getBoundingClientRect();
  const labels = chart.querySelector('.labels').getBoundingClientRect();
  const ticks = [...chart.querySelectorAll('svg text.tick')]
    .filter(t => getComputedStyle(t).display !== 'none')
    .map(t => { const b = t.getBoundingClientRect();
                return {left: b.left, right: b.right, text: t.textContent}; });
  const clipped = [...chart.querySelectorAll('.labels div')]
    .filter(d => d.scrollWidth > d.clientWidth + 1).map(d => d.textContent);
  return {svgLeft: svg.left, svgRight: svg.right, labelsLeft: labels.left,
          page: document.documentElement.clientWidth, ticks, clipped};
})"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium")
    with sync_playwright() as driver:
        # --no-sandbox: the tests may run as root, where chromium's sandbox will not start.
        chromium = driver.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield chromium
        chromium.close()


def _pages() -> dict[str, str]:
    """A waterfall of milliseconds, one of backfill runs (hours late), and a run's path."""
    records = make_runs(60, seed=21)
    rng = random.Random(4)
    late = [
        make_run(rng, i, trigger="backfill", late_by=timedelta(hours=3, minutes=i))
        for i in range(6)
    ]
    runs = build_runs(all_spans(records))
    return {
        "milliseconds": render_html(waterfall(runs)),
        "hours": render_html(waterfall(build_runs(all_spans(late)), trigger="backfill")),
        "run path": render_path_html(runs[5]),
    }


def _charts(page: Page, html: str, width: int) -> list[dict[str, object]]:
    page.set_viewport_size({"width": width, "height": 900})
    page.set_content(html)
    return page.evaluate(MEASURE)  # type: ignore[no-any-return]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_chart_fills_the_page_and_its_axis_labels_fit(browser: Browser, width: int) -> None:
    page = browser.new_page()
    try:
        for name, html in _pages().items():
            charts = _charts(page, html, width)
            assert charts, name
            for chart in charts:
                svg_left, svg_right = float(chart["svgLeft"]), float(chart["svgRight"])  # type: ignore[arg-type]
                page_width = float(chart["page"])  # type: ignore[arg-type]
                # The chart runs from its labels to the page's margin (24 px each side)
                assert float(chart["labelsLeft"]) <= 25, (name, chart)  # type: ignore[arg-type]
                assert svg_right >= page_width - 25 - 1, (name, width, chart)
                ticks = chart["ticks"]
                assert isinstance(ticks, list) and len(ticks) >= 2, (name, width, chart)
                for tick in ticks:
                    assert svg_left - 0.5 <= tick["left"] and tick["right"] <= svg_right + 0.5, (
                        name,
                        width,
                        tick,
                    )
                for a, b in itertools.pairwise(ticks):
                    assert a["right"] + 2 <= b["left"], (name, width, a, b)
                assert chart["clipped"] == [], (name, width)
    finally:
        page.close()
