"""The cyclic collector of the services: what their fork servers preload is frozen
(shared with every child for good), and a started service freezes what it built and
collects less often."""

from __future__ import annotations

import subprocess
import sys

from cronwave_core import forked, heap
from worker import job_forks


def _in_new_interpreter(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def test_a_fork_servers_preload_ends_frozen() -> None:
    # Given the preload of each fork server (the suite's services, a worker's jobs)
    for preload in (forked.PRELOAD, job_forks.PRELOAD):
        # Then the module that freezes the heap comes last, after what it freezes
        assert preload[-1] == "cronwave_core.heap_preloaded"

    # And importing it, after the libraries, freezes them: a child's collections skip them
    frozen = _in_new_interpreter(
        "import grpc, gc; import cronwave_core.heap_preloaded; print(gc.get_freeze_count())"
    )
    assert int(frozen) > 10_000


def test_a_started_service_collects_its_youngest_objects_less_often() -> None:
    # When a service's server starts (in a process of its own, on loopback, no TLS)
    out = _in_new_interpreter(
        "import gc\n"
        "from datetime import timedelta\n"
        "from cronwave_core.bootstrap import RunningServer, Service\n"
        "from cronwave_core.settings import MetricsSettings, TlsSettings\n"
        "service = Service('dispatcher', '127.0.0.1:0', lambda server: None, ())\n"
        "tls = TlsSettings.from_env({'CRONWAVE_INSECURE': '1'})\n"
        "running = RunningServer(service, timedelta(seconds=1), traced=False,\n"
        "                        metrics=MetricsSettings.from_env({}), tls=tls)\n"
        "before = gc.get_threshold()\n"
        "running.start()\n"
        "print(*before, gc.get_freeze_count() > 0, *gc.get_threshold())\n"
        "running.stop()\n"
    )

    # Then what start-up built is frozen and its thresholds are the settled ones
    young, older = heap.YOUNG_THRESHOLD, heap.OLDER_THRESHOLD
    assert out.split() == ["700", "10", "10", "True", str(young), str(older), str(older)]
