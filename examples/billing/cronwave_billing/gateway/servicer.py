"""``cronwave_billing.v1.PaymentGatewayService``: a thin adapter over the ledger and the
failure drills."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from cronwave_billing.gateway.domain import SUCCEEDED, Charge, ChargeItem, ChargeResult
from cronwave_billing.gateway.faults import NO_FAULTS, FaultHooks
from cronwave_billing.gateway.ledger import Ledger
from cronwave_billing.v1 import payment_gateway_service_pb2 as pb
from cronwave_billing.v1 import payment_gateway_service_pb2_grpc as pb_grpc
from cronwave_core.convert import dt_to_ts, duration_to_td
from cronwave_core.errors import InvalidArgument
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import Hop, Kind

DEFAULT_PAGE = 1_000
MAX_PAGE = 10_000

_STATUS = {SUCCEEDED: pb.CHARGE_STATUS_SUCCEEDED}


def item_from_proto(msg: pb.ChargeItem) -> ChargeItem:
    return ChargeItem(
        idempotency_key=msg.idempotency_key,
        customer_id=msg.customer_id,
        invoice_id=msg.invoice_id,
        amount_cents=msg.amount_cents,
        currency=msg.currency,
    )


def charge_to_proto(charge: Charge, times: dict[datetime, Timestamp] | None = None) -> pb.Charge:
    """``times`` caches the conversion of instants: a batch's new charges share one."""
    created = times.get(charge.created_at) if times is not None else None
    if created is None:
        created = dt_to_ts(charge.created_at)
        if times is not None:
            times[charge.created_at] = created
    return pb.Charge(
        charge_id=charge.charge_id,
        idempotency_key=charge.idempotency_key,
        customer_id=charge.customer_id,
        invoice_id=charge.invoice_id,
        amount_cents=charge.amount_cents,
        currency=charge.currency,
        status=_STATUS.get(charge.status, pb.CHARGE_STATUS_UNSPECIFIED),
        created_at=created,
        seq=charge.seq,
    )


def result_to_proto(
    result: ChargeResult, times: dict[datetime, Timestamp] | None = None
) -> pb.ChargeResult:
    return pb.ChargeResult(charge=charge_to_proto(result.charge, times), replayed=result.replayed)


class PaymentGatewayServicer(pb_grpc.PaymentGatewayServiceServicer):
    """``stop_holding`` (the gateway's ``on_stopping``) ends every held answer at once,
    so a stopping gateway exits within its grace: a held call's handler thread would
    otherwise outlive ``stop(grace)`` (grpc cancels the call, not the thread) and keep
    the process alive until the hold ran out."""

    def __init__(self, ledger: Ledger, faults: FaultHooks = NO_FAULTS) -> None:
        self.ledger = ledger
        self.faults = faults
        self._stopping = threading.Event()

    def stop_holding(self) -> None:
        """Answer every held call now, and hold none from here on."""
        self._stopping.set()

    def _charge(
        self, items: Sequence[ChargeItem], context: grpc.ServicerContext
    ) -> list[ChargeResult]:
        with hop_span("gateway.charge", Hop.EXECUTE, Kind.DATABASE, {"gateway.items": len(items)}):
            results = self.ledger.charge_many(items)
        hold = self.faults.take_timeout(context.time_remaining())
        if hold is not None:
            # Committed: the charges exist whatever the caller concludes from the timeout.
            with hop_span("gateway.fault_hold", Hop.EXECUTE, Kind.APP, {"gateway.hold_s": hold}):
                self._stopping.wait(hold)
        return results

    def Charge(self, request: pb.ChargeRequest, context: grpc.ServicerContext) -> pb.ChargeResponse:
        if not request.HasField("item"):
            raise InvalidArgument("item", "required")
        item = item_from_proto(request.item).validate("item")
        (result,) = self._charge([item], context)
        return pb.ChargeResponse(result=result_to_proto(result))

    def ChargeMany(
        self, request: pb.ChargeManyRequest, context: grpc.ServicerContext
    ) -> pb.ChargeManyResponse:
        items = [item_from_proto(msg) for msg in request.items]
        results = self._charge(items, context)
        times: dict[datetime, Timestamp] = {}
        return pb.ChargeManyResponse(results=[result_to_proto(r, times) for r in results])

    def ListCharges(
        self, request: pb.ListChargesRequest, context: grpc.ServicerContext
    ) -> pb.ListChargesResponse:
        if request.after_seq < 0:
            raise InvalidArgument("after_seq", "must not be negative")
        limit = request.limit or DEFAULT_PAGE
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidArgument("limit", f"must be in [1, {MAX_PAGE}] (0 means {DEFAULT_PAGE})")
        found = self.ledger.list_charges(request.after_seq, limit)
        return pb.ListChargesResponse(
            charges=[charge_to_proto(c) for c in found],
            next_after_seq=found[-1].seq if len(found) == limit else 0,
        )

    def CountCharges(
        self, request: pb.CountChargesRequest, context: grpc.ServicerContext
    ) -> pb.CountChargesResponse:
        counts = self.ledger.counts()
        return pb.CountChargesResponse(
            charges=counts.charges,
            invoices=counts.invoices,
            invoices_charged_twice=counts.invoices_charged_twice,
            amount_cents=counts.amount_cents,
        )

    def SetFaults(
        self, request: pb.SetFaultsRequest, context: grpc.ServicerContext
    ) -> pb.SetFaultsResponse:
        """Arms the drills; UNIMPLEMENTED in a gateway not started for tests."""
        hold = duration_to_td(request.hold, "hold") if request.HasField("hold") else None
        self.faults.set(request.timeout_after_commit, hold)
        armed, served = self.faults.state()
        return pb.SetFaultsResponse(timeout_after_commit=armed, timeouts_served=served)
