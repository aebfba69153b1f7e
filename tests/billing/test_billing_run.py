"""billing.nightly run by a worker process, end to end: store, dispatcher, worker,
payment gateway, Redis and the job's own database."""

from __future__ import annotations

import json

import pytest

from cronwave_billing.v1 import payment_gateway_service_pb2 as gateway_pb
from tests.harness.gateway import BillingSuite

pytestmark = pytest.mark.slow


def test_a_run_bills_each_customer_once_and_a_rerun_of_the_period_changes_nothing(
    billing_suite,
) -> None:
    suite: BillingSuite = billing_suite()
    suite.start_worker()
    # Given a billing schedule, when its run goes through the worker
    first = suite.finished(suite.trigger(suite.schedule(customers=300, period="2024-07")).run_id)
    # Then it succeeded, bills every customer once, and its last checkpoint says done
    assert first.state == "SUCCEEDED", first.error
    result = first.result
    assert (result["customers"], result["invoices"], result["charges"]) == (300, 300, 300)
    checkpoint = json.loads(first.checkpoint_json)
    assert (checkpoint["phase"], checkpoint["charged"]) == ("done", 300)
    books = suite.reconcile("2024-07")
    assert (books.gateway_charges, books.duplicates, books.missing, books.unrecorded) == (
        300, 0, 0, 0,
    )  # fmt: skip

    # When another run bills the same period (a second schedule, a manual re-run)
    second = suite.finished(suite.trigger(suite.schedule(customers=300, period="2024-07")).run_id)
    # Then nothing new is invoiced or charged
    assert second.state == "SUCCEEDED"
    assert (second.result["invoices_created"], second.result["charges_recorded"]) == (0, 0)
    assert suite.reconcile("2024-07").gateway_charges == 300


def test_a_gateway_timeout_after_commit_is_retried_without_a_second_charge(
    billing_suite,
) -> None:
    suite: BillingSuite = billing_suite(test_hooks=True)
    suite.start_worker()
    # Given a gateway that will hold its next two answers past the caller's deadline,
    # after committing
    suite.gateway.SetFaults(gateway_pb.SetFaultsRequest(timeout_after_commit=2), timeout=10)
    schedule = suite.schedule(customers=200, charge_batch=50, gateway_timeout=0.5, period="p")
    # When the run charges through it
    run = suite.finished(suite.trigger(schedule).run_id)
    # Then its first batch was asked three times (the first call charged, the second
    # replayed, both answers lost), the third answer was recorded: one charge each
    assert run.state == "SUCCEEDED", run.error
    assert (run.result["gateway_retries"], run.result["gateway_replays"]) == (2, 50)
    books = suite.reconcile("p")
    assert (books.invoices, books.gateway_charges, books.duplicates, books.missing) == (
        200, 200, 0, 0,
    )  # fmt: skip
