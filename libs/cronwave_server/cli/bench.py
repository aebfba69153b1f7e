"""``cronwave bench [SCENARIO...]``: fire lateness, burst, throughput and the rest,
measured the same way every time (``cronwave_bench`` says how), as a Markdown table."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from cronwave.cli._console import err, fail, reported_errors, server_modules
from cronwave_bench.names import SCENARIO_NAMES

app = typer.Typer()


@app.command()
def bench(
    scenarios: Annotated[
        list[str] | None,
        typer.Argument(
            help=f"Scenarios to run, of: {', '.join(SCENARIO_NAMES)} (default: all).",
            show_default=False,
        ),
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures as JSON here.")
    ] = None,
    size: Annotated[
        list[str] | None,
        typer.Option(
            "--size",
            help="Override a size, NAME=VALUE (e.g. burst=100, single_fires=20, "
            "throughput_window=10 in seconds); repeatable.",
            show_default=False,
        ),
    ] = None,
    keep: Annotated[
        Path | None,
        typer.Option(
            "--keep",
            help="Keep the suites' data (logs, spans, SQLite files) in this directory.",
        ),
    ] = None,
) -> None:
    """Run benchmark scenarios on private suites and print a Markdown table.

    Uses PostgreSQL and Redis when CRONWAVE_DATABASE_URL / CRONWAVE_REDIS_URL are set,
    else a SQLite file and an embedded redis-server per suite. Other CRONWAVE_*
    settings (e.g. CRONWAVE_DISPATCH_LEAD) reach the suites' processes. Exits 1 when
    a scenario failed; a missed target is reported in the table, not in the exit code.
    """
    with server_modules("cronwave bench"):
        from cronwave_bench.context import BenchContext, Sizes
        from cronwave_bench.harness import Backend
        from cronwave_bench.report import OK, markdown, write_json
        from cronwave_bench.runner import choose, header_lines, machine, run_scenarios

    with reported_errors():
        names = choose(scenarios or [])
        backend = Backend.from_env()
        sizes = Sizes().overridden(size or [])
    console = err()
    work_dir = keep.expanduser().resolve() if keep else Path(tempfile.mkdtemp(prefix="cw-bench-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    ctx = BenchContext(
        backend, work_dir, sizes, say=lambda line: console.print(line, soft_wrap=True)
    )
    facts = machine()
    console.print(f"cronwave bench: {', '.join(names)}")
    console.print(f"backend: {backend.describe()}", soft_wrap=True)
    try:
        results = run_scenarios(names, ctx)
    except KeyboardInterrupt:
        fail("interrupted; every process the bench started was stopped")
    finally:
        if keep is None:
            shutil.rmtree(work_dir, ignore_errors=True)
    sys.stdout.write(markdown(results, header_lines(ctx, facts)) + "\n")
    if json_path is not None:
        write_json(
            json_path,
            results,
            {"backend": backend.describe(), "database": backend.database, "machine": facts},
        )
        console.print(f"figures written to {json_path}")
    if any(r.status not in (OK, "not available") for r in results):
        raise typer.Exit(1)
