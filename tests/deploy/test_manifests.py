"""Every overlay of deploy/k8s renders (``kubectl kustomize``), every object it renders
is valid against the Kubernetes 1.31 schemas (offline, ``kubernetes-validate``; the
custom resources, cert-manager's and the Prometheus Operator's, have no schema there
and are checked here by their fields), checkov finds nothing that is not skipped with
its reason beside it, and the manifests say what a cluster needs: pinned images,
certificates with the identities the rules check, probes that ask the gRPC health
service, disruption budgets, a migration before the stores, graceful stops sized to
their grace."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from cronwave_core.security.identity import service_identities
from cronwave_core.security.pki import service_uri
from tests.deploy.checkov_venv import checkov
from tests.deploy.manifests import (
    OVERLAYS,
    REPO,
    of_kind,
    pod_spec,
    render,
    services_of,
    workloads,
)

KUBERNETES = "1.31.0"
#: Kinds with no schema in kubernetes-validate (custom resources).
CUSTOM = {"Certificate", "Issuer", "PrometheusRule"}
#: The checks skipped in the manifests' annotations, each with its reason in a comment
#: beside it: an image by digest (set at release time), secrets as files (cronwave reads
#: its URLs from the environment).
JUSTIFIED = {"CKV_K8S_43", "CKV_K8S_35"}
DURATION = re.compile(r"^(\d+)s$")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_is_valid_against_the_kubernetes_schemas(overlay: str) -> None:
    unchecked = set()
    for doc in render(overlay):
        try:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            unchecked.add(doc["kind"])
        except kubernetes_validate.ValidationError as exc:
            name = f"{doc['kind']}/{doc['metadata']['name']}"
            pytest.fail(f"{overlay}: {name}: {exc.message} at {list(exc.path)}")
    assert unchecked == CUSTOM, unchecked


@pytest.fixture(scope="module")
def checkov_results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One checkov run over every overlay as rendered (its start-up is most of its time),
    its results by overlay."""
    folder = tmp_path_factory.mktemp("checkov")
    files = []
    for overlay in OVERLAYS:
        rendered = folder / f"{overlay}.yaml"
        rendered.write_text(yaml.safe_dump_all(render(overlay)), encoding="utf-8")
        files += ["-f", str(rendered)]
    done = subprocess.run(
        [str(checkov()), *files, "--framework", "kubernetes", "--skip-download", "--compact",
         "-o", "json"],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert report["summary"]["parsing_errors"] == 0, report["summary"]
    by_overlay: dict[str, dict[str, list[Any]]] = {
        overlay: {"passed": [], "failed": [], "skipped": []} for overlay in OVERLAYS
    }
    for outcome in ("passed", "failed", "skipped"):
        for check in report["results"][f"{outcome}_checks"]:
            overlay = Path(check["file_path"]).stem
            by_overlay[overlay][outcome].append(check)
    yield by_overlay


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_checkov_finds_nothing_not_skipped_with_a_reason(
    overlay: str, checkov_results: dict[str, dict[str, list[Any]]]
) -> None:
    results = checkov_results[overlay]
    failed = [(f["check_id"], f["resource"]) for f in results["failed"]]
    assert failed == [], failed
    assert results["passed"]
    # and each skip is one of those the manifests give a reason for, beside it
    skipped = {(s["check_id"], s["check_result"]["suppress_comment"]) for s in results["skipped"]}
    assert {check for check, _ in skipped} <= JUSTIFIED, skipped
    assert all(reason.strip() for _, reason in skipped), skipped


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_is_in_the_namespace_and_every_image_pinned(overlay: str) -> None:
    namespaces = of_kind(overlay, "Namespace")
    assert set(namespaces) == {"cronwave"}
    for doc in render(overlay):
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "cronwave", doc["metadata"]["name"]
    for name, workload in workloads(overlay).items():
        pod = pod_spec(workload)
        for container in pod["containers"] + pod.get("initContainers", []):
            image = container["image"]
            registry, _, rest = image.partition("/")
            assert "." in registry and rest, f"{name}: {image} names no registry"
            tag = rest.rpartition(":")[2] if ":" in rest else ""
            assert "@sha256:" in image or (tag and tag != "latest"), f"{name}: {image}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_service_identity_has_its_certificate(overlay: str) -> None:
    certificates = of_kind(overlay, "Certificate")
    issuers = of_kind(overlay, "Issuer")
    for name in services_of(overlay):
        assert name in service_identities()
        spec = certificates[f"cronwave-{name}"]["spec"]
        assert spec["secretName"] == f"cronwave-{name}-tls"
        assert spec["uris"] == [service_uri(name)]
        assert {name, "localhost"} <= set(spec["dnsNames"]) and spec["ipAddresses"] == ["127.0.0.1"]
        assert set(spec["usages"]) == {"server auth", "client auth"}
        assert spec["issuerRef"] == {
            "name": "cronwave-ca",
            "kind": "Issuer",
            "group": "cert-manager.io",
        }
    # and the CA Issuer signs with the key pair the overlay provides: dev's own root,
    # made by its self-signed Issuer; prod's from a Secret you create
    assert issuers["cronwave-ca"]["spec"] == {"ca": {"secretName": "cronwave-ca-keypair"}}
    roots = {n: c["spec"] for n, c in certificates.items() if c["spec"].get("isCA")}
    if overlay == "dev":
        assert [r["secretName"] for r in roots.values()] == ["cronwave-ca-keypair"]
        assert issuers["cronwave-selfsigned"]["spec"] == {"selfSigned": {}}
    else:
        assert roots == {} and set(issuers) == {"cronwave-ca"}


def probe_command(container: dict[str, Any], probe: str) -> list[str]:
    return list(container[probe]["exec"]["command"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_ask_the_grpc_health_service_with_the_pods_certificate(overlay: str) -> None:
    for name, port in services_of(overlay).items():
        (container,) = pod_spec(of_kind(overlay, "Deployment")[name])["containers"]
        if name == "console":  # HTTP, its own /healthz
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
            continue
        address = f"localhost:{port}"
        assert probe_command(container, "startupProbe") == ["cronwave-probe", address, "--ready"]
        assert probe_command(container, "readinessProbe") == ["cronwave-probe", address, "--ready"]
        live = probe_command(container, "livenessProbe")
        assert live[:3] == ["cronwave-probe", address, "--live"], live
        assert container["livenessProbe"]["timeoutSeconds"] > float(
            live[live.index("--timeout") + 1]
        )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_service_has_a_disruption_budget_and_stops_within_its_grace(overlay: str) -> None:
    budgets = of_kind(overlay, "PodDisruptionBudget")
    for name, deployment in of_kind(overlay, "Deployment").items():
        assert budgets[name]["spec"]["selector"] == deployment["spec"]["selector"]
        assert budgets[name]["spec"]["maxUnavailable"] == 1
        pod = pod_spec(deployment)
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        grace = int(DURATION.fullmatch(env["CRONWAVE_GRACE"]).group(1))  # type: ignore[union-attr]
        kill = env.get("CRONWAVE_JOB_KILL_GRACE")
        # a worker's jobs: grace, then the kill grace, then its own exit (runs.md)
        needed = grace + (int(DURATION.fullmatch(kill).group(1)) + 2 if kill else 0)  # type: ignore[union-attr]
        assert pod["terminationGracePeriodSeconds"] > needed, name
    assert of_kind(overlay, "Deployment")["leader-election"]["spec"]["replicas"] >= 2


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_stores_start_after_the_migration_job(overlay: str) -> None:
    job = of_kind(overlay, "Job")["workflow-store-migrate"]
    (migrate,) = pod_spec(job)["containers"]
    assert "migrate(" in migrate["args"][0]
    (wait,) = pod_spec(of_kind(overlay, "Deployment")["workflow-store"])["initContainers"]
    assert "newest_revision()" in wait["args"][0] and "alembic_version" in wait["args"][0]
    assert migrate["image"] == wait["image"]


def test_the_prometheus_rule_is_the_alerts_file() -> None:
    alerts = yaml.safe_load((REPO / "deploy" / "prometheus" / "alerts.yaml").read_text())
    for overlay in OVERLAYS:
        assert of_kind(overlay, "PrometheusRule")["cronwave"]["spec"] == alerts
