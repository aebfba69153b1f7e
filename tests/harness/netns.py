"""A service process in a network namespace of its own, joined to this machine by a
veth pair: a link a test cuts for real (``ip link set <veth> down``) and heals.

Root only (``ip netns add``). The pair is a private link inside this machine: the
host's end holds ``10.201.X.Y+1/30``, the namespace's end ``+2``. The suite's services
listen on loopback only, so for each one the namespaced process calls, a ``TcpProxy``
listens on the host's end of the veth, on the service's own port, and forwards to
loopback; the namespaced process's own server listens on its end and is reached from
loopback through one more proxy. Every byte between the process and the suite crosses
the veth: with the link down nothing gets through, in either direction.

TLS: a channel checks the server's certificate against the name it dialled, and a
service's certificate names it (``workflow-store``, ``localhost``, ``127.0.0.1``), never
a veth's address. The namespace gets its own ``/etc/hosts`` (``ip netns exec``
bind-mounts ``/etc/netns/<ns>/hosts`` over it), which gives the host's end the
services' names, and the process dials ``leader-election:PORT`` as a pod dials a
Kubernetes service: the certificate check is the ordinary one, nothing is overridden.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from cronwave_bench.faults import TcpProxy
from cronwave_core.suite import Proc, Suite, free_port
from cronwave_core.suite_health import wait_healthy
from tests.harness.processes import raise_all, run_all
from tests.harness.suites import TrackedSuite

#: The variable of each service's address, and the gRPC service its health names.
ADDR_VARS = {
    "workflow-store": "CRONWAVE_STORE_ADDR",
    "leader-election": "CRONWAVE_LEADER_ADDR",
    "dispatcher": "CRONWAVE_DISPATCHER_ADDR",
    "cron-planner": "CRONWAVE_PLANNER_ADDR",
    "worker": "CRONWAVE_WORKER_ADDR",
}
HEALTH = {
    "cron-planner": "cronwave.v1.CronPlannerService",
    "worker": "cronwave.v1.WorkerService",
}
MODULES = {"cron-planner": "cron_planner", "worker": "worker"}
_NETNS_ETC = Path("/etc/netns")
#: 10.201.0.0/16 in /30s: 16384 links; a test takes the first one free from a place
#: drawn from its pid, so the tests' parallel processes do not meet.
_BLOCK = ipaddress.ip_network("10.201.0.0/16")
_LINKS = _BLOCK.num_addresses // 4
_counter = iter(range(1_000_000))
_NAME = re.compile(r"cw(?P<pid>\d+)x\d+")
_lock = threading.Lock()


def ip(*args: str) -> str:
    """Run ``ip ARGS``; its output, or an AssertionError with its error text."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=False)
    if done.returncode != 0:
        raise AssertionError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _taken_addresses() -> set[str]:
    return {
        line.split()[3].split("/")[0]
        for line in ip("-o", "-4", "addr", "show").splitlines()
        if len(line.split()) > 3
    }


class NetNamespace:
    """One namespace, its veth pair, the proxies across it and the processes in it."""

    def __init__(self, suite: Suite) -> None:
        if not isinstance(suite, TrackedSuite):
            raise TypeError("a namespaced process is tracked in a TrackedSuite's table")
        self.suite = suite
        with _lock:
            n = next(_counter)
        tag = f"{os.getpid()}x{n}"  # pid_max is at most 2**22: 7 digits
        self.name = f"cw{tag}"
        self.host_link, self.ns_link = f"cwh{tag}", f"cwn{tag}"  # at most 15 characters
        self.host_ip, self.ns_ip = self._pick_link(n)
        self.proxies: list[TcpProxy] = []
        self._forwarded: set[int] = set()
        self.procs: list[Proc] = []
        self._made: list[str] = []  # what close() undoes: "netns", "link", "etc"
        sweep_leftovers()
        self._create()

    def _pick_link(self, n: int) -> tuple[str, str]:
        taken = _taken_addresses()
        start = (os.getpid() * 31 + n * 7) % _LINKS
        for offset in range(_LINKS):
            base = int(_BLOCK.network_address) + ((start + offset) % _LINKS) * 4
            host, ns = str(ipaddress.ip_address(base + 1)), str(ipaddress.ip_address(base + 2))
            if host not in taken and ns not in taken:
                return host, ns
        raise AssertionError(f"no free /30 left in {_BLOCK}")

    def _create(self) -> None:
        try:
            ip("netns", "add", self.name)
            self._made.append("netns")
            ip("link", "add", self.host_link, "type", "veth", "peer", "name", self.ns_link)
            self._made.append("link")
            ip("link", "set", self.ns_link, "netns", self.name)
            ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_link)
            ip("link", "set", self.host_link, "up")
            ip("-n", self.name, "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_link)
            ip("-n", self.name, "link", "set", self.ns_link, "up")
            ip("-n", self.name, "link", "set", "lo", "up")
            etc = _NETNS_ETC / self.name
            etc.mkdir(parents=True, exist_ok=False)
            self._made.append("etc")
            names = " ".join(ADDR_VARS)
            (etc / "hosts").write_text(f"127.0.0.1 localhost\n{self.host_ip} {names}\n")
        except BaseException:
            self.close()
            raise

    # the link ----------------------------------------------------------------------
    def cut(self) -> None:
        """Take the host's end of the link down: the namespace's end loses its carrier,
        and each side its route to the other. Returns once both ends say ``DOWN``."""
        ip("link", "set", self.host_link, "down")
        self._settle(("DOWN", "DOWN"))

    def heal(self) -> None:
        """Bring the host's end up again; returns once both ends say ``UP`` (the kernel
        turns a link's carrier on asynchronously, and drops what is sent before)."""
        ip("link", "set", self.host_link, "up")
        self._settle(("UP", "UP"))

    def _settle(self, states: tuple[str, str], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while (now := self.link_states()) != states:
            if time.monotonic() > deadline:
                raise AssertionError(f"link {self.host_link}: {now} after {timeout}s, not {states}")
            time.sleep(0.02)

    def link_states(self) -> tuple[str, str]:
        """The operational state of (the host's end, the namespace's end), as the
        kernel reports it: ``UP``, ``DOWN``, ``LOWERLAYERDOWN``..."""
        host = ip("-o", "link", "show", self.host_link)
        ns = ip("-n", self.name, "-o", "link", "show", self.ns_link)
        return _state(host), _state(ns)

    # across it ---------------------------------------------------------------------
    def forward(self, address: str) -> str:
        """A proxy on the host's end of the link, on ``address``'s port, to
        ``address`` (a loopback HOST:PORT); the address to dial from the namespace."""
        port = int(address.rpartition(":")[2])
        if port not in self._forwarded:
            self._forwarded.add(port)
            self.proxies.append(TcpProxy(address, port=port, host=self.host_ip))
        return f"{self.host_ip}:{port}"

    def expose(self, port: int) -> str:
        """A loopback proxy to the namespace's ``port``; its loopback address."""
        proxy = TcpProxy(f"{self.ns_ip}:{port}")
        self.proxies.append(proxy)
        return proxy.address

    def service_env(self, service: str, name: str, extra: Mapping[str, str]) -> dict[str, str]:
        """The environment the suite gives ``service`` (``Suite.base_env``), every
        address in it moved across the link: the suite's services by name, Redis by the
        host's end; its own server on the namespace's end."""
        env = {**self.suite.base_env(), **extra}
        for other, var in ADDR_VARS.items():
            if other != service and var in env:
                port = self.forward(env[var]).rpartition(":")[2]
                env[var] = f"{other}:{port}"
        redis = urlsplit(env["CRONWAVE_REDIS_URL"])
        across = self.forward(f"{redis.hostname}:{redis.port}")
        userinfo = redis.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@{across}" if userinfo else across
        env["CRONWAVE_REDIS_URL"] = urlunsplit(redis._replace(netloc=netloc))
        env[ADDR_VARS[service]] = f"{self.ns_ip}:{free_port()}"
        env.pop("CRONWAVE_METRICS_ADDR", None)  # none: the test reads its log and status
        env.setdefault("CRONWAVE_TLS_IDENTITY", service)
        if service == "cron-planner":
            env.setdefault("CRONWAVE_CANDIDATE", f"{name}@{socket.gethostname()}")
        return env

    def start_service(
        self, service: str, name: str, extra_env: Mapping[str, str] | None = None
    ) -> Proc:
        """Start ``service`` inside the namespace as the suite's process ``name``
        (``suite.procs[name]``, its address a loopback proxy to it), recorded by pid in
        the suite's process table; once it answers its health check."""
        env = self.service_env(service, name, extra_env or {})
        own_port = int(env[ADDR_VARS[service]].rpartition(":")[2])
        argv = ["ip", "netns", "exec", self.name, sys.executable, "-P", "-m", MODULES[service]]
        log_path = self.suite.log_dir / f"{name}.log"
        proc = Proc(name, argv, env, log_path, self.expose(own_port))
        proc.service = service
        with log_path.open("ab") as log:
            proc.popen = subprocess.Popen(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        self.suite.table.track(proc.popen)
        self.suite.procs[name] = proc
        self.procs.append(proc)
        wait_healthy(
            proc.address,
            self.suite.config.start_timeout,
            HEALTH[service],
            alive=proc.alive,
            tls=self.suite.tls(),
        )
        return proc

    # the end -----------------------------------------------------------------------
    def close(self) -> None:
        """Stop the processes started in it, then close the proxies and remove the
        link, the namespace and its /etc files; every step is tried."""
        steps: list[Callable[[], object]] = [partial(self.suite.stop_proc, p) for p in self.procs]
        steps += [proxy.close for proxy in self.proxies]
        if "link" in self._made:
            steps.append(partial(ip, "link", "del", self.host_link))  # and its peer
        if "netns" in self._made:
            steps.append(partial(ip, "netns", "del", self.name))
        if "etc" in self._made:
            steps.append(partial(shutil.rmtree, _NETNS_ETC / self.name))
        self._made.clear()
        raise_all(run_all(steps), f"removing network namespace {self.name}")


def sweep_leftovers() -> None:
    """Remove the namespaces, veths and /etc/netns entries of test processes that died
    without closing theirs (killed): a name's pid no longer running."""
    for line in ip("netns", "list").splitlines():
        name = line.split()[0] if line.split() else ""
        match = _NAME.fullmatch(name)
        if match is None or Path(f"/proc/{match['pid']}").exists():
            continue
        tag = name.removeprefix("cw")
        # Another test process may be sweeping the same leftover: gone is as good.
        with contextlib.suppress(AssertionError):
            ip("link", "del", f"cwh{tag}")
        with contextlib.suppress(AssertionError):
            ip("netns", "del", name)
        shutil.rmtree(_NETNS_ETC / name, ignore_errors=True)


def _state(line: str) -> str:
    words = line.split()
    return words[words.index("state") + 1] if "state" in words else "?"
