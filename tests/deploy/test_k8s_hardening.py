"""The Kubernetes manifests (each overlay of deploy/k8s, as ``kubectl kustomize``
renders it) and the image (deploy/Dockerfile) are hardened: every container runs as a
non-root user with a read-only root filesystem, no privilege escalation, no
capabilities and the runtime's seccomp profile; only the workflow-store (and its
migration Job) is given the scheduler's database Secret; every service mounts its own
TLS Secret; and the network policies deny everything but the hops of the design."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.manifests import (
    OVERLAYS,
    REPO,
    of_kind,
    pod_spec,
    render,
    services_of,
    workloads,
)

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
#: The dev overlay's: the billing job charges its payment gateway.
DEV_HOPS = {("worker", "payment-gateway")}
TLS_ENV = {
    "CRONWAVE_TLS_CA": "/etc/cronwave/tls/ca.crt",
    "CRONWAVE_TLS_CERT": "/etc/cronwave/tls/tls.crt",
    "CRONWAVE_TLS_KEY": "/etc/cronwave/tls/tls.key",
}
CASES = [(overlay, name) for overlay in OVERLAYS for name in sorted(services_of(overlay))]


def deployments(overlay: str) -> dict[str, dict[str, Any]]:
    return of_kind(overlay, "Deployment")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_service_has_a_deployment(overlay: str) -> None:
    assert set(deployments(overlay)) == set(services_of(overlay))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_is_locked_down(overlay: str) -> None:
    for name, workload in workloads(overlay).items():
        pod = pod_spec(workload)
        assert pod["automountServiceAccountToken"] is False, name
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] >= 10000, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        containers = pod["containers"] + pod.get("initContainers", [])
        assert containers
        for container in containers:
            context = container["securityContext"]
            assert context["runAsNonRoot"] is True, (name, container["name"])
            assert context["allowPrivilegeEscalation"] is False, (name, container["name"])
            assert context["readOnlyRootFilesystem"] is True, (name, container["name"])
            assert context["capabilities"] == {"drop": ["ALL"]}, (name, container["name"])
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, name


@pytest.mark.parametrize(("overlay", "name"), CASES)
def test_what_a_read_only_root_leaves_writable_is_on_empty_dirs(overlay: str, name: str) -> None:
    pod = pod_spec(deployments(overlay)[name])
    volumes = {v["name"]: v for v in pod["volumes"]}
    for container in pod["containers"] + pod.get("initContainers", []):
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        for path in ("/var/lib/cronwave", "/tmp"):
            assert "emptyDir" in volumes[mounts[path]], (name, path)


def secrets_referenced(workload: dict[str, Any]) -> set[str]:
    pod = pod_spec(workload)
    names = set()
    for container in pod["containers"] + pod.get("initContainers", []):
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


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_store_gets_the_database_secret(overlay: str) -> None:
    # Given every workload
    found = {name: secrets_referenced(w) for name, w in workloads(overlay).items()}

    # Then the scheduler's database Secret is the store's and its migration Job's alone,
    # as a secretKeyRef
    assert {name for name, refs in found.items() if "cronwave-database" in refs} == {
        "workflow-store",
        "workflow-store-migrate",
    }
    store_env = {e["name"]: e for e in env_of(deployments(overlay)["workflow-store"])}
    assert store_env["CRONWAVE_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "cronwave-database",
        "key": "database-url",
    }
    # and Redis's URL is given to the four services that use Redis, and no other
    assert {name for name, refs in found.items() if "cronwave-redis" in refs} == {
        "cron-planner",
        "dispatcher",
        "leader-election",
        "worker",
    }
    # and no ConfigMap carries a database or Redis URL
    for config_map in of_kind(overlay, "ConfigMap").values():
        data = config_map["data"]
        assert not any("DATABASE_URL" in key or "REDIS_URL" in key for key in data), data
        assert not any("postgresql" in str(v) or "redis://" in str(v) for v in data.values())


def env_of(workload: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for c in pod_spec(workload)["containers"] for e in c["env"]]


@pytest.mark.parametrize(("overlay", "name"), CASES)
def test_every_deployment_mounts_its_tls_secret(overlay: str, name: str) -> None:
    pod = pod_spec(deployments(overlay)[name])
    volumes = {v["name"]: v for v in pod["volumes"] if "secret" in v}
    tls = [v for v in volumes.values() if v["secret"]["secretName"] == f"cronwave-{name}-tls"]
    assert len(tls) == 1, volumes
    for container in pod["containers"]:
        mount = next(m for m in container["volumeMounts"] if m["name"] == tls[0]["name"])
        assert mount["mountPath"] == "/etc/cronwave/tls" and mount["readOnly"] is True
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert {k: env.get(k) for k in TLS_ENV} == TLS_ENV


def policies(overlay: str) -> dict[str, dict[str, Any]]:
    return of_kind(overlay, "NetworkPolicy")


def selected(policy: dict[str, Any]) -> set[str] | None:
    """The app.kubernetes.io/name values a policy's podSelector picks (None: every pod)."""
    selector = policy["spec"]["podSelector"]
    if not selector:
        return None
    names = set()
    if "app.kubernetes.io/name" in selector.get("matchLabels", {}):
        names.add(selector["matchLabels"]["app.kubernetes.io/name"])
    for expression in selector.get("matchExpressions", []):
        assert expression["key"] == "app.kubernetes.io/name" and expression["operator"] == "In"
        names |= set(expression["values"])
    return names


def peer_names(peers: list[dict[str, Any]]) -> set[str]:
    return {
        p["podSelector"]["matchLabels"].get("app.kubernetes.io/name", "")
        for p in peers
        if "podSelector" in p and "namespaceSelector" not in p
    }


def rules(overlay: str, name: str, direction: str) -> set[tuple[str, int]]:
    """(peer, port) pairs that ``name``'s pods may reach (egress) or be reached by
    (ingress), over every policy that selects them; peers are in-namespace pods."""
    found = set()
    side = "to" if direction == "egress" else "from"
    for policy in policies(overlay).values():
        names = selected(policy)
        if names is not None and name not in names:
            continue
        for rule in policy["spec"].get(direction, []):
            for peer in peer_names(rule.get(side, [])):
                for port in rule.get("ports", []):
                    found.add((peer, port["port"]))
    return found


def external(overlay: str, port: int) -> set[str]:
    """The pods a policy lets reach ``port`` at an address outside the cluster (ipBlock)."""
    found: set[str] = set()
    for policy in policies(overlay).values():
        for rule in policy["spec"].get("egress", []):
            outside = any("ipBlock" in peer for peer in rule.get("to", []))
            if outside and port in {p["port"] for p in rule["ports"]}:
                found |= selected(policy) or {"*"}
    return found


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_namespace_denies_everything_by_default(overlay: str) -> None:
    deny = [
        p
        for p in policies(overlay).values()
        if p["spec"]["podSelector"] == {}
        and set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}
        and not p["spec"].get("ingress")
        and not p["spec"].get("egress")
    ]
    assert len(deny) == 1


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_dns_is_the_one_egress_every_pod_has(overlay: str) -> None:
    everyone = [p for p in policies(overlay).values() if p["spec"]["podSelector"] == {}]
    egress = [r for p in everyone for r in p["spec"].get("egress", [])]
    assert {(port["protocol"], port["port"]) for r in egress for port in r["ports"]} == {
        ("UDP", 53),
        ("TCP", 53),
    }
    assert not [r for p in everyone for r in p["spec"].get("ingress", [])]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_hop_of_the_design_is_allowed_at_both_ends_and_no_other(overlay: str) -> None:
    services = services_of(overlay)
    ports = {**services, **BACKENDS}
    hops = HOPS | (DEV_HOPS if overlay == "dev" else set())
    # Given the policies, the connections between cronwave's pods and its backends
    allowed_out = {
        (name, peer)
        for name in services
        for peer, port in rules(overlay, name, "egress")
        if peer in ports and ports[peer] == port
    }
    allowed_in = {
        (peer, name)
        for name in ports
        for peer, port in rules(overlay, name, "ingress")
        if peer in services and port == ports[name]
    }

    # Then both ends of every hop allow it, and nothing else is allowed between them
    assert allowed_out == hops
    if overlay == "dev":  # PostgreSQL and Redis are pods of the overlay
        assert allowed_in == hops
        assert external(overlay, 5432) == external(overlay, 6379) == set()
    else:  # they are outside the cluster: reached by their callers alone, as ipBlocks
        assert allowed_in == {(a, b) for a, b in hops if b not in BACKENDS}
        assert external(overlay, 5432) == {"workflow-store", "workflow-store-migrate", "worker"}
        callers = {caller for caller, callee in hops if callee == "redis"}
        assert external(overlay, 6379) == callers


@pytest.mark.parametrize(("overlay", "name"), CASES)
def test_prometheus_may_scrape_the_metrics_port_only(overlay: str, name: str) -> None:
    policy = policies(overlay)[name]
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


def test_both_overlays_render() -> None:
    assert all(render(overlay) for overlay in OVERLAYS)
