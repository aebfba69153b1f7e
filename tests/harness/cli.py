"""Running the ``cronwave`` CLI as a process of its own, as a user's shell would, and
finding ports for a ``cronwave up`` beside the other tests."""

from __future__ import annotations

import random
import sys

from cronwave.cli.suite_cmds import PORT_ORDER, port_in_use
from cronwave_core.suite import ephemeral_low

#: ``python -c CLI ARGS...`` runs the CLI of this checkout (no console script needed).
CLI = "import sys; from cronwave.cli.main import app; sys.argv[0] = 'cronwave'; app()"


def cronwave_argv() -> list[str]:
    """The argv prefix of a ``cronwave`` process: append its arguments."""
    return [sys.executable, "-c", CLI]


def free_port_base(count: int = len(PORT_ORDER) + 1, tries: int = 50) -> int:
    """A port N with N..N+count-1 free now, below the kernel's ephemeral range, as a
    suite's own ports are (``cronwave_core.suite.free_port``): a connection to a port
    in that range that nobody listens on yet can be joined to itself by the kernel,
    and a health check then reads its own request back."""
    rng = random.Random()
    highest = ephemeral_low() - count - 1
    for _ in range(tries):
        base = rng.randrange(20_000, max(highest, 20_001))
        if not any(port_in_use(base + i) for i in range(count)):
            return base
    raise AssertionError(f"no {count} free ports in a row after {tries} tries")
