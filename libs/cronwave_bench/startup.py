"""``startup``: what a suite costs to start, as ``cronwave up --workers 2`` starts it.

``cronwave up --workers 2`` (SQLite, embedded Redis, mutual TLS, the billing
example's gateway and the console: what a newcomer's first ``cronwave up`` gives) is
started ``startup_runs`` times with its services forked from the suite's fork server
(the default, ``cronwave_core.forked``), and as many times with
``CRONWAVE_FORK_SERVICES=off`` (each service a new interpreter), alternating, and
each run starts twice on its data dir: first on a new one (the store creates its
SQLite database), then again (a restart). Each time the CPU every process of its tree
has spent (``/proc/<pid>/stat``) is read 2 s
after ``cronwave is up`` (the services are healthy; the 2 s take in what each does
right after, such as a worker's warm job processes), and the suite is stopped with
SIGTERM. Figures: each service's CPU (median over the runs; two workers are summed),
the fork servers' and the rest's, the whole tree's, and the wall time to ``up``.
Target: every service starts on at most half the CPU it needs as a new interpreter.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from statistics import median

from cronwave_bench.cli_latency import cronwave_command
from cronwave_bench.context import BenchContext
from cronwave_bench.measure import cpu_seconds, descendants
from cronwave_bench.report import Result
from cronwave_core.suite import free_port_base

#: How long ``cronwave up`` may take to say it is up.
UP_TIMEOUT_S = 120.0
#: CPU is read this long after ``up`` says it is up.
SETTLE_S = 2.0
#: Ports from ``--port-base`` on that ``cronwave up`` may take (its services, Redis,
#: the console), with room to spare.
PORT_SPAN = 10
#: Each run's two starts on one data dir: a new one, then the same again.
STARTS = ("first start", "restart")
#: Figures of a start that are not a service's.
_NOT_SERVICES = ("up_s", "total", "fork servers", "other")
#: The modes compared: the environment each adds.
MODES = {"forked": {}, "new interpreters": {"CRONWAVE_FORK_SERVICES": "off"}}
_TABLE_ROW = re.compile(r"│ (\S+)\s+│[^│]*│[^│]*│ (\d+)\s+│")


def run_startup(ctx: BenchContext) -> Result:
    result = Result("startup")
    runs = ctx.sizes.startup_runs
    taken: dict[str, list[dict[str, float]]] = {
        f"{mode}, {start}": [] for mode in MODES for start in STARTS
    }
    for trial in range(runs):
        for mode, extra in MODES.items():
            data_dir = ctx.suite_dir(f"startup-{trial}-{mode[0]}")
            for start in STARTS:
                ctx.say(f"startup: cronwave up --workers 2, {mode}, {start}, run {trial + 1}")
                taken[f"{mode}, {start}"].append(_one_start(data_dir, extra))
    figures = {key: _medians(samples) for key, samples in taken.items()}
    result.figures = {"runs": taken, "medians": figures}
    for start in STARTS:
        forked, fresh = figures[f"forked, {start}"], figures[f"new interpreters, {start}"]
        services = sorted(k for k in fresh if k not in (*_NOT_SERVICES, "redis"))
        for name in services:
            result.row(
                f"{start}: {name} start-up CPU, forked / new interpreter",
                f"{forked.get(name, 0.0):.2f} s / {fresh[name]:.2f} s",
                "<= half",
                forked.get(name, fresh[name]) <= fresh[name] / 2,
            )
        for name in ("fork servers", "other", "total"):
            result.row(
                f"{start}: {name} CPU, forked / new interpreters",
                f"{forked.get(name, 0.0):.2f} s / {fresh.get(name, 0.0):.2f} s",
            )
        result.row(
            f"{start}: time to `cronwave is up`, forked / new interpreters",
            f"{forked['up_s']:.2f} s / {fresh['up_s']:.2f} s",
        )
    result.notes.append(
        f"medians of {runs} runs each, alternating; SQLite and an embedded Redis whatever "
        f"the bench's backend (a newcomer's `cronwave up`); CPU read {SETTLE_S:g} s after up; "
        "`first start`: a new data dir (the store creates its SQLite database); "
        "`restart`: the same data dir again; `fork servers`: the suite's and each "
        "worker's job-process server; `other`: job processes, multiprocessing's "
        "resource trackers and the CLI itself; two workers are summed"
    )
    return result


def _one_start(data_dir: Path, extra: dict[str, str]) -> dict[str, float]:
    """One ``cronwave up --workers 2`` in ``data_dir``: CPU seconds by process once up,
    and the wall seconds to up (``up_s``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWAVE_")}
    env.update(extra, CRONWAVE_DATA_DIR=str(data_dir))
    out = data_dir / "up.out"
    base = free_port_base(PORT_SPAN)
    argv = [*cronwave_command(), "up", "--workers", "2", "--port-base", str(base)]
    started = time.monotonic()
    with out.open("wb") as log:
        up = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        while "cronwave is up" not in out.read_text():
            if up.poll() is not None or time.monotonic() - started > UP_TIMEOUT_S:
                raise RuntimeError(f"cronwave up did not start: {out.read_text()[-800:]}")
            time.sleep(0.05)
        up_s = time.monotonic() - started
        time.sleep(SETTLE_S)
        names = {int(pid): name for name, pid in _TABLE_ROW.findall(out.read_text())}
        spent: defaultdict[str, float] = defaultdict(float)
        for pid in [up.pid, *descendants(up.pid)]:
            seconds = cpu_seconds(pid)
            if seconds is not None:
                spent[_kind(pid, names)] += seconds
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait(timeout=10)
    return {**spent, "total": sum(spent.values()), "up_s": up_s}


def _kind(pid: int, names: dict[int, str]) -> str:
    """What ``pid`` is: its service (replicas under one name), a fork server, or
    other."""
    if pid in names:
        return re.sub(r"-\d+$", "", names[pid])
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "other"
    return "fork servers" if b"forkserver import main" in command else "other"


def _medians(samples: list[dict[str, float]]) -> dict[str, float]:
    keys = {key for sample in samples for key in sample}
    return {key: median(sample.get(key, 0.0) for sample in samples) for key in keys}
