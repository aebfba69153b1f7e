"""Fixtures of the failover tests: a drill over a suite of real processes and proxies,
each stopped when the test ends (the Redis a test owns is ``tests.harness.redis``'s
``own_redis``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from cronwave_bench.failover import Drill
from cronwave_bench.faults import TcpProxy
from cronwave_core.suite import Suite
from tests.harness.netns import NetNamespace
from tests.harness.processes import raise_all, run_all


@pytest.fixture
def drill_of() -> Iterator[Callable[[Suite], Drill]]:
    """A ``Drill`` (schedule, leader, audit) over a suite the test started."""
    drills: list[Drill] = []

    def make(suite: Suite) -> Drill:
        drill = Drill(suite)
        drills.append(drill)
        return drill

    yield make
    for drill in drills:
        drill.close()


@pytest.fixture
def proxy_to() -> Iterator[Callable[[str], TcpProxy]]:
    proxies: list[TcpProxy] = []

    def make(target: str) -> TcpProxy:
        proxy = TcpProxy(target)
        proxies.append(proxy)
        return proxy

    yield make
    for proxy in proxies:
        proxy.close()


@pytest.fixture
def netns() -> Iterator[Callable[[Suite], NetNamespace]]:
    """Network namespaces joined to this machine by a veth pair (root only), each
    removed, with the processes started in it, when the test ends."""
    made: list[NetNamespace] = []

    def make(suite: Suite) -> NetNamespace:
        namespace = NetNamespace(suite)
        made.append(namespace)
        return namespace

    yield make
    raise_all(run_all(namespace.close for namespace in reversed(made)), "removing namespaces")
