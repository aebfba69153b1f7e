"""The Kubernetes manifests as a cluster receives them: each overlay of deploy/k8s
rendered by ``kubectl kustomize``. kubectl is required: without it the tests that use
these fail (a skip would hide that the manifests were never rendered)."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
OVERLAYS = ("dev", "prod")
#: Every workload's pods run one of these (the image's processes), by their names.
SERVICES = {
    "workflow-store": 7401,
    "leader-election": 7402,
    "dispatcher": 7403,
    "cron-planner": 7404,
    "worker": 7405,
    "console": 7407,
}
#: The dev overlay's own: the billing demo's payment gateway.
GATEWAY = {"payment-gateway": 7406}
WORKLOADS = ("Deployment", "StatefulSet", "Job")


def kubectl() -> str:
    found = shutil.which("kubectl")
    assert found, (
        "kubectl is not on PATH: the tests of deploy/k8s render each overlay with "
        "`kubectl kustomize` (install kubectl, e.g. Debian's package, and run again)"
    )
    return found


@functools.cache
def render(overlay: str) -> tuple[dict[str, Any], ...]:
    """Every object of ``deploy/k8s/overlays/<overlay>``, as ``kubectl kustomize``
    renders it."""
    done = subprocess.run(
        [kubectl(), "kustomize", str(K8S / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"kubectl kustomize overlays/{overlay}: {done.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def of_kind(overlay: str, kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in render(overlay) if doc["kind"] == kind}


def services_of(overlay: str) -> dict[str, int]:
    return {**SERVICES, **(GATEWAY if overlay == "dev" else {})}


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def workloads(overlay: str) -> dict[str, dict[str, Any]]:
    """Every Deployment, StatefulSet and Job, by name."""
    return {doc["metadata"]["name"]: doc for doc in render(overlay) if doc["kind"] in WORKLOADS}
