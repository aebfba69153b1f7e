"""A schedule's labels, end to end against a real workflow-store: given at create,
replaced whole by an update, returned in key order, refused naming the key when
malformed (nothing written), audited, and ``critical=true`` exported as
``cronwave_schedule_critical`` for the schedules that carry it, as they carry it."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

import cronwave
from cronwave_core.domain.labels import MAX_LABELS
from cronwave_core.suite import free_port
from tests.harness.store import StartStore, register_job_type
from tests.harness.tls import as_identity
from tests.helpers import eventually, fresh

pytestmark = [pytest.mark.slow, pytest.mark.both_backends]


@pytest.fixture
def metrics_addr() -> str:
    return f"127.0.0.1:{free_port()}"


@pytest.fixture
def client(start_store: StartStore, metrics_addr: str) -> Iterator[cronwave.Client]:
    store = start_store(env={"CRONWAVE_METRICS_ADDR": metrics_addr})
    register_job_type(store.stub(), "cronwave.noop")
    with cronwave.Client(
        store_addr=store.address,
        dispatcher_addr="127.0.0.1:1",  # never dialled: only the store is called
        planner_addr="127.0.0.1:1",
        leader_addr="127.0.0.1:1",
        timeout=timedelta(seconds=10),
        tls=as_identity("local-admin"),
    ) as made:
        yield made


def critical(metrics_addr: str) -> set[str]:
    """The schedules the store's /metrics marks critical."""
    with urllib.request.urlopen(f"http://{metrics_addr}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {
        sample.labels["schedule"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "cronwave_schedule_critical" and sample.value == 1
    }


def test_labels_are_kept_replaced_whole_and_audited(client: cronwave.Client) -> None:
    # Given a schedule created with two labels
    sid = fresh("labels")
    made = client.create_schedule(
        sid,
        cron="0 2 * * *",
        job_type="cronwave.noop",
        labels={"team": "billing", "critical": "true"},
    )

    # Then they come back in key order, and it is critical
    assert made.labels == {"critical": "true", "team": "billing"}
    assert list(client.get_schedule(sid).labels) == ["critical", "team"]
    assert made.critical and client.get_schedule(sid).critical

    # When an update gives other labels, then none
    relabelled = client.update_schedule(sid, labels={"team": "billing-eu"})
    cleared = client.update_schedule(sid, labels={})

    # Then each replaced the labels whole, and the other fields stayed
    assert relabelled.labels == {"team": "billing-eu"} and not relabelled.critical
    assert cleared.labels == {} and cleared.cron == ("0 2 * * *",)

    # And each change is in the audit trail, label by label
    changes = [e.changes for e in client.audit_events(sid)]
    assert {"old": None, "new": "true"} in [c.get("labels.critical") for c in changes]
    assert {"old": "billing", "new": "billing-eu"} in [c.get("labels.team") for c in changes]


@pytest.mark.parametrize(
    ("labels", "field", "rule"),
    [
        ({"Team": "x"}, "labels['Team']", "a label key is 1-63 characters of a-z"),
        ({"team": "bad value"}, "labels['team']", "a label value is at most 63 characters"),
        ({f"k{i}": "v" for i in range(MAX_LABELS + 1)}, "labels", "at most 16 labels, got 17"),
    ],
)
def test_a_malformed_label_is_refused_naming_it(
    client: cronwave.Client, labels: dict[str, str], field: str, rule: str
) -> None:
    # Given a schedule with a label
    sid = fresh("labels")
    client.create_schedule(sid, cron="0 2 * * *", job_type="cronwave.noop", labels={"a": "1"})

    # When a create and an update give a malformed one
    for call in (
        lambda: client.create_schedule(
            fresh("labels"), cron="0 2 * * *", job_type="cronwave.noop", labels=labels
        ),
        lambda: client.update_schedule(sid, labels=labels),
    ):
        with pytest.raises(cronwave.InvalidArgument) as refused:
            call()

        # Then it is refused naming the label and the rule, and nothing changed
        assert refused.value.field == field and rule in refused.value.rule, refused.value
    assert client.get_schedule(sid).labels == {"a": "1"}


def test_the_store_exports_the_critical_schedules_as_they_are_labelled(
    client: cronwave.Client, metrics_addr: str
) -> None:
    # Given a schedule labelled critical, one labelled otherwise, one with none
    marked, other, plain = fresh("critical"), fresh("other"), fresh("plain")
    client.create_schedule(
        marked, cron="0 2 * * *", job_type="cronwave.noop", labels={"critical": "true"}
    )
    client.create_schedule(
        other, cron="0 2 * * *", job_type="cronwave.noop", labels={"critical": "no"}
    )
    client.create_schedule(plain, cron="0 2 * * *", job_type="cronwave.noop")

    # Then /metrics marks the first alone, before any of them ever ran
    eventually(lambda: critical(metrics_addr) == {marked}, timeout=20, what="the critical one")

    # When the labels change and the critical one is deleted
    client.update_schedule(other, labels={"critical": "true", "team": "ops"})
    client.delete_schedule(marked)

    # Then /metrics follows, with no restart and no run
    eventually(lambda: critical(metrics_addr) == {other}, timeout=20, what="the relabelled one")
