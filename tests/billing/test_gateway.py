"""The sandbox payment gateway as a real process: Stripe-like idempotency keys, the
"timeout after commit" drill (only in a gateway started for tests), and refusals that
name the field."""

from __future__ import annotations

import signal
import threading
import time

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from cronwave_billing.v1 import payment_gateway_service_pb2 as pb
from cronwave_core.settings import TEST_HOOKS
from tests.billing.conftest import StartGateway
from tests.harness.gateway import GRACE, GatewayProcess, charged_twice, item
from tests.helpers import eventually

pytestmark = pytest.mark.slow

#: What a stopping gateway takes beyond its grace: the signal, the ledger's disposal,
#: the interpreter's exit.
EXIT_OVERHEAD_S = 5


def charge(
    gateway: GatewayProcess, *items: pb.ChargeItem, timeout: float = 10
) -> list[pb.ChargeResult]:
    return list(gateway.stub.ChargeMany(pb.ChargeManyRequest(items=items), timeout=timeout).results)


def test_the_same_key_twice_charges_once_and_returns_the_first_result(
    gateway: GatewayProcess,
) -> None:
    # Given a charge made with a key
    (first,) = charge(gateway, item("inv-1", invoice="1", amount=1250))
    # When the same request comes again (the caller did not hear the answer)
    second = gateway.stub.Charge(
        pb.ChargeRequest(item=item("inv-1", invoice="1", amount=1250)), timeout=10
    )
    # Then it is the same charge, marked replayed, and only one exists
    assert not first.replayed
    assert second.result.replayed
    assert second.result.charge == first.charge
    assert first.charge.charge_id.startswith("ch_")
    assert first.charge.status == pb.CHARGE_STATUS_SUCCEEDED
    counts = gateway.count()
    assert (counts.charges, counts.invoices, counts.amount_cents) == (1, 1, 1250)


def test_a_batch_charges_each_key_once_even_when_a_key_repeats(gateway: GatewayProcess) -> None:
    results = charge(
        gateway, item("k1", invoice="1"), item("k2", invoice="2"), item("k1", invoice="1")
    )
    assert [r.charge.idempotency_key for r in results] == ["k1", "k2", "k1"]
    assert results[0].charge.charge_id == results[2].charge.charge_id
    assert gateway.count().charges == 2
    again = charge(gateway, item("k2", invoice="2"), item("k3", invoice="3"))
    assert [r.replayed for r in again] == [True, False]
    assert gateway.count().charges == 3


def test_a_key_reused_with_other_parameters_is_refused_and_nothing_is_written(
    gateway: GatewayProcess,
) -> None:
    charge(gateway, item("inv-7", invoice="7", amount=1000))
    with pytest.raises(grpc.RpcError) as caught:
        charge(gateway, item("inv-8", invoice="8"), item("inv-7", invoice="7", amount=999))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith("items[1].idempotency_key: key 'inv-7'")
    assert "amount_cents" in caught.value.details()
    # inv-8 came in the refused call: it was not charged
    assert gateway.count().charges == 1


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (item("", invoice="1"), "items[0].idempotency_key"),
        (item("k", invoice=""), "items[0].invoice_id"),
        (item("k", amount=0), "items[0].amount_cents"),
        (item("k", currency="EUR"), "items[0].currency"),
    ],
)
def test_bad_input_names_the_field(gateway: GatewayProcess, bad: pb.ChargeItem, field: str) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        charge(gateway, bad)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith(field + ":")
    assert gateway.count().charges == 0


def test_an_empty_batch_and_a_bad_page_are_refused(gateway: GatewayProcess) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        charge(gateway)
    assert caught.value.details().startswith("items:")
    with pytest.raises(grpc.RpcError) as caught:
        gateway.stub.ListCharges(pb.ListChargesRequest(limit=10_001), timeout=10)
    assert caught.value.details().startswith("limit:")


def test_timeout_after_commit_charges_once_and_the_retry_gets_the_same_charge(
    gateway: GatewayProcess,
) -> None:
    # Given the gateway told to hold its next answer past the caller's deadline
    armed = gateway.stub.SetFaults(pb.SetFaultsRequest(timeout_after_commit=1), timeout=10)
    assert armed.timeout_after_commit == 1
    # When a caller charges with a short deadline
    with pytest.raises(grpc.RpcError) as caught:
        charge(gateway, item("inv-42", invoice="42"), timeout=0.5)
    # Then the caller sees a timeout although the charge was committed
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert gateway.count().charges == 1
    # and asking again with the same key returns that charge instead of a second one
    (retry,) = charge(gateway, item("inv-42", invoice="42"))
    assert retry.replayed
    assert gateway.count().charges == 1
    state = gateway.stub.SetFaults(pb.SetFaultsRequest(), timeout=10)
    assert (state.timeout_after_commit, state.timeouts_served) == (0, 1)


def test_a_gateway_not_started_for_tests_refuses_set_faults_and_still_charges(
    start_gateway: StartGateway,
) -> None:
    # Given a gateway started as in production: without the test switch
    gateway = start_gateway("prod-gateway")
    assert TEST_HOOKS not in gateway.proc.env
    # When a caller tries to arm a drill
    with pytest.raises(grpc.RpcError) as caught:
        gateway.stub.SetFaults(pb.SetFaultsRequest(timeout_after_commit=1), timeout=10)
    # Then the RPC is not there, and the answer says where it is
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert caught.value.details() == (
        "SetFaults: failure drills exist only in a payment-gateway started for tests "
        f"or drills ({TEST_HOOKS}=1); this one was not, so none can be armed"
    )
    # and charges go on, answered at once (no drill was armed by the refused call)
    charged = gateway.stub.Charge(pb.ChargeRequest(item=item("prod-1", invoice="1")), timeout=5)
    assert charged.result.charge.status == pb.CHARGE_STATUS_SUCCEEDED
    assert not charged.result.replayed
    assert gateway.count().charges == 1


def test_a_fixed_hold_is_refused_beyond_its_bound(gateway: GatewayProcess) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        gateway.stub.SetFaults(
            pb.SetFaultsRequest(timeout_after_commit=1, hold=Duration(seconds=3600)), timeout=10
        )
    assert caught.value.details().startswith("hold:")


def test_concurrent_calls_with_one_key_make_one_charge(gateway: GatewayProcess) -> None:
    results: list[pb.ChargeResult] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(12)

    def call() -> None:
        try:
            barrier.wait(timeout=10)
            results.extend(
                charge(
                    gateway,
                    item("same", invoice="9"),
                    item(f"own-{threading.get_ident()}", invoice="x"),
                )
            )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    same = {r.charge.charge_id for r in results if r.charge.idempotency_key == "same"}
    assert len(same) == 1
    assert sum(1 for r in results if r.charge.idempotency_key == "same" and not r.replayed) == 1
    counts = gateway.count()
    assert counts.charges == 13
    # Two keys for invoice "x" twelve times over: the gateway reports that invoice
    # charged more than once, which is what reconciliation looks for.
    assert counts.invoices_charged_twice == 1
    assert charged_twice(gateway.database_url) == [("x", 12)]


def test_list_charges_pages_in_charge_order(gateway: GatewayProcess) -> None:
    charge(gateway, *(item(f"k{i}", invoice=str(i)) for i in range(25)))
    seen, after = [], 0
    for _ in range(10):
        page = gateway.stub.ListCharges(
            pb.ListChargesRequest(after_seq=after, limit=10), timeout=10
        )
        seen.extend(c.idempotency_key for c in page.charges)
        if not page.next_after_seq:
            break
        after = page.next_after_seq
    assert seen == [f"k{i}" for i in range(25)]


def test_sigterm_stops_the_gateway_gracefully(gateway: GatewayProcess) -> None:
    gateway.proc.popen.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    assert gateway.proc.popen.wait(timeout=15) == 0  # type: ignore[union-attr]


def test_sigterm_stops_the_gateway_within_its_grace_while_an_answer_is_held(
    gateway: GatewayProcess,
) -> None:
    # Given a charge committed whose answer the gateway holds for a minute
    gateway.stub.SetFaults(
        pb.SetFaultsRequest(timeout_after_commit=1, hold=Duration(seconds=60)), timeout=10
    )
    answers: list[object] = []

    def call() -> None:
        try:
            answers.append(charge(gateway, item("held", invoice="7"), timeout=90))
        except grpc.RpcError as exc:
            answers.append(exc.code())

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    eventually(lambda: gateway.count().charges == 1, timeout=10, what="the charge committed")
    assert gateway.stub.SetFaults(pb.SetFaultsRequest(), timeout=10).timeouts_served == 1
    popen = gateway.proc.popen
    assert popen is not None

    # When the gateway is sent SIGTERM
    began = time.monotonic()
    popen.send_signal(signal.SIGTERM)

    # Then it exits cleanly within its grace (plus its start-to-stop overhead), not
    # once the hold is over
    assert popen.wait(timeout=60) == 0
    took = time.monotonic() - began
    assert took < GRACE.total_seconds() + EXIT_OVERHEAD_S, f"exited after {took:.1f} s"
    # and the held caller has its answer or a refusal at once, not after the hold
    caller.join(timeout=10)
    assert answers, "the held call is still waiting"
