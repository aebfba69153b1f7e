"""Checks a run's trace as the real Jaeger UI shows it: one root over the whole trace,
and a critical path through ``worker.execute``.

The check builds nothing. It takes a built Jaeger UI (jaeger-ui's
``packages/jaeger-ui/build``: ``npm ci && npm run build`` in a checkout of
github.com/jaegertracing/jaeger-ui), serves it on loopback with no query service
behind it (``/api/services`` answers an empty list, as a Jaeger with no traces does),
drives Debian's chromium through playwright to the Search page's Upload tab, uploads
the file that ``cronwave trace export RUN_ID --format jaeger`` wrote, opens the trace,
and reads the trace page as a person would see it:

- the header's Duration, and each span row's service, operation, depth (its indent
  guides), bar (left and width, in % of the trace) and critical-path segments (the
  black stretches Jaeger draws over the bars on the trace's critical path);
- the roots are the rows at depth 0: there must be one, and its bar must span at least
  ``ROOT_SHARE`` of the trace;
- the critical path must run through ``worker.execute`` for ``EXECUTE_SHARE`` of its
  bar: Jaeger draws the path on whichever span it is in at each moment, so the
  segments of its row and of the rows beneath it (the job's body, its SQL, its
  gateway calls) are joined and laid over its bar.

Jaeger writes a bar's left and width rounded to 0.1% of the trace, but its critical-path
segments unrounded: over a span of a few milliseconds in a trace of a second, the rounding
alone would leave half of the span off its own path. So the shares are measured over the
span's exact bar, from the uploaded file (its start and duration within the trace, as
Jaeger places it), once the page's rounded bar is found to agree with it. The segments
are read as the browser writes them, to six significant digits: about a microsecond of a
one-second trace, so a short span may read 99.9% covered where Jaeger drew all of it.

    python tools/jaeger_ui_check.py UI_DIR TRACE.json [--screenshot /tmp/jaeger.png]

Exit status 0 when both hold, 1 when either does not (each failure is printed), 2 on
bad arguments. The screenshot is the trace page's top (header and root); a second,
``<name>-execute.png``, shows ``worker.execute``'s row.
"""

from __future__ import annotations

import argparse
import http.server
import json
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
#: The root spans at least this share of the trace (the tracing goal's 99%).
ROOT_SHARE = 0.99
EXECUTE = "worker.execute"
#: The critical path runs through ``worker.execute`` (its row or the rows beneath it)
#: for at least this share of its bar: the job is the run's path while it runs.
EXECUTE_SHARE = 0.99
VIEWPORT = {"width": 1600, "height": 1000}
#: Page loads and uploads wait at most this long (milliseconds).
WAIT_MS = 60_000
#: How many viewport-heights the check scrolls through a long trace, at most.
MAX_SCROLLS = 200
#: How far a bar's left or width on the page may be from its span's in the file: Jaeger
#: rounds both to 0.1% of the trace (SpanBar's toPercent).
BAR_ROUNDING = 0.0005 + 1e-9

#: The trace page header's overview: Trace Start, Duration, Services, Depth, Total Spans.
OVERVIEW = """() => Object.fromEntries(
  [...document.querySelectorAll('.TracePageHeader--overviewItems .LabeledList--item')]
    .filter(li => li.querySelector('.LabeledList--label'))
    .map(li => [li.querySelector('.LabeledList--label').textContent.replace(/:\\s*$/, '').trim(),
                (li.querySelector('strong') || li).textContent.trim()]))"""

#: Every span row on the page now: name, depth, bar and critical-path segments.
ROWS = """() => [...document.querySelectorAll('.span-row')].map(row => {
  const bar = row.querySelector('.SpanBar--bar');
  const text = sel => (row.querySelector(sel) || {}).textContent || '';
  return {
    top: Math.round(row.getBoundingClientRect().top + window.scrollY),
    service: text('.span-svc-name').trim(),
    operation: text('.endpoint-name').trim(),
    // one guide per ancestor, and one Jaeger adds to every row ('root')
    depth: row.querySelectorAll('.SpanTreeOffset--indentGuide').length - 1,
    left: bar ? bar.style.left : '',
    width: bar ? bar.style.width : '',
    label: text('.SpanBar--label').trim(),
    critical: [...row.querySelectorAll('.SpanBar--criticalPath')]
      .map(s => ({left: s.style.left, width: s.style.width})),
  };
})"""


class CheckError(Exception):
    """A check could not be made: what was wrong and what to do."""


@dataclass(frozen=True)
class Row:
    """One span row of Jaeger UI's trace timeline; shares are of the trace (0..1)."""

    service: str
    operation: str
    depth: int
    left: float
    width: float
    label: str
    critical: tuple[tuple[float, float], ...]

    @property
    def critical_share(self) -> float:
        """The share of this span's bar on the critical path in this row."""
        return covered_share(self, [self])


def subtree(rows: list[Row], index: int) -> list[Row]:
    """The row at ``index`` and the rows beneath it (the timeline lists a span's
    descendants right after it, deeper than it)."""
    below = [rows[index]]
    for row in rows[index + 1 :]:
        if row.depth <= rows[index].depth:
            break
        below.append(row)
    return below


def covered_share(span: Row, rows: list[Row]) -> float:
    """The share of ``span``'s bar that the critical-path segments of ``rows`` cover
    (the path is drawn on whichever span it runs through: a parent's own time on its
    row, its children's time on theirs)."""
    if span.width <= 0:
        return 0.0
    start, end = span.left, span.left + span.width
    pieces = sorted(
        (max(start, left), min(end, left + width))
        for row in rows
        for left, width in row.critical
        if left < end and left + width > start
    )
    covered, reach = 0.0, start
    for low, high in pieces:
        if high > reach:
            covered += high - max(low, reach)
            reach = high
    return min(1.0, covered / span.width)


def span_bars(trace_file: Path) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Each span's exact bar, (left, width) in shares of the trace, by service and
    operation: Jaeger's trace runs from its earliest span start to its latest end."""
    try:
        trace = json.loads(trace_file.read_text())["data"][0]
        processes = trace.get("processes", {})
        spans = [
            (
                (s.get("process") or processes[s["processID"]])["serviceName"],
                s["operationName"],
                int(s["startTime"]),
                int(s["duration"]),
            )
            for s in trace["spans"]
        ]
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise CheckError(
            f"TRACE: {trace_file} has a span without service, operation, start or "
            f"duration ({exc.__class__.__name__})"
        ) from None
    if not spans:
        raise CheckError(f"TRACE: {trace_file} has no spans")
    start = min(s[2] for s in spans)
    length = max(s[2] + s[3] for s in spans) - start
    bars: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for service, operation, begin, duration in spans:
        bar = ((begin - start) / length, duration / length) if length else (0.0, 1.0)
        bars.setdefault((service, operation), []).append(bar)
    return bars


def exact_bar(row: Row, bars: dict[tuple[str, str], list[tuple[float, float]]]) -> Row | None:
    """``row`` with its span's exact bar from the file: the span of its service and
    operation whose bar rounds to the page's (the nearest, if several do); None when
    none does."""
    near = sorted(
        (abs(left - row.left) + abs(width - row.width), left, width)
        for left, width in bars.get((row.service, row.operation), [])
        if abs(left - row.left) <= BAR_ROUNDING and abs(width - row.width) <= BAR_ROUNDING
    )
    return replace(row, left=near[0][1], width=near[0][2]) if near else None


def _percent(text: str) -> float:
    match = re.fullmatch(r"\s*(-?[\d.]+(?:e-?\d+)?)%\s*", text)
    return float(match.group(1)) / 100 if match else 0.0


def _row(raw: dict[str, Any]) -> Row:
    return Row(
        service=raw["service"],
        operation=raw["operation"],
        depth=int(raw["depth"]),
        left=_percent(raw["left"]),
        width=_percent(raw["width"]),
        label=raw["label"],
        critical=tuple((_percent(c["left"]), _percent(c["width"])) for c in raw["critical"]),
    )


class _Handler(http.server.SimpleHTTPRequestHandler):
    """The built UI's files; any other path is the app's page (its routes are the
    app's own); ``/api/services`` is an empty list, so the Search form loads."""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path.startswith("/api/"):
            empty = path.rstrip("/") == "/api/services" or path.endswith("/operations")
            body = json.dumps({"data": [], "total": 0, "limit": 0, "offset": 0, "errors": None})
            self.send_response(200 if empty else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode() if empty else b"{}")
            return
        if not (Path(self.directory) / path.lstrip("/")).is_file():
            self.path = "/index.html"
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serving(ui_dir: Path) -> Iterator[str]:
    """The UI at a loopback URL while the block runs."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(_Handler, directory=str(ui_dir))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def trace_id_of(trace_file: Path) -> str:
    """The one trace's id in a Jaeger JSON file (``{"data": [trace]}``)."""
    try:
        document = json.loads(trace_file.read_text())
        traces = document["data"]
        ids = {t["traceID"] for t in traces}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckError(
            f"TRACE: {trace_file} is not a Jaeger JSON file ({exc.__class__.__name__}); "
            "write one with `cronwave trace export RUN_ID --format jaeger --output FILE`"
        ) from None
    if len(ids) != 1:
        raise CheckError(f"TRACE: expected one trace in {trace_file}, found {len(ids)}")
    return str(ids.pop())


def _open_trace(page: Page, base: str, trace_file: Path, trace_id: str) -> None:
    page.goto(f"{base}/search", wait_until="domcontentloaded")
    page.get_by_role("tab", name="Upload").click(timeout=WAIT_MS)
    page.locator("input[type=file]").set_input_files(str(trace_file), timeout=WAIT_MS)
    link = page.locator(f'a[href*="/trace/{trace_id}"]').first
    link.wait_for(timeout=WAIT_MS)
    link.click()
    page.wait_for_selector(".TracePageHeader", timeout=WAIT_MS)
    page.wait_for_selector(".span-row", timeout=WAIT_MS)


def _all_rows(page: Page) -> list[Row]:
    """Every span row, scrolling through the trace (the timeline draws only the rows
    near the window)."""
    seen: dict[int, dict[str, Any]] = {}
    page.evaluate("window.scrollTo(0, 0)")
    for _ in range(MAX_SCROLLS):
        for raw in page.evaluate(ROWS):
            seen.setdefault(raw["top"], raw)
        at_end = page.evaluate(
            "window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 2"
        )
        if at_end:
            break
        page.evaluate("window.scrollBy(0, window.innerHeight * 0.8)")
        page.wait_for_timeout(100)  # the timeline redraws its rows on the scroll event
    page.evaluate("window.scrollTo(0, 0)")
    return [_row(seen[top]) for top in sorted(seen)]


def check(ui_dir: Path, trace_file: Path, screenshot: Path, chromium: Path) -> list[str]:
    """Runs the check; returns the failures (none when it holds) after printing what
    the page showed."""
    trace_id = trace_id_of(trace_file)
    bars = span_bars(trace_file)
    if not (ui_dir / "index.html").is_file():
        raise CheckError(
            f"UI_DIR: {ui_dir} has no index.html; give the built UI "
            "(jaeger-ui's packages/jaeger-ui/build after `npm ci && npm run build`)"
        )
    if not chromium.exists():
        raise CheckError(f"--chromium: {chromium} is missing (`make setup` installs chromium)")
    with serving(ui_dir) as base, sync_playwright() as driver:
        # --no-sandbox: the check may run as root, where chromium's sandbox will not start.
        browser = driver.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
            _open_trace(page, base, trace_file, trace_id)
            page.wait_for_selector(".TracePageHeader--overviewItems", timeout=WAIT_MS)
            overview: dict[str, str] = page.evaluate(OVERVIEW)
            rows = _all_rows(page)
            page.screenshot(path=str(screenshot))
            execute_shot = screenshot.with_name(f"{screenshot.stem}-execute{screenshot.suffix}")
            found = page.locator(".span-row", has_text=EXECUTE).first
            if found.count():
                found.scroll_into_view_if_needed()
                page.screenshot(path=str(execute_shot))
        finally:
            browser.close()

    print(
        f"trace {trace_id}: {len(rows)} span rows; the page's header: "
        + ", ".join(f"{k} {v}" for k, v in overview.items())
    )
    failures = []
    exact: dict[int, Row] = {}
    for i, row in enumerate(rows):
        if row.depth == 0 or row.operation == EXECUTE:
            found_bar = exact_bar(row, bars)
            if found_bar is None:
                failures.append(
                    f"the page draws {row.service} {row.operation} at {row.left:.1%} for "
                    f"{row.width:.1%} of the trace, where {trace_file} has no such span"
                )
            else:
                exact[i] = found_bar
    roots = [exact.get(i, r) for i, r in enumerate(rows) if r.depth == 0]
    for root in roots:
        print(
            f"root {root.service} {root.operation}: its bar spans {root.width:.2%} of the "
            f"trace from {root.left:.2%} ({root.label}); on the critical path: "
            f"{root.critical_share:.1%} of it"
        )
    if len(roots) != 1:
        failures.append(f"expected one root span row, found {len(roots)}")
    elif roots[0].width < ROOT_SHARE:
        failures.append(f"the root spans {roots[0].width:.1%} of the trace (< {ROOT_SHARE:.0%})")
    executes = [i for i, r in enumerate(rows) if r.operation == EXECUTE]
    through = []
    for i in executes:
        row, beneath = exact.get(i, rows[i]), subtree(rows, i)
        share = covered_share(row, beneath)
        on_path = sorted({r.operation for r in beneath if covered_share(row, [r]) > 0})
        print(
            f"{EXECUTE} ({row.service}, depth {row.depth}, {row.label}): the critical path "
            f"covers {share:.1%} of it, through {len(on_path)} of its {len(beneath)} spans "
            f"({', '.join(on_path[:8])}{', ...' if len(on_path) > 8 else ''})"
        )
        through.append(share)
    if not executes:
        failures.append(f"no {EXECUTE} span row on the page")
    elif max(through) < EXECUTE_SHARE:
        failures.append(
            f"the critical path covers {max(through):.1%} of {EXECUTE} (< {EXECUTE_SHARE:.0%})"
        )
    print(f"screenshots: {screenshot}" + (f", {execute_shot}" if executes else ""))
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("ui_dir", type=Path, metavar="UI_DIR", help="the built Jaeger UI")
    parser.add_argument(
        "trace", type=Path, metavar="TRACE", help="cronwave trace export --format jaeger's file"
    )
    parser.add_argument("--screenshot", type=Path, default=Path("/tmp/jaeger-ui-check.png"))
    parser.add_argument("--chromium", type=Path, default=CHROMIUM)
    args = parser.parse_args(argv)
    try:
        failures = check(args.ui_dir.resolve(), args.trace, args.screenshot, args.chromium)
    except CheckError as exc:
        print(f"jaeger_ui_check: {exc}", file=sys.stderr)
        return 2
    for failure in failures:
        print(f"FAILED: {failure}")
    print("ok" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
