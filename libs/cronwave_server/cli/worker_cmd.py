"""``cronwave worker --jobs MODULE,...``: one worker process in the foreground, with
the job types of the modules named, joining a running suite: the one its
``CRONWAVE_STORE_ADDR`` and ``CRONWAVE_REDIS_URL`` name, else the one recorded in the
data dir (``--data-dir``, else ``CRONWAVE_DATA_DIR``, else the per-user default; see
``cronwave._suite_find``), whose record gives the store, the Redis, the certificates
and the namespace."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer

from cronwave import _suite_find
from cronwave.cli._console import (
    SERVICE_MODULES,
    chosen_data_dir,
    err,
    reported_errors,
    server_modules,
)
from cronwave_core.errors import ConfigurationError
from cronwave_server.cli._jobs_option import HELP, with_job_modules

app = typer.Typer()

WORKER_ADDR_VAR = "CRONWAVE_WORKER_ADDR"


def joining_line(env: Mapping[str, str], found: _suite_find.Found | None) -> str:
    """What the worker joins, as it may be shown: the Redis URL without its password."""
    from cronwave_server.cli.suite_cmds import mask

    store = env.get(_suite_find.variable("store"), "?")
    redis = mask(env.get(_suite_find.variable("redis"), "?"))
    suite = f"the suite of {found.data_dir} (pid {found.record.pid})" if found else "a suite"
    return f"joining {suite}: store {store}, redis {redis}"


@app.command()
def worker(
    jobs: Annotated[str | None, typer.Option("--jobs", help=HELP)] = None,
    queues: Annotated[
        str | None,
        typer.Option("--queues", help="Queues it consumes (default: CRONWAVE_WORKER_QUEUES)."),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Join the suite `cronwave up` runs in this data dir (default: "
            "CRONWAVE_DATA_DIR, else $XDG_STATE_HOME/cronwave or ~/.local/state/cronwave; "
            "not read when CRONWAVE_STORE_ADDR and CRONWAVE_REDIS_URL are both set).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run a worker until Ctrl-C (or SIGTERM), with its built-in job types, those of
    --jobs and CRONWAVE_JOB_MODULES, and those of installed packages' entry points.

    The process becomes the worker (its exit code is the worker's): a job module that
    cannot be imported stops it at start-up, naming the module and the error. Its
    status port is CRONWAVE_WORKER_ADDR, else the fixed one when free, else a free
    one (beside a `cronwave up`, whose worker holds the fixed one)."""
    with server_modules("cronwave worker", SERVICE_MODULES):
        from cronwave_core.suite import free_port
    from cronwave_core.settings import DEFAULT_PORTS, check_env
    from cronwave_server.cli.suite_cmds import port_in_use

    with reported_errors():
        env = with_job_modules(os.environ, jobs)
        if queues is not None:
            env["CRONWAVE_WORKER_QUEUES"] = queues
        # It presents the worker's certificate of the TLS dir, unless told otherwise.
        env.setdefault("CRONWAVE_TLS_IDENTITY", "worker")
        found = _suite_find.find(env, data_dir or chosen_data_dir(), _suite_find.WORKER)
        if found is not None:
            # The Redis password: its variable's, else the embedded Redis's from its file.
            unknown = found.redis_password_error()
            if unknown is not None and not env.get(_suite_find.variable("redis")):
                raise ConfigurationError(unknown)
            # The suite's settings under those given; not its own worker's status port.
            env = found.under(env, leave=[WORKER_ADDR_VAR])
        check_env(env)  # a malformed variable stops here, named
        if not env.get(WORKER_ADDR_VAR):
            port = DEFAULT_PORTS["worker"]
            if port_in_use(port):
                port = free_port()
                err().print(f"port {DEFAULT_PORTS['worker']} is taken; status on {port}")
            env[WORKER_ADDR_VAR] = f"127.0.0.1:{port}"
        err().print(joining_line(env, found), soft_wrap=True, markup=False)
    sys.stdout.flush()
    sys.stderr.flush()
    # -P: the working directory must not shadow a module of ours (PYTHONPATH counts).
    argv = [sys.executable, "-P", "-m", "worker"]
    os.execve(sys.executable, argv, env)
