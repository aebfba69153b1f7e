"""The billing job's side of the payment gateway: a batch of charges, asked again
with the same idempotency keys until the gateway answers.

Asking again is always safe: a key the gateway has seen returns its first charge.
That is what heals the failure a timeout hides: the gateway committed the charge,
then its answer was lost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import grpc
from tenacity import RetryCallState, RetryError, Retrying, retry_if_exception, stop_after_attempt

from cronwave_billing.v1 import payment_gateway_service_pb2 as pb
from cronwave_core.backoff import exponential
from cronwave_core.errors import CronwaveError, Unavailable

log = logging.getLogger("cronwave.job.billing")

# The answer may have been lost after the gateway acted: ask again, same keys.
RETRYABLE = (
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
)
FIRST_BACKOFF = timedelta(milliseconds=200)
MAX_BACKOFF = timedelta(seconds=2)


class GatewayRefused(CronwaveError):
    """The gateway refused a batch for a reason asking again cannot change (e.g. a
    key reused with other parameters)."""

    status = "FAILED_PRECONDITION"


def idempotency_key(invoice_id: int) -> str:
    """The key of an invoice's charge: derived from the invoice alone, so every
    attempt of every run asks for the same charge with the same key."""
    return f"inv-{invoice_id}"


class GatewayBatches:
    """Submits batches through a ``PaymentGatewayServiceStub``."""

    def __init__(
        self,
        stub: Any,
        address: str,
        timeout: timedelta,
        attempts: int,
        between: Callable[[], None] = lambda: None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.stub = stub
        self.address = address
        self.timeout = timeout
        self.attempts = attempts
        self.between = between  # called before each retry: a superseded attempt stops
        self.sleep = sleep
        self.retries = 0

    def charge(self, items: Sequence[pb.ChargeItem]) -> list[pb.ChargeResult]:
        """One result per item, in order, once the gateway answered; raises
        ``Unavailable`` after ``attempts`` calls without an answer."""
        request = pb.ChargeManyRequest(items=items)

        def again(state: RetryCallState) -> None:
            self.retries += 1
            exc = state.outcome.exception() if state.outcome else None
            log.warning(
                "gateway: %s on a batch of %d charges; asking again with the same keys (%d/%d)",
                exc.code().name if isinstance(exc, grpc.RpcError) else exc,
                len(items),
                state.attempt_number,
                self.attempts,
            )
            self.between()

        calls = Retrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(self.attempts),
            wait=exponential(FIRST_BACKOFF, MAX_BACKOFF),
            sleep=self.sleep,
            before_sleep=again,
        )
        try:
            response = calls(self.stub.ChargeMany, request, timeout=self.timeout.total_seconds())
        except RetryError as spent:
            exc = spent.last_attempt.exception()
            assert isinstance(exc, grpc.RpcError)
            raise Unavailable(
                f"payment gateway at {self.address} gave no answer to a batch of "
                f"{len(items)} charges in {self.attempts} calls ({exc.code().name}: "
                f"{exc.details()}); is it running (`python -m cronwave_billing.gateway`, "
                "CRONWAVE_GATEWAY_ADDR)? The charges it may have made are safe to ask "
                "for again: run the job again"
            ) from exc
        except grpc.RpcError as exc:
            raise GatewayRefused(
                f"payment gateway at {self.address} refused a batch of {len(items)} "
                f"charges: {exc.code().name}: {exc.details()}"
            ) from exc
        results = list(response.results)
        if len(results) != len(items):
            raise GatewayRefused(
                f"payment gateway answered {len(results)} results for {len(items)} charges"
            )
        return results


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, grpc.RpcError) and exc.code() in RETRYABLE
