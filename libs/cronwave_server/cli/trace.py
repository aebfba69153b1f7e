"""``cronwave trace export RUN_ID``: one run's spans as a file Jaeger UI (or any OTLP
tool) can load.

``--format jaeger`` writes what Jaeger UI's "Upload JSON" accepts
(``{"data": [{"traceID", "spans": [...], "processes": {...}}]}``); ``--format otlp``
writes OTLP JSON (``{"resourceSpans": [...]}``). Every trace that holds a span of
the run is exported whole.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from cronwave.cli._console import reported_errors, server_modules
from cronwave_core.errors import InvalidArgument
from cronwave_server.cli.waterfall import SOURCE_HELP, resolve_source

app = typer.Typer(help="Export traces of runs.", no_args_is_help=True)


@app.command("export")
def export(
    run_id: Annotated[str, typer.Argument(help="The run's id (see `cronwave runs list`).")],
    fmt: Annotated[str, typer.Option("--format", help="jaeger or otlp.")] = "jaeger",
    output: Annotated[
        Path | None, typer.Option("--output", help="Write here (default: print it).")
    ] = None,
    source: Annotated[str, typer.Option("--source", help=SOURCE_HELP)] = "local",
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="For --source local (default: CRONWAVE_DATA_DIR)."),
    ] = None,
) -> None:
    """Write the run's trace as Jaeger JSON (Jaeger UI: Search, then Upload JSON) or OTLP JSON."""
    with reported_errors(), server_modules("cronwave trace export"):
        from cronwave_waterfall import trace_export_command
        from cronwave_waterfall.jaeger_query import JaegerQuery

        if not run_id.strip():
            raise InvalidArgument("run_id", "required")
        chosen = resolve_source(source, data_dir)
        service = chosen.service if isinstance(chosen, JaegerQuery) else None
        where = chosen.base_url if isinstance(chosen, JaegerQuery) else chosen
        text = trace_export_command(where, run_id=run_id, fmt=fmt, output=output, service=service)
    sys.stdout.write(text)
