"""The workflow-store's newest fencing token per scope: the floor of every new token."""

from __future__ import annotations

from datetime import timedelta

import grpc

from cronwave.v1 import workflow_store_service_pb2 as store_pb
from cronwave.v1 import workflow_store_service_pb2_grpc as store_grpc
from cronwave_core.errors import Unavailable


class StoreFloor:
    """Asks the workflow-store, on every call, for the newest token it has seen.

    Nothing is cached: a cached answer could be older than what the store has seen
    since, and a token floored at it could go backwards.
    """

    def __init__(self, channel: grpc.Channel, address: str, timeout: timedelta) -> None:
        self._stub = store_grpc.WorkflowStoreServiceStub(channel)
        self._address = address
        self._timeout = timeout.total_seconds()

    def __call__(self, scope: str) -> int:
        try:
            reply = self._stub.GetFencingToken(
                store_pb.GetFencingTokenRequest(fencing_scope=scope), timeout=self._timeout
            )
        except grpc.RpcError as exc:
            code = exc.code().name if hasattr(exc, "code") else "UNKNOWN"
            raise Unavailable(
                f"workflow-store at {self._address} did not give the newest fencing token "
                f"of scope '{scope}' ({code})"
            ) from exc
        return int(reply.fencing_token)
