"""``console``: how long the web console takes to show its list of schedules when the
suite has many.

On a suite of real processes with the console, on a database of its own:

1. ``console_schedules`` schedules (10,000) are written straight into the store's
   database by the store's own code (``workflow_store.bench_seed``, as
   ``planner-memory`` does), each with ``console_runs`` SUCCEEDED runs an hour apart
   (24: a full strip of recent slots). The planner is stopped first, so the figures
   are the console's and the store's alone.
2. The front page (``GET /``) is fetched once to warm up, then ``console_gets`` times
   (5), one after another, over HTTP as a browser would: ``first_page_s`` is each
   fetch's wall time, from the request to the last byte of the page.
3. Every page of the list is fetched in turn, following its "next" link from the
   first page to the last: ``all_pages_s`` is the walk's wall time, for every schedule
   shown once.

Run it alone: ``python -m cronwave_bench.console_list [SCHEDULES [RUNS]]`` prints the
figures as JSON (``CRONWAVE_DATABASE_URL`` for PostgreSQL, as ``cronwave bench``).
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any
from urllib.parse import urljoin

from cronwave_bench.context import BenchContext
from cronwave_bench.harness import Backend, Say, SuiteOptions, _quiet, bench_suite, own_database
from cronwave_bench.measure import ms_figures
from cronwave_bench.planner_memory import JOB_TYPE, run_tool, specs
from cronwave_bench.report import Result, fmt_ms

#: One fetch of a page may take this long at most.
FETCH_TIMEOUT_S = 900.0
_NEXT = re.compile(r'id="next-page" href="([^"]+)"')
_ROW = '<tr data-schedule="'


def fetch(url: str) -> tuple[float, str]:
    """Wall seconds to fetch ``url`` whole, and its text."""
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as response:
        body = response.read()
    return time.perf_counter() - began, body.decode()


def walk(first: str) -> tuple[float, int, int]:
    """Every page of the list from ``first`` on, by its "next" links: wall seconds,
    pages and schedule rows."""
    seconds, pages, rows = 0.0, 0, 0
    url: str | None = first
    while url is not None:
        took, page = fetch(url)
        seconds, pages, rows = seconds + took, pages + 1, rows + page.count(_ROW)
        following = _NEXT.search(page)
        url = urljoin(first, following.group(1).replace("&amp;", "&")) if following else None
    return seconds, pages, rows


def measure(
    schedules: int, runs: int, gets: int, backend: Backend, work_dir: Path, say: Say = _quiet
) -> dict[str, Any]:
    """The figures of the module docstring."""
    figures: dict[str, Any] = {
        "schedules": schedules,
        "runs_per_schedule": runs,
        "database": backend.database,
    }
    with own_database(backend, "console") as own:
        database_url = own.database_url if own.database == "postgresql" else None
        options = SuiteOptions(tracing=False, console=True)
        with bench_suite(replace(own, database_url=database_url), work_dir, options) as (
            suite,
            _client,
        ):
            suite.stop_proc(suite.procs["cron-planner"])
            url = database_url or f"sqlite:///{suite.config.data_dir / 'cronwave.db'}"
            say(f"console: writing {schedules:,} schedules with {runs} runs each")
            rows = specs(schedules, datetime.now(UTC))
            seeded = run_tool("workflow_store.bench_seed", [url, JOB_TYPE, str(runs)], rows, 1800)
            figures["seed_s"] = seeded["insert_s"]
            figures["runs_written"] = seeded.get("runs_written", 0)
            front = suite.console_url
            say("console: the front page, warm-up")
            fetch(front)
            times, size, shown = [], 0, 0
            for _ in range(gets):
                took, page = fetch(front)
                times.append(took * 1000)
                size, shown = len(page.encode()), page.count(_ROW)
            figures["first_page_ms"] = ms_figures(times, ("p50", "max"))
            figures["first_page_bytes"] = size
            figures["first_page_schedules"] = shown
            say("console: every page of the list")
            seconds, pages, listed = walk(front)
            figures["all_pages_s"] = seconds
            figures["pages"] = pages
            figures["all_pages_schedules"] = listed
    return figures


def run_console_list(ctx: BenchContext) -> Result:
    figures = measure(
        ctx.sizes.console_schedules,
        ctx.sizes.console_runs,
        ctx.sizes.console_gets,
        ctx.backend,
        ctx.suite_dir("console"),
        ctx.say,
    )
    result = Result("console", figures=figures)
    first = figures["first_page_ms"]
    if first is not None:
        result.row(
            "front page (GET /)",
            f"p50 {fmt_ms(first['p50'])}, max {fmt_ms(first['max'])} over {int(first['count'])} "
            f"fetches; {figures['first_page_schedules']} schedules, "
            f"{figures['first_page_bytes'] / 1024:,.0f} KiB",
        )
    result.row(
        "every page of the list",
        f"{figures['all_pages_s']:.2f} s for {figures['pages']} pages, "
        f"{figures['all_pages_schedules']:,} schedules",
    )
    result.row(
        "schedules",
        f"{figures['schedules']:,} with {figures['runs_per_schedule']} runs each "
        f"(written in {figures['seed_s']:.1f} s)",
    )
    return result


def main() -> None:
    """``python -m cronwave_bench.console_list [SCHEDULES [RUNS]]``"""
    schedules = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 24
    with TemporaryDirectory(prefix="cronwave-console-") as tmp:
        figures = measure(schedules, runs, 5, Backend.from_env(), Path(tmp), say=print)
    print(json.dumps(figures, default=str))


if __name__ == "__main__":
    main()
