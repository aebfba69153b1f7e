"""Latency faults of RPCs, as gRPC interceptors that a process started for tests
installs (``CRONWAVE_TEST_HOOKS=1`` and a ``delay=`` item in ``CRONWAVE_FAULT``; see
``cronwave_core.faults``). A production process has none of them: no service's own
code knows of faults.

- ``ServerFaults`` (installed by ``cronwave_core.bootstrap`` in every server; it acts
  on the methods of ``SERVER_POINTS`` only): once the store's handler has answered,
  the delay of ``persist:database`` (a run recorded) or ``complete:database`` (a run
  completed) is slept in a span of that hop and kind, within the call's server span.
  The transaction has committed by then, so the delay holds no lock and runs without
  the fault are not slowed; the caller waits for it all the same.
- ``ClientFaults`` (``fault_channel``, on the dispatcher's channel to the store;
  methods of ``CLIENT_POINTS``): before a start is recorded, the delays of
  ``dispatch:cache`` (once per call) and ``dispatch:app`` (per run selected), in spans
  of that hop and kind within the dispatcher's handling of the start.

A fault's key is the run's ``run_key``, read from the call's request or answer; a
batch call is slowed once when the fault selects any of its runs (the database time
of one transaction is every run's in the batch), except where said otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave_core.convert import ts_to_dt
from cronwave_core.faults import FaultHooks, fault_hooks, run_key
from cronwave_core.settings import TestHooks
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import Hop, Kind

_STORE = "/cronwave.v1.WorkflowStoreService/"


@dataclass(frozen=True)
class RpcFault:
    """The fault of ``hop``/``kind`` on one method: ``keys(request, response)`` are the
    run keys of the call (``response`` is None before the call); ``per_item`` sleeps
    once per selected key instead of once per call."""

    hop: Hop
    kind: Kind
    keys: Callable[[Any, Any], list[str]]
    per_item: bool = False


def _key(run: common_pb2.Run) -> str:
    return run_key(run.schedule_id, ts_to_dt(run.fire_time))


def _requested(request: store_pb.RecordRunRequest) -> str:
    return run_key(request.schedule_id, ts_to_dt(request.fire_time))


def _recorded_many(_: Any, response: store_pb.RecordRunsResponse) -> list[str]:
    return [
        _key(r.recorded.run)
        for r in response.results
        if r.HasField("recorded") and r.recorded.created
    ]


def _completed_many(_: Any, response: store_pb.CompleteRunsResponse) -> list[str]:
    return [
        _key(r.completion.run)
        for r in response.results
        if r.HasField("completion") and r.completion.changed
    ]


def _starting_many(request: store_pb.RecordRunsRequest, _: Any) -> list[str]:
    return [_requested(r) for r in request.runs]


#: The store's methods whose answer a fault delays (``ServerFaults``).
SERVER_POINTS: Mapping[str, Sequence[RpcFault]] = {
    _STORE + "RecordRuns": (RpcFault(Hop.PERSIST, Kind.DATABASE, _recorded_many),),
    _STORE + "CompleteRuns": (RpcFault(Hop.COMPLETE, Kind.DATABASE, _completed_many),),
}

#: The dispatcher's calls to the store that a fault delays before they are sent
#: (``ClientFaults``): recording a start comes after its look-ups and its handling.
CLIENT_POINTS: Mapping[str, Sequence[RpcFault]] = {
    _STORE + "RecordRuns": (
        RpcFault(Hop.DISPATCH, Kind.CACHE, _starting_many),
        RpcFault(Hop.DISPATCH, Kind.APP, _starting_many, per_item=True),
    ),
}


def _apply(faults: FaultHooks, point: RpcFault, keys: Iterable[str], name: str) -> None:
    fault = faults.get(point.hop, point.kind)
    if fault is None:
        return
    for key in keys:
        if not fault.selected(key):
            continue
        with hop_span(name, point.hop, point.kind) as span:
            faults.inject(point.hop, point.kind, key, span)
        if not point.per_item:
            return


class ServerFaults(grpc.ServerInterceptor):
    """Slows the answers of ``points``' methods (see the module's docstring); the
    innermost interceptor, so it sees the servicer's own request and answer."""

    def __init__(
        self, faults: FaultHooks, points: Mapping[str, Sequence[RpcFault]] = SERVER_POINTS
    ) -> None:
        self.faults = faults
        self.points = points

    def intercept_service(self, continuation: Callable[..., Any], details: Any) -> Any:
        handler = continuation(details)
        method: str = details.method
        points = [p for p in self.points.get(method, ()) if self.faults.get(p.hop, p.kind)]
        if handler is None or handler.unary_unary is None or not points:
            return handler
        inner, faults = handler.unary_unary, self.faults
        name = f"fault {method.rsplit('/', 1)[-1]}"

        def unary_unary(request: Any, context: grpc.ServicerContext) -> Any:
            response = inner(request, context)
            for point in points:
                _apply(faults, point, point.keys(request, response), name)
            return response

        return handler._replace(unary_unary=unary_unary)


class ClientFaults(grpc.UnaryUnaryClientInterceptor):
    """Slows the calls of ``points``' methods before they are sent (see the module's
    docstring)."""

    def __init__(
        self, faults: FaultHooks, points: Mapping[str, Sequence[RpcFault]] = CLIENT_POINTS
    ) -> None:
        self.faults = faults
        self.points = points

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        method: str = client_call_details.method
        for point in self.points.get(method, ()):
            _apply(
                self.faults, point, point.keys(request, None), f"fault {method.rsplit('/', 1)[-1]}"
            )
        return continuation(client_call_details, request)


def server_faults(hooks: TestHooks, service_names: Iterable[str]) -> list[grpc.ServerInterceptor]:
    """The server interceptors of the faults ``CRONWAVE_FAULT`` names, for a server of
    ``service_names`` (full names) that has fault points, in a process started for
    tests; none otherwise."""
    served = {f"/{name}/" for name in service_names}
    points = {m: p for m, p in SERVER_POINTS.items() if m[: m.rindex("/") + 1] in served}
    if not points:
        return []
    faults = fault_hooks(hooks)
    return [ServerFaults(faults, points)] if faults else []


def fault_channel(channel: grpc.Channel, hooks: TestHooks) -> grpc.Channel:
    """``channel``, with the client faults ``CRONWAVE_FAULT`` names in a process
    started for tests, outside its client spans; ``channel`` itself otherwise."""
    faults = fault_hooks(hooks)
    return grpc.intercept_channel(channel, ClientFaults(faults)) if faults else channel
