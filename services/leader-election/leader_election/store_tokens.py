"""Fencing tokens come from the workflow-store, which accepts no token it did not issue."""

from __future__ import annotations

from datetime import timedelta

import grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_core.errors import Unavailable


class StoreTokens:
    """Asks the workflow-store for a new fencing token of a scope (``IssueFencingToken``).

    The store keeps the newest token it issued durably and increments it by one per
    call, so tokens strictly increase across Redis restarts and data loss, and the
    store can refuse every token it did not issue. When the store cannot be asked,
    no token is issued: a lease granted without one could not write anything anyway.
    """

    def __init__(self, channel: grpc.Channel, address: str, timeout: timedelta) -> None:
        self._stub = store_grpc.WorkflowStoreServiceStub(channel)
        self._address = address
        self._timeout = timeout.total_seconds()

    def __call__(self, scope: str) -> int:
        try:
            reply = self._stub.IssueFencingToken(
                store_pb.IssueFencingTokenRequest(fencing_scope=scope), timeout=self._timeout
            )
        except grpc.RpcError as exc:
            code = exc.code().name if hasattr(exc, "code") else "UNKNOWN"
            raise Unavailable(
                f"scope '{scope}': the workflow-store at {self._address} did not issue a "
                f"fencing token ({code}); no lease is granted until it does "
                "(check CRONWAVE_STORE_ADDR)"
            ) from exc
        return int(reply.fencing_token)
