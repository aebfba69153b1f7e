"""The billing demo's driver: nightly billing of many customers on a private suite with
its payment gateway, optionally killing the worker mid-run to show the run resume
from its checkpoint without charging anyone twice (``cronwave demo billing``, and the
bench's scenario ``billing`` through ``DEMO``).

The progress bars are drawn from the run's checkpoint as the store has it (what a
resumed attempt would start from), not from the worker's memory.
"""

from __future__ import annotations

import json
import signal
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from cronwave import Client, Run
from cronwave_billing.reconcile import Reconciliation, reconcile_suite
from cronwave_core.errors import CronwaveError
from cronwave_core.queueing import RunMessage, make_broker
from cronwave_core.rpc import open_channel
from cronwave_core.settings import RedisSettings
from cronwave_core.suite import Proc, Suite, SuiteConfig

JOB_TYPE = "billing.nightly"
#: The gateway, as this package declares it (entry point group cronwave.processes).
GATEWAY = "payment-gateway"
POLL = 0.2
#: Waited past the heartbeat timeout for cronwave to hand the dead worker's run to a
#: new attempt before the demo re-delivers the run's message itself.
REDELIVER_GRACE = timedelta(seconds=3)
REDELIVER_EVERY = timedelta(seconds=2)


class DemoFailed(CronwaveError):
    """The demo's run did not end as it must."""


@dataclass
class Recovery:
    """What the kill and the resumption looked like."""

    killed_at: float = 0.0  # seconds after the trigger
    killed_pid: int = 0
    killed_attempt: int = 0
    killed_checkpoint: str = ""
    claimed_at: float = 0.0  # a newer attempt holds the run, seconds after the trigger
    resumed_at: float = 0.0  # first progress of a newer attempt, seconds after the trigger
    resumed_attempt: int = 0
    redelivered: int = 0  # messages the demo re-delivered itself


@dataclass(frozen=True)
class Outcome:
    run: Run
    elapsed: float
    reconciliation: Reconciliation
    recovery: Recovery | None
    heartbeat_timeout: timedelta


def fresh_data_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="cronwave-billing-"))


def heartbeat_timeout(suite: Suite, timeout: timedelta) -> timedelta:
    """The billing job type's heartbeat timeout, as the worker registered it."""
    channel = open_channel(suite.store_addr, timeout, traced=False, tls=suite.tls())
    try:
        store = store_grpc.WorkflowStoreServiceStub(channel)
        for job_type in store.ListJobTypes(store_pb.ListJobTypesRequest()).job_types:
            if job_type.name == JOB_TYPE:
                return timedelta(seconds=job_type.heartbeat_timeout.ToTimedelta().total_seconds())
    finally:
        channel.close()
    raise DemoFailed(f"the worker did not register {JOB_TYPE}; see {suite.log_dir}")


def redeliver(suite: Suite, run: Run) -> None:
    """Put the run's message on its queue again, as the dispatcher did: a worker's claim
    then decides (a live attempt keeps the run; a lapsed one is superseded)."""
    broker = make_broker(RedisSettings.from_env(suite.base_env()))
    try:
        message = RunMessage(
            run_id=run.run_id,
            schedule_id=run.schedule_id,
            fire_time=run.fire_time,
            job_type=run.job_type,
            queue=run.queue or "default",
            attempt_hint=run.attempt,
            enqueued_at_ns=time.time_ns(),
        )
        broker.enqueue(message.to_message())
    finally:
        broker.close()


def _checkpoint(run: Run) -> dict[str, Any]:
    try:
        value = json.loads(run.checkpoint_json) if run.checkpoint_json else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _number(checkpoint: dict[str, Any], name: str) -> int:
    value = checkpoint.get(name, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class BillingWatch:
    """Polls the run, draws its progress, and does the kill when asked."""

    def __init__(
        self,
        suite: Suite,
        client: Client,
        console: Console,
        customers: int,
        kill_after: timedelta | None,
        hb_timeout: timedelta,
    ) -> None:
        self.suite = suite
        self.client = client
        self.console = console
        self.customers = customers
        self.kill_after = kill_after
        self.hb_timeout = hb_timeout
        self.recovery: Recovery | None = None
        self._last_redelivery = 0.0

    def follow(self, run_id: str, started: float, timeout: timedelta) -> Run:
        columns = (
            TextColumn("{task.description:<24}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=self.console) as progress:
            invoices = progress.add_task("invoices", total=self.customers)
            charges = progress.add_task("charges", total=self.customers)
            deadline = started + timeout.total_seconds()
            while True:
                run = self.client.get_run(run_id)
                self._draw(progress, invoices, charges, run)
                if run.terminal:
                    return run
                now = time.monotonic()
                if now > deadline:
                    raise DemoFailed(
                        f"run {run_id} is still {run.state} after "
                        f"{timeout.total_seconds():.0f}s; logs in {self.suite.log_dir}"
                    )
                self._maybe_kill(progress, run, now - started)
                self._watch_recovery(progress, run, now - started)
                time.sleep(POLL)

    def _draw(self, progress: Progress, invoices: TaskID, charges: TaskID, run: Run) -> None:
        checkpoint = _checkpoint(run)
        phase = checkpoint.get("phase", "")
        total = _number(checkpoint, "customers") or self.customers
        invoiced = (
            min(_number(checkpoint, "last_customer_id"), total)
            if phase == "invoices"
            else _number(checkpoint, "invoices")
        )
        attempt = f"attempt {run.attempt}" if run.attempt else run.state.lower()
        progress.update(
            invoices, total=total, completed=invoiced, description=f"invoices  ({attempt})"
        )
        progress.update(
            charges,
            total=_number(checkpoint, "invoices") or total,
            completed=_number(checkpoint, "charged"),
            description=f"charges   ({attempt})",
        )

    def _maybe_kill(self, progress: Progress, run: Run, at: float) -> None:
        if self.kill_after is None or self.recovery is not None:
            return
        if at < self.kill_after.total_seconds():
            return
        if run.state != "RUNNING":
            return  # not started yet: kill once it runs
        worker = holder(self.suite, run)
        if worker.popen is None or not worker.alive():
            raise DemoFailed(f"the worker running the job has exited; see {worker.log_path}")
        worker.popen.send_signal(signal.SIGKILL)
        worker.popen.wait(timeout=10)
        self.recovery = Recovery(
            killed_at=at,
            killed_pid=worker.pid,
            killed_attempt=run.attempt,
            killed_checkpoint=run.checkpoint_json,
        )
        progress.console.print(
            f"[bold red]kill -9[/] {worker.name} (pid {worker.pid}) at {at:.1f}s, attempt "
            f"{run.attempt} at checkpoint {run.checkpoint_json or '{}'}; its heartbeat lapses "
            f"after {self.hb_timeout.total_seconds():g}s, then another worker resumes the run"
        )

    def _watch_recovery(self, progress: Progress, run: Run, at: float) -> None:
        recovery = self.recovery
        if recovery is None or recovery.resumed_at:
            return
        if run.attempt > recovery.killed_attempt and not recovery.claimed_at:
            recovery.claimed_at = at
        if run.attempt > recovery.killed_attempt and run.checkpoint_json != (
            recovery.killed_checkpoint
        ):
            recovery.resumed_at = at
            recovery.resumed_attempt = run.attempt
            progress.console.print(
                f"[green]attempt {run.attempt} resumed[/] from the checkpoint: it held the run "
                f"{recovery.claimed_at - recovery.killed_at:.1f}s and reported progress "
                f"{at - recovery.killed_at:.1f}s after the kill"
            )
            return
        lapsed_for = at - recovery.killed_at - self.hb_timeout.total_seconds()
        if run.attempt == recovery.killed_attempt and lapsed_for > (
            REDELIVER_GRACE.total_seconds()
        ):
            if time.monotonic() - self._last_redelivery < REDELIVER_EVERY.total_seconds():
                return
            self._last_redelivery = time.monotonic()
            recovery.redelivered += 1
            redeliver(self.suite, run)
            if recovery.redelivered == 1:
                progress.console.print(
                    "no new attempt yet: the demo re-delivers the run's message to its queue "
                    f"({run.queue or 'default'}); the new worker's claim supersedes the dead "
                    "attempt"
                )


def worker_procs(suite: Suite) -> list[Proc]:
    """The suite's live worker processes."""
    return [p for p in suite.procs.values() if p.argv[-1:] == ["worker"] and p.alive()]


def holder(suite: Suite, run: Run) -> Proc:
    """The worker process that runs ``run``'s current attempt."""
    workers = worker_procs(suite)
    for proc in workers:
        if run.worker_id in (proc.env.get("CRONWAVE_WORKER_ID"), f"worker-{proc.pid}"):
            return proc
    raise DemoFailed(
        f"no live worker of this suite is {run.worker_id!r}, which runs {run.run_id}; "
        f"see {suite.log_dir}"
    )


def ensure_standby(suite: Suite, console: Console) -> None:
    """A second worker on the first one's queues, to take over the killed one's run,
    as the other replicas of a pool do in production."""
    workers = worker_procs(suite)
    if len(workers) >= 2 or not workers:
        return
    first = workers[0]
    queues = first.env.get("CRONWAVE_WORKER_QUEUES")
    index = 1
    while suite.proc_name("worker", index) in suite.procs:
        index += 1
    standby = suite.start_service(
        "worker", index=index, extra_env={"CRONWAVE_WORKER_QUEUES": queues} if queues else None
    )
    console.print(f"started a second worker, {standby.name} (pid {standby.pid}), to take over")


def run_billing_demo(
    suite: Suite,
    console: Console,
    customers: int,
    kill_after: timedelta | None,
    timeout: timedelta,
    rpc_timeout: timedelta,
) -> Outcome:
    """Schedule, trigger and follow one billing run on the started ``suite``, then
    reconcile its period against the gateway."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    period = f"demo-{stamp}"
    with Client(
        store_addr=suite.store_addr,
        dispatcher_addr=suite.dispatcher_addr,
        planner_addr=suite.planner_addr,
        leader_addr=suite.leader_addr,
        timeout=rpc_timeout,
        tls=suite.tls(),
    ) as client:
        schedule = client.create_schedule(
            f"billing-demo-{stamp}",
            cron="0 2 * * *",
            time_zone="UTC",
            job_type=JOB_TYPE,
            payload={"customers": customers, "period": period},
        )
        hb_timeout = heartbeat_timeout(suite, rpc_timeout)
        console.print(
            f"schedule [bold]{schedule.schedule_id}[/]: {JOB_TYPE} for {customers:,} customers, "
            f"period {period}; heartbeat timeout {hb_timeout.total_seconds():g}s"
        )
        if kill_after is not None:
            ensure_standby(suite, console)
        watch = BillingWatch(suite, client, console, customers, kill_after, hb_timeout)
        started = time.monotonic()
        run = client.trigger(schedule.schedule_id)
        console.print(f"triggered run [bold]{run.run_id}[/]")
        run = watch.follow(run.run_id, started, timeout)
        elapsed = time.monotonic() - started
    channel = open_channel(suite.address(GATEWAY), rpc_timeout, traced=False, tls=suite.tls())
    try:
        reconciliation = reconcile_suite(suite.base_env(), channel, period, rpc_timeout * 6)
    finally:
        channel.close()
    return Outcome(run, elapsed, reconciliation, watch.recovery, hb_timeout)


def outcome_table(outcome: Outcome) -> Table:
    r = outcome.reconciliation
    table = Table(title=f"billing period {r.period}", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_column()

    def verdict(value: int) -> str:
        return "[green]ok[/]" if value == 0 else "[bold red]MUST BE 0[/]"

    table.add_row("run", outcome.run.state, f"attempt {outcome.run.attempt}")
    table.add_row("customers", f"{r.customers:,}", "")
    table.add_row("invoices", f"{r.invoices:,}", "")
    table.add_row("charges", f"{r.gateway_charges:,}", "at the payment gateway")
    table.add_row("duplicate charges", f"{r.duplicates:,}", verdict(r.duplicates))
    table.add_row("missing charges", f"{r.missing:,}", verdict(r.missing))
    table.add_row("unrecorded charges", f"{r.unrecorded:,}", verdict(r.unrecorded))
    table.add_row("elapsed", f"{outcome.elapsed:.1f}s", "trigger to completion")
    result = outcome.run.result
    if isinstance(result, dict) and "seconds" in result:
        table.add_row("job body", f"{result['seconds']:.1f}s", "the last attempt")
    recovery = outcome.recovery
    if recovery is not None:
        if recovery.resumed_at:
            how = (
                f"after {recovery.redelivered} re-delivery by the demo"
                if recovery.redelivered
                else "re-dispatched by cronwave"
            )
            table.add_row(
                "kill -9 to new attempt",
                f"{recovery.claimed_at - recovery.killed_at:.1f}s",
                f"heartbeat timeout {outcome.heartbeat_timeout.total_seconds():g}s; {how}",
            )
            table.add_row(
                "kill -9 to resumed",
                f"{recovery.resumed_at - recovery.killed_at:.1f}s",
                "the new attempt's first checkpoint reached the store",
            )
        else:
            table.add_row("kill -9 to resumed", "-", "no later attempt made progress")
    return table


def with_gateway(config: SuiteConfig) -> SuiteConfig:
    """``config`` with the payment gateway on, at the suite's own address."""
    return config.with_processes([GATEWAY])


class BenchDemo:
    """The demo as the bench's scenario ``billing`` drives it, through this package's
    entry point ``billing`` of the group ``cronwave.demos``: the suite it needs, and
    one run on that suite, reconciled."""

    #: The job's own database and the gateway's (``cronwave_billing.settings``).
    databases: Mapping[str, str] = MappingProxyType(
        {
            "CRONWAVE_BILLING_DATABASE_URL": "billing_job",
            "CRONWAVE_GATEWAY_DATABASE_URL": "billing_gateway",
        }
    )

    def suite_config(self, config: SuiteConfig) -> SuiteConfig:
        return with_gateway(config)

    def run(
        self,
        suite: Suite,
        console: Console,
        customers: int,
        kill_after: timedelta | None,
        timeout: timedelta,
        rpc_timeout: timedelta,
    ) -> Outcome:
        return run_billing_demo(suite, console, customers, kill_after, timeout, rpc_timeout)


DEMO = BenchDemo()
