"""``billing``: one nightly billing run of 100,000 customers, timed from trigger to
durable completion, with its reconciliation against the payment gateway (duplicate and
missing charges must both be 0).

It drives the billing demo (``cronwave demo billing``) on a suite of its own, with the
payment gateway; where that demo is not part of this installation the scenario says
"not available" instead of measuring something else.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from contextlib import ExitStack
from datetime import timedelta
from typing import Any

from rich.console import Console

from cronwave_bench.context import BenchContext
from cronwave_bench.harness import SuiteOptions, own_database, suite_config
from cronwave_bench.report import NOT_AVAILABLE, Result
from cronwave_core.errors import ConfigurationError
from cronwave_core.suite import Suite

TARGET_SECONDS = 20.0
_JOB_DATABASES = {
    "CRONWAVE_BILLING_DATABASE_URL": "billing_job",
    "CRONWAVE_GATEWAY_DATABASE_URL": "billing_gateway",
}
_TIMEOUT = timedelta(minutes=4)


def billing_backend(env: Mapping[str, str]) -> str:
    url = env.get("CRONWAVE_BILLING_DATABASE_URL") or ""
    return "postgresql" if url.startswith("postgres") else "sqlite (embedded default)"


def run_billing(ctx: BenchContext) -> Result:
    result = Result("billing")
    try:
        from cronwave_bench.billing_demo import (
            require_billing_example,
            run_billing_demo,
            with_gateway,
        )

        require_billing_example()
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
        # On PostgreSQL the job's own data (customers, invoices, charges) and the
        # gateway's live there too, each in a database of its own, unless set.
        for var, label in _JOB_DATABASES.items():
            if backend.database == "postgresql" and not os.environ.get(var):
                own = stack.enter_context(own_database(ctx.backend, label))
                env[var] = own.database_url or ""
        options = SuiteOptions(tracing=False, env=env)
        config = with_gateway(suite_config(backend, ctx.suite_dir("billing"), options))
        suite = Suite(config)
        stack.callback(suite.stop)
        suite.start()
        outcome = run_billing_demo(
            suite, quiet, customers, None, _TIMEOUT, rpc_timeout=timedelta(seconds=30)
        )
    rec = outcome.reconciliation
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
        "billing_database": billing_backend(config.env),
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
