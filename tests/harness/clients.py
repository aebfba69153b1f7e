"""Clients of a running suite: the SDK's ``Client``, built the way the benchmarks build
it, with the tests' deadline."""

from __future__ import annotations

from datetime import timedelta

from cronwave import Client
from cronwave_bench.harness import client_for as bench_client_for
from cronwave_core.suite import Suite

#: Every call of a test's client has this deadline unless the test says otherwise.
TIMEOUT = timedelta(seconds=10)


def client_for(suite: Suite, timeout: timedelta = TIMEOUT) -> Client:
    """A client of ``suite``'s store, dispatcher, planner and leader-election."""
    return bench_client_for(suite, timeout)
