"""Running the ``cronwave`` CLI as a process of its own, as a user's shell would, and
finding ports for a ``cronwave up`` beside the other tests."""

from __future__ import annotations

import random
import sys

from cronwave.cli.suite_cmds import PORT_ORDER, port_in_use

#: ``python -c CLI ARGS...`` runs the CLI of this checkout (no console script needed).
CLI = "import sys; from cronwave.cli.main import app; sys.argv[0] = 'cronwave'; app()"


def cronwave_argv() -> list[str]:
    """The argv prefix of a ``cronwave`` process: append its arguments."""
    return [sys.executable, "-c", CLI]


def free_port_base(count: int = len(PORT_ORDER) + 1, tries: int = 50) -> int:
    """A port N with N..N+count-1 free now (the kernel may give one away later; the
    suite's start then fails, naming the port)."""
    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(20_000, 60_000)
        if not any(port_in_use(base + i) for i in range(count)):
            return base
    raise AssertionError(f"no {count} free ports in a row after {tries} tries")
