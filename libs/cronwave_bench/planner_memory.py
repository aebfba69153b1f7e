"""``planner-memory``: a real planner process holding 100,000 schedules.

What is measured, on a suite of real processes (store, leader-election, dispatcher,
worker, planner) on its own database:

1. The planner's resident memory (``VmRSS`` in ``/proc/<pid>/status``) with no
   schedules. Then the planner is stopped.
2. 100,000 schedules are written straight into the store's database by the store's own
   code (``workflow_store.bench_seed``, a process of its own: one transaction, every
   schedule with its own revision, as CreateSchedule would write it, minus 100,000
   round trips): ``insert_s``.
3. The planner is started again, so it loads them the way a new replica does (paged
   ListSchedules, then a term: LatestFireTimes in pages, a next slot per schedule):
   ``load_s`` until it holds them all, ``lead_s`` until its first term has begun.
   Its ``VmRSS`` then (and ``VmHWM``, the peak) is the figure: memory with 100,000
   schedules.
4. Time to find and fire the next due one, end to end: a one-off schedule due 2 s
   ahead is created over the SDK, several times; ``dispatch_ms`` is the run's
   ``created_at`` (the store recorded it) minus its fire time -- the heap pop, the
   plan, the overlap check, the dispatcher and the store's insert, with 100,000 other
   schedules in the heap.
5. A tenth as many schedules again are written the same way while the planner runs: it
   learns of them over its watch stream, without a restart or a poll of the
   schedules; the time from the write's start until it holds them all is ``watch_apply_s`` (for
   ``watch_schedules`` of them). A tenth, not all 100,000 again: the watch applies
   changes one by one, at the same cost per schedule whatever their number, and a
   second 100,000 would double the scenario's time for the same figure.
6. The same heap operations in a process of its own (``cron_planner.bench_index``:
   ``ScheduleIndex.peek`` + ``advance``, the O(log n) pop and the next-fire computation
   per fire) over an index of the same schedules: ``index_find_and_fire_us``.

The schedules are distinct: cron times at every minute of every hour of 28 days of a
month six months away (so none fires during the measurement), in 8 time zones.

The schedules are distinct by default (the worst case for memory: every one has a
compiled calendar of its own); ``DISTINCT`` makes them share that many specs.

Run it: ``python -m cronwave_bench.planner_memory [N [DISTINCT]]`` prints the figures as
JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, overload

from cronwave_bench.context import BenchContext
from cronwave_bench.harness import Backend, SuiteOptions, bench_suite, own_database
from cronwave_bench.measure import wait_until
from cronwave_bench.report import Result, fmt_ms

TARGET_MIB = 200.0
JOB_TYPE = "cronwave.noop"
ZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Asia/Tokyo",
    "Australia/Sydney",
    "America/Los_Angeles",
    "Europe/London",
    "Asia/Kolkata",
)
PROBES = 5
_INDEX_FIRES_TIMED = 2000


def rss_mib(pid: int | str = "self", field: str = "VmRSS") -> float | None:
    """Resident memory of a process in MiB (``VmRSS``, or ``VmHWM`` for its peak) from
    Linux ``/proc``; None elsewhere."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return None


def specs(n: int, now: datetime, distinct: int = 0, first: int = 0) -> Iterator[dict[str, str]]:
    """``n`` schedules (id, cron expression, time zone), numbered from ``first``, none
    firing in the next months; every spec is different, or they cycle through
    ``distinct`` different ones."""
    month = (now.month + 5) % 12 + 1
    for i in range(first, first + n):
        j = i % distinct if distinct else i
        cron = f"{j % 60} {(j // 60) % 24} {1 + (j // 1440) % 28} {month} *"
        yield {"id": f"pm{i:06d}", "cron": cron, "time_zone": ZONES[(j // 40_320) % len(ZONES)]}


def _lines(rows: Iterator[dict[str, str]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def run_tool(module: str, args: list[str], rows: Iterator[dict[str, str]], timeout: float) -> Any:
    """Run a service's benchmark tool (``python -m MODULE ARGS``) over ``rows`` on its
    standard input and return the JSON it prints."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        input=_lines(rows),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"planner-memory: {module} failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass
class _Progress:
    say: Callable[[str], None]

    def __call__(self, text: str) -> None:
        self.say(f"planner-memory: {text}")


@overload
def run_planner_memory(schedules: BenchContext) -> Result: ...


@overload
def run_planner_memory(
    schedules: int = 100_000,
    *,
    backend: Backend | None = None,
    work_dir: Path | None = None,
    say: Callable[[str], None] = ...,
    distinct: int = 0,
) -> dict[str, Any]: ...


def run_planner_memory(
    schedules: int | BenchContext = 100_000,
    *,
    backend: Backend | None = None,
    work_dir: Path | None = None,
    say: Callable[[str], None] = lambda _line: None,
    distinct: int = 0,
) -> dict[str, Any] | Result:
    """Measure a planner holding ``schedules`` schedules (see the module docstring) and
    return the figures; ``distinct`` > 0 makes them share that many different specs
    (the default, 0, gives each its own: the worst case for memory). Given a
    ``BenchContext`` instead (``cronwave bench``), measure its ``planner_schedules`` on
    its backend and return the scenario's ``Result``."""
    if isinstance(schedules, BenchContext):
        ctx = schedules
        figures = run_planner_memory(
            ctx.sizes.planner_schedules,
            backend=ctx.backend,
            work_dir=ctx.suite_dir("planner-memory"),
            say=ctx.say,
        )
        return _result(figures)
    if work_dir is None:
        with TemporaryDirectory(prefix="cronwave-planner-memory-") as tmp:
            return _measure(schedules, distinct, backend or Backend(), Path(tmp), _Progress(say))
    return _measure(schedules, distinct, backend or Backend(), work_dir, _Progress(say))


def _measure(
    n: int, distinct: int, backend: Backend, work_dir: Path, say: _Progress
) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "schedules": n,
        "distinct_specs": distinct or n,
        "database": backend.database,
    }
    # A database of its own (PostgreSQL) or the suite's own SQLite file: 100,000
    # schedules never reach another scenario.
    with own_database(backend, "planner_memory") as own:
        database_url = own.database_url if own.database == "postgresql" else None
        suite_backend = replace(own, database_url=database_url)
        # No dispatch lead: the probe measures fire time -> run recorded, not how far
        # ahead of its fire time a run may be prepared.
        env = {"CRONWAVE_LEASE_TTL": "5", "CRONWAVE_DISPATCH_LEAD": "0"}
        options = SuiteOptions(tracing=False, env=env)
        with bench_suite(suite_backend, work_dir, options) as (suite, client):
            _wait(lambda: client.planner_status().leader, "the planner to lead")
            planner = suite.procs["cron-planner"]
            figures["planner_rss_empty_mib"] = rss_mib(planner.pid)
            suite.stop_proc(planner)

            # The schedules, written by the store's own code in one transaction.
            url = database_url or f"sqlite:///{suite.config.data_dir / 'cronwave.db'}"
            now = datetime.now(UTC)

            def write(count: int, first: int) -> tuple[int, float]:
                """Write ``count`` schedules; how many, and the wall clock when the
                transaction began."""
                rows = specs(count, now, distinct, first)
                done = run_tool("workflow_store.bench_seed", [url, JOB_TYPE], rows, 900)
                figures.setdefault("insert_s", done["insert_s"])
                return int(done["written"]), float(done["began_at"])

            say(f"writing {n:,} schedules into the store's database")
            written, _ = write(n, 0)

            # A new planner loads them as a new replica would.
            say("starting the planner: it loads them over ListSchedules")
            began = time.monotonic()
            suite.restart("cron-planner")
            _wait(lambda: client.planner_status().schedules >= written, "the load", 900)
            figures["load_s"] = time.monotonic() - began
            _wait(lambda: client.planner_status().leader, "the new term", 300)
            figures["lead_s"] = time.monotonic() - began
            figures["planner_pid"] = planner.pid
            figures["planner_rss_mib"] = rss_mib(planner.pid)
            figures["planner_hwm_mib"] = rss_mib(planner.pid, "VmHWM")

            say(f"firing {PROBES + 1} one-off schedules among them")
            # The first fire waits for the new term to re-base every schedule on the
            # store's newest fire times; the others show the steady state.
            figures["first_dispatch_ms"] = _probe(client, 0)
            figures["dispatch_ms"] = [_probe(client, i) for i in range(1, PROBES + 1)]
            figures["planner_rss_after_fires_mib"] = rss_mib(planner.pid)

            # The running planner hears of more over its watch stream.
            extra = max(1, n // 10)
            say(f"writing {extra:,} more while the planner runs: it follows its watch")
            held = client.planner_status().schedules
            _, began_at = write(extra, n)
            _wait(lambda: client.planner_status().schedules >= held + extra, "the watch", 600)
            figures["watch_apply_s"] = time.time() - began_at
            figures["watch_schedules"] = extra
            figures["planner_rss_after_watch_mib"] = rss_mib(planner.pid)
            figures["planner_status_schedules"] = client.planner_status().schedules
    say("timing the heap in a process of its own")
    figures["index_find_and_fire_us"] = run_tool(
        "cron_planner.bench_index",
        [str(_INDEX_FIRES_TIMED)],
        specs(n, datetime.now(UTC), distinct),
        900,
    )
    return figures


def _probe(client: Any, i: int) -> float:
    """Create a one-off schedule due 2 s ahead; ms from its fire time to its run being
    recorded in the store."""
    fire = (datetime.now(UTC) + timedelta(seconds=2)).replace(microsecond=0)
    schedule_id = f"probe-{uuid.uuid4().hex[:8]}-{i}"
    client.create_schedule(schedule_id, one_off=[fire], job_type=JOB_TYPE)
    runs = _wait(lambda: client.list_runs(schedule_id, limit=1), "the probe's run", 60)
    created = runs[0].created_at
    return float((created - fire).total_seconds() * 1000)


def _wait(check: Callable[[], Any], what: str, timeout: float = 120) -> Any:
    return wait_until(check, what, timeout, poll=0.1, scenario="planner-memory")


def _result(figures: dict[str, Any]) -> Result:
    result = Result("planner-memory")
    result.figures = figures
    n = figures["schedules"]
    rss = figures.get("planner_rss_mib")
    result.row(
        "planner RSS with them",
        "n/a" if rss is None else f"{rss:.0f} MiB (empty: {figures['planner_rss_empty_mib']:.0f})",
        f"<= {TARGET_MIB:.0f} MiB",
        None if rss is None else rss <= TARGET_MIB,
    )
    result.row("schedules", f"{n:,}: written in {figures['insert_s']:.1f} s")
    result.row(
        "loaded by a new planner",
        f"{figures['load_s']:.1f} s, leading at {figures['lead_s']:.1f} s",
    )
    watched, watch_s = figures["watch_schedules"], figures["watch_apply_s"]
    result.row(
        "more, reached the planner by watch",
        f"{watched:,} in {watch_s:.1f} s ({watched / max(watch_s, 1e-9):,.0f}/s)",
    )
    dispatch = sorted(figures["dispatch_ms"])
    result.row(
        "fire time to run recorded",
        f"median {fmt_ms(dispatch[len(dispatch) // 2])}, max {fmt_ms(dispatch[-1])} "
        f"(first after the term began: {fmt_ms(figures['first_dispatch_ms'])})",
    )
    heap = figures["index_find_and_fire_us"]
    result.row("find + fire next due (heap)", f"p50 {heap['p50']:.0f} us, p99 {heap['p99']:.0f} us")
    return result


def main() -> None:
    """``python -m cronwave_bench.planner_memory [N [DISTINCT]]``"""
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    distinct = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    figures = run_planner_memory(n, backend=Backend.from_env(), say=print, distinct=distinct)
    print(json.dumps(figures, default=str))


if __name__ == "__main__":
    main()
