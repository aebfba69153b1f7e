"""``cronwave load``: drive many runs end to end, for a waterfall with a stable tail.

Each run is a manual trigger of one of a few load schedules (paused, so the planner
never fires them; job type ``cronwave.noop`` unless told otherwise). At most
``--concurrency`` runs are in flight: a new run is triggered when one has ended, so
the figures are those of a system at that load, not of a growing backlog. A run has
ended when the run-status cache (Redis) holds its terminal state; runs still open at
the end are read from the store once.

``--scenario`` steers where the dispatcher's route look-up of every run is answered:
``local`` (the default path: in the dispatcher's process, after each schedule's first
run), ``redis`` (``cronwave-cache-control: no-local``) or ``miss`` (``no-cache``: the
store). ``cronwave waterfall --scenario ...`` then shows each path whole.

Everything is bounded: ``--timeout`` stops triggering and waiting. Without a suite
at the configured addresses, a private one is started in ``--data-dir`` on free
ports and stopped afterwards; its spans stay there for ``cronwave waterfall``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated

import typer

from cronwave.cli._console import SERVICE_MODULES, out, reported_errors, server_modules
from cronwave_bench.names import LOAD_JOB_TYPE, LOAD_SCENARIOS
from cronwave_core.errors import InvalidArgument

app = typer.Typer()

SCENARIOS = LOAD_SCENARIOS
DEFAULT_JOB_TYPE = LOAD_JOB_TYPE


@app.command("load")
def load(
    runs: Annotated[int, typer.Option("--runs", min=1, help="Runs to drive end to end.")],
    scenario: Annotated[
        str, typer.Option("--scenario", help="Where route look-ups are answered: local|redis|miss.")
    ] = "local",
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Runs in flight at most.")
    ] = 8,
    schedules: Annotated[
        int, typer.Option("--schedules", min=1, help="Load schedules the runs are spread over.")
    ] = 8,
    job_type: Annotated[
        str, typer.Option("--job-type", help="Job type of the load schedules.")
    ] = DEFAULT_JOB_TYPE,
    warmup: Annotated[
        int | None,
        typer.Option(
            "--warmup", min=0, help="Runs first, not measured (default: 10% of --runs, <= 200)."
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1.0, help="Seconds to trigger and wait, at most.")
    ] = 600.0,
    connect: Annotated[
        bool, typer.Option("--connect", help="Use a running suite only; never start one.")
    ] = False,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Where a private suite keeps its data and spans."),
    ] = None,
) -> None:
    """Drive N runs end to end and print the throughput.

    The runs are manual triggers of a few paused load schedules (no-op jobs), at most C
    in flight, after an unmeasured warm-up; `cronwave waterfall --since ...` (printed at
    the end) then shows where their time went."""
    with server_modules("cronwave load", SERVICE_MODULES):
        from cronwave_bench.load_drive import children_cpu, drive
        from cronwave_server.cli._load_target import suite_target
    console = out()
    with reported_errors():
        if scenario not in SCENARIOS:
            raise InvalidArgument(
                "scenario", f"must be one of {', '.join(SCENARIOS)}, got {scenario!r}"
            )
        # CPU time of the processes a private suite runs, all of them (services, their
        # job processes, Redis): counted once they have been stopped and reaped.
        cpu_before = children_cpu()
        with suite_target(data_dir, connect) as (target, suite):
            where = (
                f"a private suite in {suite.config.data_dir}"
                if suite is not None
                else f"the suite at {target.dispatcher_addr}"
            )
            console.print(f"driving {runs} runs through {where} ...")
            report = drive(
                target,
                runs=runs,
                scenario=scenario,
                concurrency=concurrency,
                timeout=timedelta(seconds=timeout),
                job_type=job_type,
                schedules=schedules,
                warmup=min(200, runs // 10) if warmup is None else warmup,
                progress=True,
            )
    console.print(report.summary())
    if suite is not None and report.triggered:
        cpu = children_cpu() - cpu_before
        total = report.triggered + report.warmed
        console.print(
            f"the suite's processes used {cpu:.1f} CPU-seconds (start-up included): "
            f"{cpu / total * 1000:.1f} ms per run over {total} runs"
        )
    since = report.since.isoformat().replace("+00:00", "Z") if report.since else ""
    where_flag = f" --data-dir {data_dir}" if data_dir is not None else ""
    console.print(
        f"`cronwave waterfall --since {since}{where_flag}` shows where the time went",
        soft_wrap=True,
    )
    if report.unfinished or report.refused:
        raise typer.Exit(1)
