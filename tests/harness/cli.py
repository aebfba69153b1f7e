"""Running the ``cronwave`` CLI as a process of its own, as a user's shell would, and
finding ports for a ``cronwave up`` beside the other tests."""

from __future__ import annotations

import os
import random
import sys

from cronwave_core.suite import OWN_PORTS_VAR, own_port_range
from cronwave_server.cli.suite_cmds import PORT_ORDER, port_in_use

#: ``python -c CLI ARGS...`` runs the CLI of this checkout (no console script needed).
CLI = "import sys; from cronwave.cli.main import app; sys.argv[0] = 'cronwave'; app()"


def cronwave_argv() -> list[str]:
    """The argv prefix of a ``cronwave`` process: append its arguments."""
    return [sys.executable, "-c", CLI]


def free_port_base(count: int = len(PORT_ORDER) + 1, tries: int = 50) -> int:
    """A port N with N..N+count-1 free now, in the suite's own range as its other ports
    are (``cronwave_core.suite.own_port_range``: below the kernel's ephemeral range,
    where a connection to a port nobody listens on yet can be joined to itself, and a
    health check then reads its own request back)."""
    rng = random.Random()
    lowest, highest = own_port_range()
    for _ in range(tries):
        base = rng.randrange(lowest, max(highest - count, lowest + 1))
        if not any(port_in_use(base + i) for i in range(count)):
            return base
    raise AssertionError(f"no {count} free ports in a row after {tries} tries")


def user_env() -> dict[str, str]:
    """This process's environment without its CRONWAVE_ settings, as a user's shell has
    it, but with this test process's own port range (``CRONWAVE_OWN_PORTS``): what a
    ``cronwave`` process started with it picks stays out of other tests' ports."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWAVE_")}
    if os.environ.get(OWN_PORTS_VAR):
        env[OWN_PORTS_VAR] = os.environ[OWN_PORTS_VAR]
    return env
