"""The alerting rules (deploy/prometheus/alerts.yaml) parse as PromQL, are complete
(``for``, severity, summary, description, a runbook URL on the one docs base whose
section exists), and use only metrics the services export, with labels they carry:
every name and label is checked against what a real suite's processes serve on
``/metrics``. The rules that decide by a label value (the reasons of a missed slot not
to alert on, the services a liveness rule watches) are checked against the code and
the manifests that define those values."""

from __future__ import annotations

import re
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from cronwave import Interval
from cronwave_core.domain import calendar_dst, catchup, deadlines, overlap
from cronwave_core.suite import Suite
from tests.deploy.manifests import render
from tests.harness.clients import client_for
from tests.harness.suites import SuiteFactory, make_suite  # noqa: F401  (fixture)
from tests.helpers import eventually

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "alerts.yaml"
RUNBOOKS = REPO / "docs" / "operations" / "runbooks.md"
SERVICES = ("workflow-store", "leader-election", "dispatcher", "worker", "cron-planner")
ALERTS = {
    "CriticalScheduleDidNotSucceed",
    "ScheduleDeadlineMissed",
    "SlotsMissed",
    "DeadLettersWaiting",
    "FireLatenessHigh",
    "WorkflowStoreDown",
    "WorkerDown",
    "PlannerDown",
    "ReplicaDown",
    "NoPlannerLeader",
    "PlannerNotFiring",
}
#: Where every runbook link points: docs/operations/runbooks.md as published (one base, so a
#: link works from a pager, outside the repository).
RUNBOOK_BASE = "https://github.com/cronwave/cronwave/blob/main/docs/operations/runbooks.md#"
#: Series Prometheus makes itself, not a service: a target's scrape health.
PROMETHEUS_OWN = {"up"}
#: The services a whole-service liveness rule (up == 0, absent) must watch.
WATCHED = {"workflow-store", "worker", "cron-planner"}
# EXPECTED SOON, not yet exported: the deadline sweep's metric comes with the
# deadlines work (served by the workflow-store). While it is absent from /metrics the
# rules may name it; once it is served, the test below fails until it is deleted here,
# so that every name is checked strictly from then on.
EXPECTED_SOON: dict[str, str] = {}


def rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"]]


def selectors(node: Any) -> Iterator[Any]:
    """Every vector selector of a parsed PromQL expression, walking its tree."""
    kind = type(node).__name__
    if kind == "VectorSelector":
        yield node
        return
    if kind == "MatrixSelector":
        yield from selectors(node.vector_selector)
        return
    for child in ("lhs", "rhs", "expr", "param", "vector_selector"):
        value = getattr(node, child, None)
        if value is not None and not isinstance(value, str | int | float):
            yield from selectors(value)
    for arg in getattr(node, "args", None) or ():
        yield from selectors(arg)


def selector_name(selector: Any) -> str:
    """The metric a selector names ({__name__="..."} is a name too)."""
    for matcher in selector.matchers.matchers:
        if matcher.name == "__name__":
            return str(matcher.value)
    return str(selector.name)


def metric_names(node: Any) -> Iterator[str]:
    """Every metric a parsed PromQL expression selects."""
    for selector in selectors(node):
        yield selector_name(selector)


def label_matchers(node: Any) -> Iterator[tuple[str, str, str, str]]:
    """(metric, label, operator, value) of every label matcher of an expression."""
    for selector in selectors(node):
        for matcher in selector.matchers.matchers:
            if matcher.name != "__name__":
                yield selector_name(selector), matcher.name, str(matcher.op), matcher.value


def rule(name: str) -> dict[str, Any]:
    (found,) = [r for r in rules() if r["alert"] == name]
    return found


def headings() -> set[str]:
    """The GitHub anchors of docs/operations/runbooks.md's headings."""
    found = set()
    for line in RUNBOOKS.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            text = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^a-z0-9 _-]", "", text).replace(" ", "-"))
    return found


def test_each_rule_parses_and_is_complete() -> None:
    found = rules()
    assert {rule["alert"] for rule in found} == ALERTS
    anchors = headings()
    for rule in found:
        promql_parser.parse(rule["expr"])  # raises on a malformed expression
        assert re.fullmatch(r"\d+[smh]", str(rule["for"])), rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        notes = rule["annotations"]
        assert notes["summary"] and notes["description"], rule["alert"]
        url = notes["runbook_url"]
        assert url.startswith(RUNBOOK_BASE), url  # resolves outside the repository
        assert url.removeprefix(RUNBOOK_BASE) in anchors, url
        assert url.removeprefix(RUNBOOK_BASE) == rule["alert"].lower(), url  # its own


def test_missed_slots_alert_on_every_reason_but_those_asked_for() -> None:
    # Given the reasons a slot is recorded MISSED for, and those nobody needs to hear
    # about (a pause, a DST gap the schedule's policy skips: the deadline sweep's own)
    reasons = {
        "paused", calendar_dst.DST_GAP_SKIP, overlap.OVERLAP_SKIP, overlap.OVERLAP_BUFFER_FULL,
        catchup.OUTSIDE_CATCHUP_WINDOW, catchup.CATCHUP_SKIP, catchup.SUPERSEDED_BY_LATEST,
        catchup.CATCHUP_CAP,
    }  # fmt: skip
    assert set(deadlines.NOT_EXPECTED) < reasons

    # When SlotsMissed's selection of cronwave_missed_slots_total is read
    expr = promql_parser.parse(rule("SlotsMissed")["expr"])
    excluded = [
        re.compile(value)
        for metric, label, op, value in label_matchers(expr)
        if metric == "cronwave_missed_slots_total" and label == "reason" and op == "MatchOp.NotRe"
    ]
    assert len(excluded) == 1, "one reason!~ matcher"

    # Then exactly those reasons are left out (a PromQL regex is anchored at both ends)
    left_out = {reason for reason in reasons if excluded[0].fullmatch(reason)}
    assert left_out == set(deadlines.NOT_EXPECTED)


def deployments() -> set[str]:
    """The app.kubernetes.io/name of every Deployment of deploy/k8s (the prod overlay,
    as ``kubectl kustomize`` renders it)."""
    return {
        document["metadata"]["labels"]["app.kubernetes.io/name"]
        for document in render("prod")
        if document["kind"] == "Deployment"
    }


def test_liveness_rules_watch_the_store_worker_and_planner_by_their_names() -> None:
    # Given the services as the manifests name them (the scrape job of each)
    services = deployments()
    assert services >= set(SERVICES)

    # When the rules on `up` are read
    on_up = {
        r["alert"]: list(label_matchers(promql_parser.parse(r["expr"])))
        for r in rules()
        if "up" in metric_names(promql_parser.parse(r["expr"]))
    }

    # Then each job they name is a service, and the store, the worker and the planner
    # each have a critical rule for "none up" and "none scraped at all"
    named: set[str] = set()
    for matchers in on_up.values():
        for metric, label, op, value in matchers:
            assert (metric, label) == ("up", "job"), (metric, label)
            named |= {value} if op == "MatchOp.Equal" else set(value.split("|"))
    assert named <= services, named - services
    for service in WATCHED:
        whole = [
            name for name, matchers in on_up.items()
            if ("up", "job", "MatchOp.Equal", service) in matchers
            and rule(name)["labels"]["severity"] == "critical"
        ]  # fmt: skip
        assert len(whole) == 1, (service, whole)
        expr = rule(whole[0])["expr"]
        assert f'absent(up{{job="{service}"}})' in expr and "== 0" in expr, expr


def test_no_rule_names_a_schedule_and_critical_ones_are_found_by_their_label() -> None:
    # When the rules' label matchers are read
    named = [
        (r["alert"], value)
        for r in rules()
        for metric, label, _, value in label_matchers(promql_parser.parse(r["expr"]))
        if label == "schedule"
    ]

    # Then none picks a schedule by name (a schedule is critical by its own label)
    assert named == []
    expr = promql_parser.parse(rule("CriticalScheduleDidNotSucceed")["expr"])
    assert "cronwave_schedule_critical" in set(metric_names(expr))
    assert type(expr).__name__ == "BinaryExpr" and str(expr.op) == "and", expr
    assert "cronwave_schedule_critical" in set(metric_names(expr.rhs))


def test_fire_lateness_is_judged_on_scheduled_slots() -> None:
    # A catch-up or backfill run is late by design, a manual run on time by definition
    found = list(label_matchers(promql_parser.parse(rule("FireLatenessHigh")["expr"])))
    assert found == [
        ("cronwave_fire_lateness_seconds_bucket", "trigger", "MatchOp.Equal", "scheduled")
    ]


def exported(text: str) -> set[str]:
    """The series names a /metrics page can have: a family's samples, and for a
    family with no sample yet (a labelled metric no label has been set on) the names
    its type gives it."""
    names = set()
    for family in text_string_to_metric_families(text):
        names |= {sample.name for sample in family.samples}
        suffixes = {
            "counter": ("_total",),
            "histogram": ("_bucket", "_count", "_sum"),
            "summary": ("_count", "_sum"),
        }.get(family.type, ("",))
        names |= {family.name + suffix for suffix in suffixes}
    return names


@pytest.fixture
def suite(make_suite: SuiteFactory) -> Iterator[Suite]:  # noqa: F811
    yield make_suite()


def page(suite: Suite, name: str) -> str:
    address = suite.procs[name].metrics_address
    assert address, f"{name} serves no metrics"
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
        return str(reply.read().decode())


def fired(suite: Suite) -> float:
    """The planner's ``cronwave_slots_fired_total{trigger="scheduled"}``."""
    for family in text_string_to_metric_families(page(suite, "cron-planner")):
        for sample in family.samples:
            scheduled = sample.labels.get("trigger") == "scheduled"
            if sample.name == "cronwave_slots_fired_total" and scheduled:
                return float(sample.value)
    return 0.0


def test_every_metric_the_rules_use_is_exported(suite: Suite) -> None:
    # Given a real suite whose planner fires a schedule due every second (the canary
    # PlannerNotFiring relies on), counted as it fires
    # and a schedule labelled critical, which the critical rule joins on
    with client_for(suite) as client:
        client.create_schedule(
            f"canary-{uuid.uuid4().hex[:8]}",
            intervals=[Interval(timedelta(seconds=1))],
            job_type="cronwave.noop",
        )
        client.create_schedule(
            f"critical-{uuid.uuid4().hex[:8]}",
            cron="0 2 * * *",
            job_type="cronwave.noop",
            labels={"critical": "true"},
        )
    eventually(lambda: fired(suite) >= 2, timeout=60, what="two slots fired and counted")
    # and what every service serves
    served: set[str] = set()
    for name in SERVICES:
        served |= exported(page(suite, name))

    # and the labels of each series served
    labels: dict[str, set[str]] = {}
    for name in SERVICES:
        for family in text_string_to_metric_families(page(suite, name)):
            for sample in family.samples:
                labels.setdefault(sample.name, set()).update(sample.labels)

    # When the rules' expressions are read
    parsed = [promql_parser.parse(rule["expr"]) for rule in rules()]
    used = {name for expr in parsed for name in metric_names(expr)} - PROMETHEUS_OWN

    # Then each metric they use is served, and none is waited for that already is
    assert {"cronwave_leader", "cronwave_slots_fired_total"} <= used  # the walk works
    landed = sorted(name for name in EXPECTED_SOON if name in served)
    assert not landed, f"{landed} is exported now: delete it from EXPECTED_SOON"
    missing = sorted(used - served - set(EXPECTED_SOON))
    assert not missing, f"the rules use metrics no service exports: {missing}"
    # and each label they match on is one the metric carries (where it has a sample:
    # the canary's slots give the lateness and the fired counter theirs)
    assert "trigger" in labels["cronwave_fire_lateness_seconds_bucket"]
    assert labels["cronwave_schedule_critical"] == {"schedule"}
    unknown = sorted(
        (metric, label)
        for expr in parsed
        for metric, label, _, _ in label_matchers(expr)
        if metric in labels and label not in labels[metric]
    )
    assert not unknown, f"the rules match labels the metrics do not carry: {unknown}"
