"""The Tiltfile, run both ways without Tilt (which cannot be installed here): a
Starlark interpreter (starlark-pyo3, the Rust implementation Tilt's dialect follows)
executes it with a stub of Tilt's API that records each call. The stub stands in
for Tilt, which is outside the product; what it records is judged against the real
manifests and the real commands, and the local mode's commands are started here as a
working suite, as ``tilt up -- --local`` would start them."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import starlark as sl

from cronwave_core.suite import own_port_range
from tests.deploy.manifests import of_kind, workloads
from tests.harness.processes import ProcessTable
from tests.helpers import eventually

REPO = Path(__file__).resolve().parents[2]
TILTFILE = REPO / "Tiltfile"
SERVICES = {
    "workflow-store", "leader-election", "dispatcher", "cron-planner", "worker",
    "payment-gateway", "console",
}  # fmt: skip


@dataclass
class Tilt:
    """What the Tiltfile asked of Tilt, call by call."""

    args: dict[str, Any]
    env: dict[str, str]
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)

    def record(self, name: str, result: Any = None) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return result if result is not None else {"tilt": name, "args": list(args), **kwargs}

        return call

    def of(self, name: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        return [(a, k) for n, a, k in self.calls if n == name]


PRELUDE = """
config = struct(define_bool = _define_bool, parse = _parse)
os = struct(getenv = _getenv)
"""


def run_tiltfile(args: dict[str, Any], env: dict[str, str]) -> Tilt:
    tilt = Tilt(args, env)
    module = sl.Module()
    module.add_callable("_define_bool", tilt.record("config.define_bool", True))
    module.add_callable("_parse", lambda: dict(args))
    module.add_callable("_getenv", lambda name, default="": env.get(name, default))
    for name in ("docker_build", "k8s_yaml", "kustomize", "k8s_resource", "local_resource",
                 "probe", "exec_action", "http_get_action"):  # fmt: skip
        module.add_callable(name, tilt.record(name))

    def load(path: str) -> sl.FrozenModule:
        assert path == "ext://cert_manager", path
        ext = sl.Module()
        ext.add_callable("deploy_cert_manager", tilt.record("deploy_cert_manager", True))
        return ext.freeze()

    dialect = sl.Dialect.extended()
    globals_ = sl.Globals.extended_by([sl.LibraryExtension.StructType])
    sl.eval(module, sl.parse("prelude", PRELUDE, dialect), globals_)
    text = TILTFILE.read_text(encoding="utf-8")
    sl.eval(module, sl.parse("Tiltfile", text, dialect), globals_, sl.FileLoader(load))
    return tilt


def test_tilt_up_builds_the_image_and_deploys_the_dev_overlay() -> None:
    tilt = run_tiltfile({}, {})
    # the image the overlay's workloads name is the one built
    images = {
        c["image"].rpartition(":")[0]
        for name, w in workloads("dev").items()
        if name not in ("postgres", "redis")
        for c in w["spec"]["template"]["spec"]["containers"]
    }
    ((built, context), options) = tilt.of("docker_build")[0]
    assert {built} == images and context == "."
    assert (REPO / options["dockerfile"]).is_file()
    # the dev overlay is deployed, with cert-manager for its TLS Secrets
    assert [a for a, _ in tilt.of("kustomize")] == [("deploy/k8s/overlays/dev",)]
    assert len(tilt.of("deploy_cert_manager")) == 1
    # and every workload of it is a resource, every object it groups is rendered
    resources = {a[0] if a else k["new_name"]: k for a, k in tilt.of("k8s_resource")}
    assert set(workloads("dev")) <= set(resources)
    assert set(resources) >= SERVICES
    rendered = {
        f"{name}:{kind.lower()}"
        for kind in ("Certificate", "Issuer")
        for name in of_kind("dev", kind)
    }
    assert set(resources["cronwave-tls"]["objects"]) == rendered
    for name, options in resources.items():
        assert set(options.get("resource_deps", [])) <= set(resources), name


def free_block(size: int) -> int:
    """The first port of ``size`` free ports in a row, in this process's own range."""
    lowest, highest = own_port_range()
    for start in range(lowest, highest - size, size):
        try:
            socks = []
            for port in range(start, start + size):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return start
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no block of free ports in this process's range")


def local_resources(tilt: Tilt) -> dict[str, dict[str, Any]]:
    return {a[0]: k for a, k in tilt.of("local_resource")}


def order(resources: dict[str, dict[str, Any]]) -> list[str]:
    """The resources, each after those it depends on."""
    done: list[str] = []
    for _ in range(len(resources)):
        for name, options in resources.items():
            if name not in done and set(options.get("resource_deps", [])) <= set(done):
                done.append(name)
    assert set(done) == set(resources), resources
    return done


def ready(options: dict[str, Any]) -> bool:
    action = options["readiness_probe"]
    if "exec" in action:
        argv = action["exec"]["args"][0]
        return subprocess.run(argv, capture_output=True, timeout=30, check=False).returncode == 0
    http = action["http_get"]
    url = f"http://{http['host']}:{http['port']}{http['path']}"
    done = subprocess.run(["curl", "-fsS", url], capture_output=True, timeout=30, check=False)
    return done.returncode == 0


@pytest.fixture
def table() -> Iterator[ProcessTable]:
    table = ProcessTable("the Tiltfile's local resources")
    yield table

    def stop() -> None:
        for pid in table.live():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    table.close([stop])


@pytest.mark.slow
def test_tilt_up_local_runs_every_service_as_a_working_suite(
    tmp_path: Path, table: ProcessTable
) -> None:
    # Given the local mode, on ports of this test's own range and a data dir of its own
    base = free_block(20)
    env = {
        "CRONWAVE_TILT_PORT_BASE": str(base),
        "CRONWAVE_TILT_DATA_DIR": str(tmp_path / "tilt"),
        "CRONWAVE_TILT_BIN": str(REPO / ".venv" / "bin"),
    }
    tilt = run_tiltfile({"local": True}, env)
    resources = local_resources(tilt)
    assert set(resources) >= SERVICES
    # each service is served by a real command, and has a readiness probe
    for name in SERVICES:
        argv = resources[name]["serve_cmd"]
        assert Path(argv[0]).name == name and os.access(argv[0], os.X_OK), argv
        assert resources[name]["readiness_probe"]

    # When each resource runs as Tilt runs it: its cmd to the end, its serve_cmd in
    # the background until its readiness probe passes, after those it depends on
    for name in order(resources):
        options = resources[name]
        if "cmd" in options:
            subprocess.run(options["cmd"], check=True, timeout=120, cwd=REPO)
        if "serve_cmd" in options:
            log = (tmp_path / f"{name}.log").open("wb")
            table.spawn(
                options["serve_cmd"],
                env={**os.environ, **options.get("serve_env", {})},
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            eventually(lambda o=options: ready(o), timeout=90, interval=0.5, what=f"{name} ready")

    # Then every service serves at once (each answers its readiness probe)
    assert all(ready(resources[name]) for name in SERVICES)
