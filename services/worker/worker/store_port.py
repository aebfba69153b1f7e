"""The workflow store as the worker calls it (``RunStore``), and how a call waits out a
store that is restarting (``with_retries``).

The generated ``WorkflowStoreServiceStub`` satisfies ``RunStore``; a test can hand the
worker anything else that does.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol, TypeVar

import grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from tenacity import wait_exponential

from cronwave_core.backoff import nth_wait

log = logging.getLogger("cronwave.worker")

T = TypeVar("T")

#: Calls whose failure says nothing about the run: the store is restarting or slow.
TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
#: Calls whose failure says the attempt is no longer this worker's to finish.
NOT_OURS = (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND)


class RunStore(Protocol):
    """The store RPCs the worker makes; each raises ``grpc.RpcError`` when refused."""

    def RegisterJobType(
        self, request: store_pb.RegisterJobTypeRequest
    ) -> store_pb.RegisterJobTypeResponse: ...

    def ClaimRuns(self, request: store_pb.ClaimRunsRequest) -> store_pb.ClaimRunsResponse: ...

    def GetRuns(self, request: store_pb.GetRunsRequest) -> store_pb.GetRunsResponse: ...

    def Heartbeats(self, request: store_pb.HeartbeatsRequest) -> store_pb.HeartbeatsResponse: ...

    def CompleteRuns(
        self, request: store_pb.CompleteRunsRequest
    ) -> store_pb.CompleteRunsResponse: ...

    def ReleaseRun(self, request: store_pb.ReleaseRunRequest) -> store_pb.ReleaseRunResponse: ...

    def DeadLetterRun(
        self, request: store_pb.DeadLetterRunRequest
    ) -> store_pb.DeadLetterRunResponse: ...

    def AppendRunEvents(
        self, request: store_pb.AppendRunEventsRequest
    ) -> store_pb.AppendRunEventsResponse: ...

    def ListRunEvents(
        self, request: store_pb.ListRunEventsRequest
    ) -> store_pb.ListRunEventsResponse: ...


def with_retries(
    call: Callable[[], T],
    what: str,
    within: timedelta = timedelta(seconds=3),
    first_delay: float = 0.1,
    max_delay: float = 2.0,
) -> T:
    """``call()``, retried with backoff while the store is unreachable, for at most
    ``within``; any other error, or an unreachable one past ``within``, propagates.
    The waits double from ``first_delay`` up to ``max_delay``, the last one cut to
    end at ``within``."""
    # A loop of its own, not tenacity's Retrying: every claim and completion of a run
    # passes here, and Retrying costs 14-15 us of CPU per successful call against
    # 0.27 us for this loop (timeit, time.process_time, 20,000 calls of a call that
    # succeeds), ~29 us per run: 2.6% of the worker's 1.11 ms of CPU per run
    # (docs/benchmarks.md). Its waits are cronwave_core.backoff's all the same.
    deadline = time.monotonic() + within.total_seconds()
    for attempt in itertools.count(1):
        try:
            return call()
        except grpc.RpcError as exc:
            left = deadline - time.monotonic()
            if exc.code() not in TRANSIENT or left <= 0:
                raise
            log.warning(
                "%s: %s (%s); retry %d, %.1fs left", what, exc.code().name, exc.details(),
                attempt, left,
            )  # fmt: skip
            backoff = wait_exponential(multiplier=first_delay, max=max_delay)
            time.sleep(min(nth_wait(backoff, attempt).total_seconds(), left))
    raise AssertionError("unreachable")  # the loop returns or raises
