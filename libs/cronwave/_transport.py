"""The gRPC half of ``Client``, imported when the first client is made, so that
``import cronwave`` (and the CLI's ``--help``) loads no grpc: plain channels with a
deadline on every call (``cronwave_core.channels``, no tracing interceptor), the
services' stubs, and what a failed call becomes."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NoReturn

import grpc
from cronwave_proto.v1 import cron_planner_service_pb2_grpc as planner_grpc
from cronwave_proto.v1 import dispatcher_service_pb2_grpc as dispatcher_grpc
from cronwave_proto.v1 import leader_election_service_pb2_grpc as leader_grpc
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_core.channels import plain_channel
from cronwave_core.errors import CronwaveError, Unavailable
from cronwave_core.settings import TlsSettings
from cronwave_core.status import error_from_rpc, error_from_status

RpcError = grpc.RpcError


@dataclass(frozen=True)
class Stubs:
    """One channel and stub per service; ``close`` closes the channels."""

    channels: Mapping[str, grpc.Channel]
    store: store_grpc.WorkflowStoreServiceStub
    dispatcher: dispatcher_grpc.DispatcherServiceStub
    planner: planner_grpc.CronPlannerServiceStub
    leader: leader_grpc.LeaderElectionServiceStub

    def close(self) -> None:
        for channel in self.channels.values():
            channel.close()


class Unreached:
    """The stub of a service the client has no address for: each of its calls raises
    ``error`` (which says where the address was looked for), without dialling."""

    def __init__(self, error: CronwaveError) -> None:
        self._error = error

    def __getattr__(self, method: str) -> Callable[..., NoReturn]:
        def call(*_args: object, **_kwargs: object) -> NoReturn:
            raise type(self._error)(self._error.message)

        return call


def connect(
    addrs: Mapping[str, str],
    timeout: timedelta,
    tls: TlsSettings,
    unreached: Mapping[str, CronwaveError] | None = None,
) -> Stubs:
    """Channels to ``addrs`` (by service name) with ``timeout`` as every call's deadline,
    and mutual TLS as ``tls`` says; a service in ``unreached`` gets no channel and an
    ``Unreached`` stub raising its error. Nothing is dialled yet: a channel connects on
    its first call."""
    unreached = unreached or {}
    channels = {
        name: plain_channel(addr, timeout, tls)
        for name, addr in addrs.items()
        if name not in unreached
    }

    def stub(name: str, make: Callable[[grpc.Channel], Any]) -> Any:
        return Unreached(unreached[name]) if name in unreached else make(channels[name])

    return Stubs(
        channels=channels,
        store=stub("workflow-store", store_grpc.WorkflowStoreServiceStub),
        dispatcher=stub("dispatcher", dispatcher_grpc.DispatcherServiceStub),
        planner=stub("cron-planner", planner_grpc.CronPlannerServiceStub),
        leader=stub("leader-election", leader_grpc.LeaderElectionServiceStub),
    )


def call_error(where: str, timeout: timedelta, exc: grpc.RpcError) -> CronwaveError:
    """What a failed call to ``where`` ("dispatcher at HOST:PORT") stands for: an
    unreachable or silent service is ``Unavailable`` naming it, anything else the
    error its status maps to, message unchanged."""
    code = exc.code() if hasattr(exc, "code") else None
    if code == grpc.StatusCode.UNAVAILABLE:
        details = exc.details() if hasattr(exc, "details") else ""
        return Unavailable(f"{where} is unavailable: {details}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Unavailable(
            f"{where} did not answer within {timeout.total_seconds():g}s "
            "(deadline exceeded); it may be overloaded or stopped"
        )
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        details = exc.details() if hasattr(exc, "details") else ""
        sizes = _TOO_LARGE.search(details or "")
        if sizes is not None:
            return error_from_status(
                "RESOURCE_EXHAUSTED",
                f"a message of {sizes[1]} bytes to or from {where} was over the receiving "
                f"side's limit of {sizes[2]} bytes, so it was not read. {_TOO_LARGE_HINT}",
            )
    return error_from_rpc(exc)


# gRPC's own refusal of a message past a receive cap (the server's or the client's):
# its text is the same either way, so the hint covers a request and a reply. A reply is
# never fixed by sending less: it holds what the store keeps for a run or a page.
_TOO_LARGE_HINT = (
    "A request that large holds too much in one call: split it (a payload is at most "
    "256 KiB by default, CRONWAVE_MAX_PAYLOAD_BYTES). A reply that large holds too much "
    "stored data: ask for fewer runs or items per call; a run's result and checkpoint are "
    "at most 1 MiB each by default (CRONWAVE_MAX_RESULT_BYTES, "
    "CRONWAVE_MAX_CHECKPOINT_BYTES), so a single run over that was stored before those "
    "limits, or by hand"
)

_TOO_LARGE = re.compile(r"larger than max \((\d+) vs\. (\d+)\)")
