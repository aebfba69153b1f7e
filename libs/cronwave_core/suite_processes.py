"""Servers a suite can run beside its services for an installed package, such as a
job package's own sandbox (the billing example's payment gateway): the package
declares each one by an entry point of the group ``cronwave.processes``, named as the
process and naming a ``SuiteProcess``; a suite asked for it looks it up by that name.
``cronwave up`` runs every declared one (the jobs the same packages register need
them). The suite names no such package or module itself."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib.metadata import entry_points

from cronwave_core.errors import ConfigurationError

GROUP = "cronwave.processes"


@dataclass(frozen=True)
class SuiteProcess:
    """How a suite starts a server and knows it is up: ``python -m module``, listening
    on ``CRONWAVE_<addr_var>`` (``default_port`` on a suite of fixed ports, else a
    free one, kept under ``port_key``), healthy once it answers the health check of
    ``grpc_service``. It is given the suite's certificate of its name."""

    module: str
    grpc_service: str
    addr_var: str
    port_key: str
    default_port: int

    def __post_init__(self) -> None:
        if not self.addr_var.endswith("_ADDR") or not 1024 <= self.default_port <= 65_535:
            raise ValueError(
                f"{self.module}: addr_var must end in _ADDR and default_port be from "
                f"1024 to 65535, got {self.addr_var!r} and {self.default_port}"
            )


@functools.cache
def installed_process(name: str) -> SuiteProcess | None:
    """The process ``name`` an installed package declares, or None."""
    for point in entry_points(group=GROUP, name=name):
        declared = point.load()
        if not isinstance(declared, SuiteProcess):
            raise ConfigurationError(
                f"entry point {point.name} = {point.value} of group {GROUP} names a "
                f"{type(declared).__name__}, not a cronwave_core.suite_processes.SuiteProcess"
            )
        return declared
    return None


def require_process(name: str) -> SuiteProcess:
    """``installed_process(name)``; refused, naming the entry point group, when no
    installed package declares it."""
    found = installed_process(name)
    if found is None:
        raise ConfigurationError(
            f"no installed package declares the process {name!r} (an entry point of "
            f"group {GROUP}); install the package that provides it"
        )
    return found


def declared_processes() -> tuple[str, ...]:
    """The names of every process the installed packages declare, sorted."""
    return tuple(sorted({point.name for point in entry_points(group=GROUP)}))
