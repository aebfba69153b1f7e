"""``cli``: how long the CLI takes to answer, as a user at a shell sees it.

A suite of real processes is started, with a few schedules in it; then
``cronwave --help`` and ``cronwave schedule list`` (against that suite, by its
addresses) each run ``cli_runs`` times as fresh processes, one at a time, after one
warm-up run each (the page cache and the bytecode, as on a machine where the CLI has
run before). The figure is the wall time of each process from start to exit: the
interpreter's start, the imports, the command and, for the listing, its calls to the
store. Targets: p50 0.3 s for ``--help`` and 0.5 s for ``schedule list``, on an idle
machine; a shared, busy machine reads higher, so the load average at the start is
reported beside them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path

from cronwave_bench.context import BenchContext
from cronwave_bench.harness import SuiteOptions, bench_suite
from cronwave_bench.measure import ms_figures
from cronwave_bench.report import Result, fmt_ms
from cronwave_core.suite import Suite

#: The targets, in seconds of wall time (p50).
TARGETS = {"--help": 0.3, "schedule list": 0.5}
SCHEDULES = 20
#: One command run may take this long at most.
RUN_TIMEOUT = timedelta(seconds=30)


def cronwave_command() -> list[str]:
    """The ``cronwave`` entry point installed beside this interpreter, else the app
    run by this interpreter (the same code, one more import)."""
    script = Path(sys.executable).with_name("cronwave")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    code = "import sys; from cronwave.cli.main import app; sys.argv[0] = 'cronwave'; app()"
    return [sys.executable, "-c", code]


def client_env(suite: Suite, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment, less its ``CRONWAVE_*``, plus the suite's addresses
    and its certificates."""
    source = os.environ if environ is None else environ
    env = {k: v for k, v in source.items() if not k.startswith("CRONWAVE_")}
    env.update(
        CRONWAVE_STORE_ADDR=suite.store_addr,
        CRONWAVE_DISPATCHER_ADDR=suite.dispatcher_addr,
        CRONWAVE_PLANNER_ADDR=suite.planner_addr,
        CRONWAVE_LEADER_ADDR=suite.leader_addr,
        CRONWAVE_TLS_DIR=str(suite.tls_dir),
    )
    if suite.config.insecure:
        env["CRONWAVE_INSECURE"] = "1"
    return env


def time_runs(argv: Sequence[str], env: Mapping[str, str], runs: int) -> list[float]:
    """Wall seconds of ``runs`` runs of ``argv`` (after one not counted); a run that
    fails raises ``RuntimeError`` with what it printed."""
    times: list[float] = []
    for i in range(runs + 1):
        started = time.perf_counter()
        done = subprocess.run(
            list(argv),
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT.total_seconds(),
            check=False,
        )
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv[-2:])} exited {done.returncode}: {done.stderr.strip()[-500:]}"
            )
        if i:
            times.append(elapsed)
    return times


def run_cli(ctx: BenchContext) -> Result:
    runs = ctx.sizes.cli_runs
    result = Result("cli")
    ctx.say(f"cli: `cronwave --help` and `cronwave schedule list`, {runs} runs each")
    load_at_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    with bench_suite(ctx.backend, ctx.suite_dir("cli"), SuiteOptions(tracing=False)) as (
        suite,
        client,
    ):
        for i in range(SCHEDULES):
            client.create_schedule(
                f"cli-{i:02d}", cron="0 2 * * *", job_type="cronwave.noop", paused=True
            )
        base = cronwave_command()
        env = client_env(suite)
        measured = {
            "--help": time_runs([*base, "--help"], env, runs),
            "schedule list": time_runs([*base, "schedule", "list"], env, runs),
        }
    for command, seconds in measured.items():
        figures = ms_figures([s * 1000 for s in seconds], ("p50", "p90", "max"))
        if figures is None:
            continue  # cli_runs=0: nothing measured
        result.figures[command] = figures
        target = TARGETS[command]
        result.row(
            f"cronwave {command} (wall)",
            f"p50 {fmt_ms(figures['p50'])}, p90 {fmt_ms(figures['p90'])}, "
            f"max {fmt_ms(figures['max'])} over {len(seconds)} runs",
            f"p50 <= {target:g} s",
            figures["p50"] <= target * 1000,
        )
    result.figures["load_average_at_start"] = round(load_at_start, 2)
    result.notes.append(
        f"load average {load_at_start:.2f} at the start: the targets are for an idle machine"
    )
    return result
