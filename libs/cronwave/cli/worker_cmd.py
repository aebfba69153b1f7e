"""``cronwave worker --jobs MODULE,...``: one worker process in the foreground, with
the job types of the modules named, joining the suite its ``CRONWAVE_*_ADDR`` (or the
fixed ports of ``cronwave up``) point to."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from cronwave.cli._console import SERVICE_MODULES, err, reported_errors, server_modules
from cronwave.cli._jobs_option import HELP, with_job_modules

app = typer.Typer()

WORKER_ADDR_VAR = "CRONWAVE_WORKER_ADDR"


@app.command()
def worker(
    jobs: Annotated[str | None, typer.Option("--jobs", help=HELP)] = None,
    queues: Annotated[
        str | None,
        typer.Option("--queues", help="Queues it consumes (default: CRONWAVE_WORKER_QUEUES)."),
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
    from cronwave.cli.suite_cmds import port_in_use
    from cronwave_core.settings import DEFAULT_PORTS, check_env

    with reported_errors():
        env = with_job_modules(os.environ, jobs)
        if queues is not None:
            env["CRONWAVE_WORKER_QUEUES"] = queues
        # It presents the worker's certificate of the TLS dir, unless told otherwise.
        env.setdefault("CRONWAVE_TLS_IDENTITY", "worker")
        check_env(env)  # a malformed variable stops here, named
        if not env.get(WORKER_ADDR_VAR):
            port = DEFAULT_PORTS["worker"]
            if port_in_use(port):
                port = free_port()
                err().print(f"port {DEFAULT_PORTS['worker']} is taken; status on {port}")
            env[WORKER_ADDR_VAR] = f"127.0.0.1:{port}"
    sys.stdout.flush()
    sys.stderr.flush()
    # -P: the working directory must not shadow a module of ours (PYTHONPATH counts).
    argv = [sys.executable, "-P", "-m", "worker"]
    os.execve(sys.executable, argv, env)
