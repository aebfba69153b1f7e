"""``console.progress``: a run's progress from its checkpoint."""

from __future__ import annotations

import json

from console.progress import progress_of


def test_the_billing_jobs_charges_are_charged_over_invoices() -> None:
    checkpoint = {"phase": "charges", "customers": 200, "invoices": 200, "charged": 50}
    progress = progress_of(json.dumps(checkpoint))
    assert progress is not None
    assert (progress.done, progress.total, progress.what, progress.percent) == (
        50,
        200,
        "customers charged",
        25,
    )
    assert ("phase", "charges") in progress.fields


def test_while_invoicing_it_counts_invoices_over_customers() -> None:
    checkpoint = {"phase": "invoices", "customers": 400, "invoices": 100, "charged": 0}
    progress = progress_of(json.dumps(checkpoint))
    assert progress is not None
    assert (progress.done, progress.total, progress.what) == (100, 400, "customers invoiced")


def test_any_other_checkpoint_is_shown_field_by_field() -> None:
    progress = progress_of(json.dumps({"step": 3, "name": "x"}))
    assert progress is not None and progress.percent is None
    assert progress.fields == (("step", "3"), ("name", "x"))


def test_no_checkpoint_or_not_an_object_is_none() -> None:
    assert progress_of("") is None
    assert progress_of("[1, 2]") is None
    assert progress_of("{}") is None
    assert progress_of("not json") is None
