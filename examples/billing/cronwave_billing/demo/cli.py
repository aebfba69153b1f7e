"""``cronwave demo``: nightly billing end to end on a private suite, then stop it;
``cronwave demo billing``: the same job at scale, with a kill -9 in the middle if asked.

They join the ``cronwave`` app through this package's entry point ``billing`` of the
group ``cronwave.cli`` (``register``). Imported on every ``cronwave`` call, so this
module imports only what the options need: the suite and the driver are imported
inside the commands."""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from cronwave import Client, Run, RunEvent, Schedule, WaitTimeout
from cronwave.cli import _render
from cronwave.cli._console import (
    SERVICE_MODULES,
    CliClient,
    chosen_data_dir,
    fail,
    out,
    reported_errors,
    server_modules,
)
from cronwave_core.errors import NotFound
from cronwave_server.cli.suite_cmds import running, suite_config, suite_facts, suite_table

SCHEDULE_ID = "nightly-billing"
JOB_TYPE = "billing.nightly"
CRON = "0 2 * * *"
#: Billing's slots must succeed: the critical alert pages for a schedule so labelled.
LABELS = {"critical": "true"}
WAIT = timedelta(seconds=120)
# A manual trigger has no planner, so no plan or leader hop: one no-op fire by the
# planner, a few seconds out, gives the waterfall every hop of a scheduled run.
TICK_ID = "demo-scheduled-tick"
TICK_JOB = "cronwave.noop"
TICK_LEAD = timedelta(seconds=2)

app = typer.Typer()
group = typer.Typer(
    name="demo",
    invoke_without_command=True,
    help="Nightly billing end to end on a private suite (see also: demo billing).",
)
app.add_typer(group)


def register(cronwave_app: typer.Typer) -> None:
    """Add ``demo`` and ``demo billing`` to the ``cronwave`` app."""
    cronwave_app.add_typer(app)


def ensure_schedule(client: Client, console: Console, zone: str, customers: int) -> Schedule:
    """The demo's schedule: the one a previous demo in this data dir left, else a new one."""
    try:
        schedule = client.get_schedule(SCHEDULE_ID)
    except NotFound:
        schedule = client.create_schedule(
            SCHEDULE_ID,
            cron=CRON,
            time_zone=zone,
            job_type=JOB_TYPE,
            payload={"customers": customers},
            labels=LABELS,
        )
        console.print(
            f"created schedule [bold]{SCHEDULE_ID}[/]: '{CRON}' in {zone}, job {JOB_TYPE}, "
            f"payload {schedule.payload_json}"
        )
        return schedule
    console.print(
        f"reusing schedule [bold]{SCHEDULE_ID}[/] from an earlier demo in this data dir: "
        f"'{', '.join(schedule.cron)}' in {schedule.time_zone}, payload {schedule.payload_json}"
    )
    return schedule


def run_demo(client: Client, console: Console, zone: str, customers: int) -> Run:
    schedule = ensure_schedule(client, console, zone, customers)
    fires = client.preview(schedule, count=5)
    console.print(_render.fires_table(fires, schedule.time_zone))
    run = client.trigger(schedule.schedule_id)
    console.print(
        f"triggered run [bold]{run.run_id}[/] now (fire time {_render.fmt_time(run.fire_time)})"
    )
    with console.status(f"waiting up to {WAIT.total_seconds():.0f}s for the run ..."):
        run = client.wait_run(run.run_id, timeout=WAIT)
    events: list[RunEvent] = client.run_events(run.run_id)
    console.print(_render.run_fields(run))
    console.print(_render.events_table(events))
    return run


def scheduled_tick(client: Client, console: Console) -> Run:
    """One fire of a one-off no-op schedule by the planner; the schedule is deleted
    afterwards. Its run crosses all seven hops (plan and leader included)."""
    with contextlib.suppress(NotFound):
        client.delete_schedule(TICK_ID, force=True)  # left by an interrupted demo
    at = datetime.now(UTC) + TICK_LEAD
    client.create_schedule(TICK_ID, job_type=TICK_JOB, one_off=[at])
    try:
        with console.status(f"waiting for the planner to fire {TICK_ID} at {at:%H:%M:%S} ..."):
            deadline = time.monotonic() + WAIT.total_seconds()
            runs = client.list_runs(TICK_ID, limit=1)
            while not runs and time.monotonic() < deadline:
                time.sleep(0.1)
                runs = client.list_runs(TICK_ID, limit=1)
            if not runs:
                fail(f"the planner did not fire {TICK_ID} within {WAIT.total_seconds():g}s")
            run = client.wait_run(runs[0].run_id, timeout=WAIT)
    finally:
        client.delete_schedule(TICK_ID, force=True)
    console.print(
        f"the planner fired [bold]{TICK_ID}[/] ({TICK_JOB}) once: run {run.run_id} {run.state}"
    )
    return run


@group.callback()
def demo(
    ctx: typer.Context,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Kept afterwards: database, logs, spans (default: CRONWAVE_DATA_DIR, else "
            "$XDG_STATE_HOME/cronwave or ~/.local/state/cronwave, as for `cronwave up`).",
            show_default=False,
        ),
    ] = None,
    customers: Annotated[
        int, typer.Option("--customers", min=1, help="Customers the billing job bills.")
    ] = 200,
    zone: Annotated[
        str, typer.Option("--zone", help="IANA zone of the schedule's 02:00.")
    ] = "Europe/Berlin",
) -> None:
    """Nightly billing end to end on a private suite; exits 0 only if the run SUCCEEDED.

    Starts the suite on free ports (it never collides with `cronwave up`), schedules
    nightly-billing at 02:00 in --zone (or reuses the one an earlier demo left in the
    data dir), triggers it now, waits for it, shows the run and its events, and
    stops every process it started."""
    if ctx.invoked_subcommand is not None:
        return
    with server_modules("cronwave demo", SERVICE_MODULES):
        from cronwave_billing.demo import driver
        from cronwave_core.domain import calendar
        from cronwave_core.settings import NetworkSettings, ProcessSettings
        from cronwave_core.settings_base import user_data_dir
        from cronwave_core.suite import Suite
    console = out()
    with reported_errors():
        calendar.zone(zone, "--zone")  # a typo fails before anything starts
        settings = NetworkSettings.from_env()
        # The data dir `cronwave up` would use, so that the commands it prints reach
        # this data from any folder.
        data_dir = data_dir or chosen_data_dir() or ProcessSettings.from_env().data_dir
        config = driver.with_gateway(suite_config(data_dir, ports={}))
        suite = Suite(replace(config, console=True))
        console.print(f"starting a private cronwave suite in {suite.config.data_dir} ...")
        try:
            with running(suite):
                console.print(suite_table(suite))
                console.print(suite_facts(suite))
                with CliClient(
                    store_addr=suite.store_addr,
                    dispatcher_addr=suite.dispatcher_addr,
                    planner_addr=suite.planner_addr,
                    leader_addr=suite.leader_addr,
                    timeout=settings.rpc_timeout,
                    tls=suite.tls(),
                ) as client:
                    run = run_demo(client, console, zone, customers)
                    scheduled_tick(client, console)
        except KeyboardInterrupt:
            fail("interrupted; every process the demo started was stopped")
        except WaitTimeout as exc:
            fail(exc.message, f"the services' logs are in {suite.log_dir}")
    default = suite.config.data_dir == user_data_dir(os.environ).resolve()
    flag = "" if default else f" --data-dir {suite.config.data_dir}"
    console.print(
        f"suite stopped; data kept in {suite.config.data_dir} "
        f"(`cronwave up{flag}` then `cronwave{flag} runs show {run.run_id}` "
        "shows this run again, from any folder)",
        soft_wrap=True,
    )
    if run.state != "SUCCEEDED":
        fail(
            f"the run ended {run.state}" + (f": {run.error}" if run.error else ""),
            f"the services' logs are in {suite.log_dir}",
        )
    console.print("[green]demo run SUCCEEDED[/]")
    console.print(f"`cronwave waterfall{flag}` shows where the time of these runs went")


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m)?")


def parse_duration(text: str) -> timedelta:
    """``5s``, ``1.5``, ``500ms`` or ``2m`` as a duration (bare numbers are seconds)."""
    match = _DURATION.fullmatch(text.strip())
    if not match:
        raise typer.BadParameter(f"expected a duration such as 5s, 500ms or 2m, got {text!r}")
    value, unit = float(match.group(1)), match.group(2) or "s"
    return timedelta(seconds=value * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit])


@group.command("billing")
def billing(
    customers: Annotated[
        int,
        typer.Option("--customers", min=1, max=10_000_000, help="Customers to seed and bill."),
    ] = 100_000,
    kill_worker_after: Annotated[
        str | None,
        typer.Option(
            "--kill-worker-after",
            help="kill -9 the worker this long after the trigger (e.g. 5s), start a new one, "
            "and show the run resume from its checkpoint.",
        ),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Default: a fresh directory under the system temp dir."),
    ] = None,
    timeout: Annotated[
        str, typer.Option("--timeout", help="Give up on the run after this long.")
    ] = "10m",
) -> None:
    """Billing at scale through the payment gateway; optionally kill -9 the worker mid-run.

    Starts a private suite and the sandbox payment gateway on free ports, bills
    --customers customers with a progress bar drawn from the run's checkpoint, then
    reconciles the period: customers, invoices, charges at the gateway, duplicate and
    missing charges (both must be 0, else the exit status is 1) and the elapsed time.

    The databases are SQLite files in the data dir unless CRONWAVE_DATABASE_URL,
    CRONWAVE_BILLING_DATABASE_URL and CRONWAVE_GATEWAY_DATABASE_URL name others."""
    with server_modules("cronwave demo billing", SERVICE_MODULES):
        from cronwave_billing.demo import driver
        from cronwave_core.settings import NetworkSettings
        from cronwave_core.suite import Suite
    kill_after = parse_duration(kill_worker_after) if kill_worker_after else None
    limit = parse_duration(timeout)
    console = out()
    with reported_errors():
        settings = NetworkSettings.from_env()
        directory = data_dir or driver.fresh_data_dir()
        suite = Suite(driver.with_gateway(suite_config(directory, ports={})))
        console.print(f"starting a private cronwave suite and payment gateway in {directory} ...")
        try:
            with running(suite):
                console.print(suite_table(suite))
                outcome = driver.run_billing_demo(
                    suite, console, customers, kill_after, limit, settings.rpc_timeout
                )
        except KeyboardInterrupt:
            fail("interrupted; every process the demo started was stopped")
    console.print(driver.outcome_table(outcome))
    console.print(f"suite stopped; data and logs kept in {directory}", soft_wrap=True)
    if outcome.run.state != "SUCCEEDED":
        fail(
            f"the run ended {outcome.run.state}"
            + (f": {outcome.run.error}" if outcome.run.error else ""),
            f"the services' logs are in {suite.log_dir}",
        )
    if not outcome.reconciliation.ok:
        fail("the gateway's charges do not match the invoices: see the table above")
    console.print("[green]billed every invoice exactly once[/]")
