"""``cronwave waterfall``: where the time of many runs goes, hop by hop and kind by kind.

Spans come from ``--source``: ``local`` (the span files under the data dir, which
every service of a suite writes to unless OTLP export is on; works offline right
after ``make demo``), ``jaeger-file:PATH`` / ``otlp-file:PATH`` (a file in Jaeger's or
OTLP's JSON), or ``jaeger:URL`` (a Jaeger query service). The analysis is
``cronwave_waterfall``'s; this module picks the source, the runs and the format, and
says which runs could not have every hop (a manual trigger has no planner, so no
``plan`` or ``leader`` hop).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cronwave.cli._console import out, reported_errors, server_modules
from cronwave_core.errors import InvalidArgument

if TYPE_CHECKING:
    from cronwave_waterfall import Run
    from cronwave_waterfall.sources import Source

app = typer.Typer()

FORMATS = ("text", "json", "html")
SOURCE_HELP = (
    "local (span files under the data dir), jaeger-file:PATH, otlp-file:PATH or jaeger:URL "
    "(a Jaeger query service, e.g. jaeger:http://localhost:16686)."
)
PLANNED_HOPS = ("plan", "leader")


def resolve_source(raw: str, data_dir: Path | None, service: str | None = None) -> Source:
    """What ``load_spans`` reads for a ``--source`` value (see the module docstring)."""
    from cronwave_core.settings import ProcessSettings
    from cronwave_waterfall.jaeger_query import JaegerQuery

    text = raw.strip()
    if text in ("", "local"):
        return data_dir if data_dir is not None else ProcessSettings.from_env().data_dir
    kind, sep, rest = text.partition(":")
    if sep and kind in ("jaeger-file", "otlp-file"):
        path = Path(rest).expanduser()
        if not path.is_file():
            raise InvalidArgument("source", f"{path} is not a file")
        return path
    if sep and kind == "jaeger" and rest.startswith(("http://", "https://")):
        return JaegerQuery.from_url(rest, service=service)
    if text.startswith(("http://", "https://")) or Path(text).expanduser().exists():
        return text  # a URL or a path said plainly
    raise InvalidArgument("source", f"expected {SOURCE_HELP} Got {raw!r}")


def trigger_of(run: Run) -> str:
    """Why the run exists, as its spans say (``scheduled``, ``manual``...; ``""``)."""
    from cronwave_waterfall.runs import trigger_of as of

    return of(run)


def coverage_note(runs: Sequence[Run]) -> str:
    """One line on runs that cannot have every hop, or ``""`` when all can."""
    triggers = Counter(trigger_of(r) for r in runs)
    manual = triggers.get("manual", 0)
    if not manual:
        return ""
    planned = len(runs) - manual
    if planned == 0:
        return (
            f"note: all {manual} runs were manual triggers, which no planner fires: they have "
            "no plan or leader hop (a scheduled run has all seven)"
        )
    others = "the other run" if planned == 1 else f"the {planned} other runs"
    return (
        f"note: {manual} of {len(runs)} runs were manual triggers (no planner): the plan and "
        f"leader rows count {others} only"
    )


@app.command("waterfall")
def waterfall_cmd(
    last: Annotated[
        int | None, typer.Option("--last", min=1, help="Only the N most recent runs.")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Runs fired at or after (ISO-8601, with zone).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Runs fired before (ISO-8601, with zone).")
    ] = None,
    schedule: Annotated[
        str | None, typer.Option("--schedule", help="Only runs of this schedule.")
    ] = None,
    job_type: Annotated[
        str | None, typer.Option("--job-type", help="Only runs of this job type.")
    ] = None,
    scenario: Annotated[
        str | None,
        typer.Option("--scenario", help="Runs whose look-ups were answered: local|redis|miss."),
    ] = None,
    compare: Annotated[bool, typer.Option("--compare", help="The scenarios side by side.")] = False,
    fmt: Annotated[str, typer.Option("--format", help="text, json or html.")] = "text",
    output: Annotated[
        Path | None, typer.Option("--output", help="Write here instead of printing.")
    ] = None,
    source: Annotated[str, typer.Option("--source", help=SOURCE_HELP)] = "local",
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="For --source local (default: CRONWAVE_DATA_DIR, else "
            "$XDG_STATE_HOME/cronwave or ~/.local/state/cronwave).",
        ),
    ] = None,
    service: Annotated[
        str | None, typer.Option("--service", help="For --source jaeger:URL: the service searched.")
    ] = None,
    trigger: Annotated[
        str | None,
        typer.Option(
            "--trigger",
            help="Only runs of this trigger: scheduled|manual|backfill|catchup. Without it, "
            "every run but backfill and catch-up runs, which fire late on purpose and are "
            "their own population (the output says how many it left out).",
        ),
    ] = None,
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            help="One run's critical path instead, hop by hop: each step's time and kinds.",
        ),
    ] = None,
) -> None:
    """Where the time of runs goes: per hop and kind, and the p99 tail's source.

    For each hop and each kind of time inside it: p50/p90/p99/p99.9, mean and count over
    the runs chosen; end-to-end (fire -> completion) and fire lateness (job start -
    fire); first, the one line that says where the p99 tail comes from. Backfill and
    catch-up runs are left out unless --trigger names them. With --run, one run's
    critical path: the chain of spans its completion waited on, hop by hop."""
    with reported_errors(), server_modules("cronwave waterfall"):
        from cronwave_waterfall import Waterfall, render_html, render_json, render_terminal
        from cronwave_waterfall.command import (
            deliver,
            find_run,
            refuse_with_run,
            render_path,
            select_waterfall,
        )

        if fmt not in FORMATS:
            raise InvalidArgument("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
        if run is not None:
            refuse_with_run(
                last=last,
                schedule_id=schedule,
                job_type=job_type,
                scenario=scenario,
                trigger=trigger,
                compare=compare,
            )
            found = find_run(
                resolve_source(source, data_dir, service),
                run,
                since=since,
                until=until,
                service=service,
            )
            tty = output is None and sys.stdout.isatty()
            width = out().width if tty else 120
            text = render_path(found, fmt, width=width, color=tty)
            if output is not None:
                what = f"{fmt} critical path of run {found.run_id}"
                typer.echo(deliver(text, output, what), nl=False)
                return
            sys.stdout.write(text)
            return
        result, chosen = select_waterfall(
            resolve_source(source, data_dir, service),
            last=last,
            since=since,
            until=until,
            schedule_id=schedule,
            job_type=job_type,
            scenario=scenario,
            compare=compare,
            service=service,
            trigger=trigger,
        )
        note = coverage_note(chosen)
        if fmt == "json":
            text = render_json(result)
        elif fmt == "html":
            text = render_html(result)
        else:
            console = out()
            width = console.width if sys.stdout.isatty() else 120
            color = output is None and sys.stdout.isatty()
            text = render_terminal(result, width=width, color=color)
            if note:
                text = text.rstrip("\n") + "\n" + note + "\n"
        if output is not None:
            typer.echo(deliver(text, output, f"{fmt} waterfall of {len(chosen)} runs"), nl=False)
            if note:
                typer.echo(note)
            for w in [result] if isinstance(result, Waterfall) else result:
                if w.set_aside:
                    typer.echo("note: " + w.set_aside_note())
                    break
            return
        sys.stdout.write(text)
