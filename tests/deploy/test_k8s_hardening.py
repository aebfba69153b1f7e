"""The Kubernetes manifests (deploy/k8s) and the image (deploy/Dockerfile) are
hardened: every container runs as a non-root user with a read-only root filesystem,
no privilege escalation, no capabilities and the runtime's seccomp profile; only the
workflow-store is given the scheduler's database Secret; every Deployment mounts its
own TLS Secret; and the network policies deny everything but the hops of the design."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
SERVICES = {
    "workflow-store": 7401,
    "leader-election": 7402,
    "dispatcher": 7403,
    "cron-planner": 7404,
    "worker": 7405,
    "console": 7407,
}
BACKENDS = {"redis": 6379, "postgres": 5432}
#: Who calls whom (docs/architecture.md; docs/operations/deployment.md, "Network policies").
HOPS = {
    ("cron-planner", "leader-election"),
    ("cron-planner", "workflow-store"),
    ("cron-planner", "dispatcher"),
    ("dispatcher", "workflow-store"),
    ("worker", "workflow-store"),
    ("leader-election", "workflow-store"),
    ("cron-planner", "redis"),
    ("dispatcher", "redis"),
    ("worker", "redis"),
    ("leader-election", "redis"),
    ("workflow-store", "postgres"),
    ("worker", "postgres"),  # the billing job's own database
}
TLS_ENV = {
    "CRONWAVE_TLS_CA": "/etc/cronwave/tls/ca.crt",
    "CRONWAVE_TLS_CERT": "/etc/cronwave/tls/tls.crt",
    "CRONWAVE_TLS_KEY": "/etc/cronwave/tls/tls.key",
}


def documents() -> Iterator[dict[str, Any]]:
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc:
                yield doc


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for doc in documents() if doc["kind"] == kind]


def deployments() -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in of_kind("Deployment")}


def test_every_service_has_a_deployment() -> None:
    assert set(deployments()) == set(SERVICES)


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_container_is_locked_down(name: str) -> None:
    pod = deployments()[name]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    containers = pod["containers"] + pod.get("initContainers", [])
    assert containers
    for container in containers:
        context = container["securityContext"]
        assert context["runAsNonRoot"] is True, container["name"]
        assert context["allowPrivilegeEscalation"] is False, container["name"]
        assert context["readOnlyRootFilesystem"] is True, container["name"]
        assert context["capabilities"] == {"drop": ["ALL"]}, container["name"]
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, container["name"]
        # what a read-only root leaves writable: the data dir and /tmp, on emptyDirs
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        for path in ("/var/lib/cronwave", "/tmp"):
            assert "emptyDir" in volumes[mounts[path]], (name, path)


def env_of(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for c in deployment["spec"]["template"]["spec"]["containers"] for e in c["env"]]


def secrets_referenced(deployment: dict[str, Any]) -> set[str]:
    pod = deployment["spec"]["template"]["spec"]
    names = set()
    for container in pod["containers"]:
        for source in container.get("envFrom", []):
            if "secretRef" in source:
                names.add(source["secretRef"]["name"])
        for item in container.get("env", []):
            ref = item.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                names.add(ref["name"])
    for volume in pod.get("volumes", []):
        if "secret" in volume:
            names.add(volume["secret"]["secretName"])
    return names


def test_only_the_store_gets_the_database_secret() -> None:
    # Given every Deployment
    found = {name: secrets_referenced(d) for name, d in deployments().items()}

    # Then the scheduler's database Secret is the store's alone, as a secretKeyRef
    assert {name for name, refs in found.items() if "cronwave-database" in refs} == {
        "workflow-store"
    }
    store_env = {e["name"]: e for e in env_of(deployments()["workflow-store"])}
    assert store_env["CRONWAVE_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "cronwave-database",
        "key": "database-url",
    }
    # and no ConfigMap carries a database URL
    for config_map in of_kind("ConfigMap"):
        assert not any("DATABASE_URL" in key for key in config_map["data"]), config_map
        assert not any("postgresql" in str(v) for v in config_map["data"].values())


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_deployment_mounts_its_tls_secret(name: str) -> None:
    deployment = deployments()[name]
    pod = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"] if "secret" in v}
    tls = [v for v in volumes.values() if v["secret"]["secretName"] == f"cronwave-{name}-tls"]
    assert len(tls) == 1, volumes
    for container in pod["containers"]:
        mount = next(m for m in container["volumeMounts"] if m["name"] == tls[0]["name"])
        assert mount["mountPath"] == "/etc/cronwave/tls" and mount["readOnly"] is True
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert {k: env.get(k) for k in TLS_ENV} == TLS_ENV


def policies() -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in of_kind("NetworkPolicy")}


def peer_names(peers: list[dict[str, Any]]) -> set[str]:
    return {
        p["podSelector"]["matchLabels"].get("app.kubernetes.io/name", "")
        for p in peers
        if "podSelector" in p and "namespaceSelector" not in p
    }


def rules(name: str, direction: str) -> set[tuple[str, int]]:
    """(peer, port) pairs that ``name``'s pods may reach (egress) or be reached by
    (ingress), over every policy that selects them; peers are in-namespace pods."""
    found = set()
    side = "to" if direction == "egress" else "from"
    for policy in policies().values():
        selector = policy["spec"]["podSelector"].get("matchLabels", {})
        if selector and selector.get("app.kubernetes.io/name") != name:
            continue
        for rule in policy["spec"].get(direction, []):
            for peer in peer_names(rule.get(side, [])):
                for port in rule.get("ports", []):
                    found.add((peer, port["port"]))
    return found


def test_the_namespace_denies_everything_by_default() -> None:
    deny = [
        p
        for p in policies().values()
        if p["spec"]["podSelector"] == {}
        and set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}
        and not p["spec"].get("ingress")
        and not p["spec"].get("egress")
    ]
    assert len(deny) == 1


def test_dns_is_the_one_egress_every_pod_has() -> None:
    everyone = [p for p in policies().values() if p["spec"]["podSelector"] == {}]
    egress = [r for p in everyone for r in p["spec"].get("egress", [])]
    assert {(port["protocol"], port["port"]) for r in egress for port in r["ports"]} == {
        ("UDP", 53),
        ("TCP", 53),
    }
    assert not [r for p in everyone for r in p["spec"].get("ingress", [])]


def test_each_hop_of_the_design_is_allowed_at_both_ends_and_no_other() -> None:
    ports = {**SERVICES, **BACKENDS}
    # Given the policies, the connections between cronwave's pods and its backends
    allowed_out = {
        (name, peer)
        for name in SERVICES
        for peer, port in rules(name, "egress")
        if peer in ports and ports[peer] == port
    }
    allowed_in = {
        (peer, name)
        for name in (*SERVICES, *BACKENDS)
        for peer, port in rules(name, "ingress")
        if peer in SERVICES and port == ports[name]
    }

    # Then both ends of every hop allow it, and nothing else is allowed between them
    assert allowed_out == HOPS
    assert allowed_in == HOPS


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_prometheus_may_scrape_the_metrics_port_only(name: str) -> None:
    policy = policies()[name]
    scrapes = [
        rule
        for rule in policy["spec"]["ingress"]
        if any("namespaceSelector" in peer for peer in rule.get("from", []))
    ]
    assert [port["port"] for rule in scrapes for port in rule["ports"]] == [9464]
    assert scrapes[0]["from"][0]["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "prometheus"
    }


def test_the_image_runs_as_a_non_root_user() -> None:
    lines = (REPO / "deploy" / "Dockerfile").read_text(encoding="utf-8").splitlines()
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users, "the image sets no USER"
    assert users[-1].split(":")[0] not in {"0", "root"}


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_no_probe_needs_grpc_without_a_certificate(name: str) -> None:
    """Kubernetes' gRPC probe cannot present a client certificate, which every
    service requires: probes ask the process's HTTP endpoint instead."""
    for container in deployments()[name]["spec"]["template"]["spec"]["containers"]:
        for probe in ("readinessProbe", "livenessProbe"):
            assert "grpc" not in container.get(probe, {}), (name, probe)
            assert "httpGet" in container[probe], (name, probe)
