"""Where the CLI writes, and how a ``CronwaveError`` becomes a red line and exit 1."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from cronwave._client import Client
from cronwave_core.errors import CronwaveError, Unavailable
from cronwave_core.settings import NetworkSettings

UNAVAILABLE_HINT = (
    "is `cronwave up` running? The CLI connects to CRONWAVE_STORE_ADDR, "
    "CRONWAVE_DISPATCHER_ADDR, CRONWAVE_PLANNER_ADDR and CRONWAVE_LEADER_ADDR "
    "(default: the ports `cronwave up` listens on)."
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


@contextmanager
def connected() -> Iterator[Client]:
    """A client for the addresses in ``NetworkSettings.from_env()``, errors reported."""
    with reported_errors():
        settings = NetworkSettings.from_env()
        with Client.from_settings(settings) as client:
            yield client
