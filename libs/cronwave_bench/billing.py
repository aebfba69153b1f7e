"""``billing``: one nightly billing run of 100,000 customers, timed from trigger to
durable completion, with its reconciliation against the payment gateway (duplicate and
missing charges must both be 0).

It drives the billing demo (``cronwave demo billing``) on a suite of its own, with the
processes the demo needs: the demo is the package's that declares it, by the entry
point ``billing`` of the group ``cronwave.demos`` (``BillingDemo``). Where no
installed package declares it the scenario says "not available" instead of measuring
something else.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from contextlib import ExitStack
from datetime import timedelta
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from rich.console import Console

from cronwave import Run
from cronwave_bench.context import BenchContext
from cronwave_bench.harness import SuiteOptions, own_database, suite_config
from cronwave_bench.report import NOT_AVAILABLE, Result
from cronwave_core.errors import ConfigurationError
from cronwave_core.suite import Suite, SuiteConfig

#: Where a package declares a demo the bench drives, by the scenario's name.
DEMOS = "cronwave.demos"
TARGET_SECONDS = 20.0
_TIMEOUT = timedelta(minutes=4)


def database_backend(url: str) -> str:
    return "postgresql" if url.startswith("postgres") else "sqlite (embedded default)"


class Books(Protocol):
    """A billing period after the run: the job's database against the gateway's charges."""

    @property
    def customers(self) -> int: ...
    @property
    def invoices(self) -> int: ...
    @property
    def gateway_charges(self) -> int: ...
    @property
    def duplicates(self) -> int: ...
    @property
    def missing(self) -> int: ...


class Outcome(Protocol):
    """One demo run: its end, from trigger to completion, and its period's books."""

    @property
    def run(self) -> Run: ...
    @property
    def elapsed(self) -> float: ...
    @property
    def reconciliation(self) -> Books: ...


@runtime_checkable
class BillingDemo(Protocol):
    """What the entry point ``billing`` of the group ``DEMOS`` names: the suite the demo
    needs (its processes added to ``config``) and one run of ``customers`` on it,
    started and reconciled (a worker killed ``kill_after`` the trigger, if given)."""

    @property
    def databases(self) -> Mapping[str, str]:
        """The variables naming the databases its job and processes keep their data in,
        each with a label, the job's own first: on PostgreSQL each gets one of its own
        there (unless set), else they default to SQLite files in the data dir."""
        ...

    def suite_config(self, config: SuiteConfig) -> SuiteConfig: ...

    def run(
        self,
        suite: Suite,
        console: Console,
        customers: int,
        kill_after: timedelta | None,
        timeout: timedelta,
        rpc_timeout: timedelta,
    ) -> Outcome: ...


def billing_demo() -> BillingDemo:
    """The billing demo an installed package declares; ``ConfigurationError`` when none
    does, or when its entry point names something else."""
    for point in entry_points(group=DEMOS, name="billing"):
        demo = point.load()
        if not isinstance(demo, BillingDemo):
            raise ConfigurationError(
                f"entry point {point.name} = {point.value} of group {DEMOS} names a "
                f"{type(demo).__name__}, not a demo (databases, suite_config and run)"
            )
        return demo
    raise ConfigurationError(
        f"no installed package declares billing of the entry point group {DEMOS}"
    )


def run_billing(ctx: BenchContext) -> Result:
    result = Result("billing")
    try:
        demo = billing_demo()
    except (ImportError, ConfigurationError) as exc:
        result.status = NOT_AVAILABLE
        result.notes.append(f"the billing demo is not part of this installation ({exc})")
        return result
    customers = ctx.sizes.billing_customers
    ctx.say(f"billing: {customers:,} customers")
    quiet = Console(file=io.StringIO(), width=120)
    with ExitStack() as stack:
        backend = stack.enter_context(own_database(ctx.backend, "billing"))
        env = {}
        # On PostgreSQL the demo's own data (its job's, its processes') lives there too,
        # each in a database of its own, unless set.
        for var, label in demo.databases.items():
            if backend.database == "postgresql" and not os.environ.get(var):
                own = stack.enter_context(own_database(ctx.backend, label))
                env[var] = own.database_url or ""
        options = SuiteOptions(tracing=False, env=env)
        config = demo.suite_config(suite_config(backend, ctx.suite_dir("billing"), options))
        suite = Suite(config)
        stack.callback(suite.stop)
        suite.start()
        outcome = demo.run(
            suite, quiet, customers, None, _TIMEOUT, rpc_timeout=timedelta(seconds=30)
        )
    rec = outcome.reconciliation
    job_database = next(iter(demo.databases), "")
    body: Any = outcome.run.result.get("seconds") if isinstance(outcome.run.result, dict) else None
    result.figures = {
        "customers": rec.customers,
        "invoices": rec.invoices,
        "charges": rec.gateway_charges,
        "duplicate_charges": rec.duplicates,
        "missing_charges": rec.missing,
        "state": outcome.run.state,
        "trigger_to_completion_s": outcome.elapsed,
        "job_body_s": body,
        "billing_database": database_backend(config.env.get(job_database, "")),
    }
    result.row(
        "trigger to completion",
        f"{outcome.elapsed:.1f} s ({outcome.run.state})",
        f"<= {TARGET_SECONDS:.0f} s",
        outcome.elapsed <= TARGET_SECONDS and outcome.run.state == "SUCCEEDED",
    )
    if isinstance(body, int | float):
        result.row("job body", f"{body:.1f} s")
    result.row(
        "customers / invoices / charges",
        f"{rec.customers:,} / {rec.invoices:,} / {rec.gateway_charges:,}",
    )
    result.row("duplicate charges", str(rec.duplicates), "0", rec.duplicates == 0)
    result.row("missing charges", str(rec.missing), "0", rec.missing == 0)
    result.notes.append(f"the job's own database: {result.figures['billing_database']}")
    return result
