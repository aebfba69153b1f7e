"""Reading what happened from the store: runs, when each job body started, and the
distributions the tables are made of.

A run's body start is the worker's ``started`` run event, whose detail is
``body_started_at=<ISO-8601, microseconds>`` (written whether or not tracing is on);
fire lateness is that instant minus the run's nominal fire time. A run's
``started_at`` is its first body start (an attempt's claim is ``claimed_at``, with the
dispatch lead before the fire time).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from cronwave import Client, Run, RunEvent
from cronwave_core.domain.runs import IN_FLIGHT, RunState
from cronwave_core.domain.spec import Interval
from cronwave_core.errors import CronwaveError
from cronwave_waterfall.percentiles import quantile

T = TypeVar("T")
R = TypeVar("R")

STARTED_EVENT = "started"
#: The states of a run not finished yet, by name (as the client takes them).
IN_FLIGHT_STATES = tuple(state.name for state in RunState if state in IN_FLIGHT)
BODY_STARTED_KEY = "body_started_at"
#: Concurrent read calls the bench makes to the store while collecting figures.
READERS = 8


def body_starts(events: Iterable[RunEvent]) -> list[datetime]:
    """Every body start the run's history records, oldest first (more than one means
    the body ran more than once)."""
    starts = []
    for event in events:
        if event.kind != STARTED_EVENT:
            continue
        for part in event.detail.split():
            key, _, value = part.partition("=")
            if key == BODY_STARTED_KEY and value:
                try:
                    starts.append(datetime.fromisoformat(value).astimezone(UTC))
                except ValueError:
                    continue
    return sorted(starts)


def parallel(fn: Callable[[T], R], items: Sequence[T], workers: int = READERS) -> list[R]:
    """``[fn(x) for x in items]``, ``workers`` calls at a time, in order."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(fn, items))


def sleep_until(instant: datetime) -> None:
    """Sleep until ``instant`` (wall clock); at once when it has passed."""
    time.sleep(max(0.0, (instant - datetime.now(UTC)).total_seconds()))


#: The job every bench schedule runs: a body that returns at once.
NOOP = "cronwave.noop"


def every_second(
    client: Client, ids: Sequence[str], first: datetime, end: datetime | None = None
) -> None:
    """Create schedules ``ids`` running ``cronwave.noop`` every second from ``first``
    (until ``end``), overlap ``allow_all``, their phases spread evenly over the second:
    ``len(ids)`` runs due a second, as evenly as the ids are many."""
    every, n = timedelta(seconds=1), len(ids)

    def create(i: int) -> object:
        return client.create_schedule(
            ids[i],
            intervals=[Interval(every=every, phase=every * i / n)],
            job_type=NOOP,
            overlap="allow_all",
            start_at=first,
            end_at=end,
        )

    parallel(create, list(range(n)))


def runs_of(client: Client, schedule_ids: Sequence[str], limit: int) -> list[Run]:
    """All runs of the schedules (at most ``limit`` each), newest first per schedule."""
    per = parallel(lambda sid: client.list_runs(sid, limit=limit), list(schedule_ids))
    return [run for runs in per for run in runs]


@dataclass(frozen=True)
class Started:
    """A run and the body starts its history records."""

    run: Run
    starts: tuple[datetime, ...]

    @property
    def first(self) -> datetime | None:
        return self.starts[0] if self.starts else None

    @property
    def lateness(self) -> timedelta | None:
        return self.starts[0] - self.run.fire_time if self.starts else None


def with_starts(client: Client, runs: Sequence[Run]) -> list[Started]:
    """Each run with its recorded body starts."""

    def one(run: Run) -> Started:
        return Started(run, tuple(body_starts(client.run_events(run.run_id))))

    return parallel(one, list(runs))


def wait_until(
    check: Callable[[], Any], what: str, timeout: float, poll: float = 0.1, scenario: str = ""
) -> Any:
    """``check()`` until it returns something truthy (an exception counts as not yet:
    a service still starting); ``TimeoutError`` naming ``what`` after ``timeout``
    seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except Exception:  # a service still starting: try again until the deadline
            value = None
        if value:
            return value
        time.sleep(poll)
    raise TimeoutError(f"{scenario}: waited {timeout:.0f}s for {what}")


def wait_terminal(
    client: Client,
    schedule_ids: Sequence[str],
    expected: int,
    timeout: timedelta,
    limit: int,
    poll: timedelta = timedelta(seconds=1),
) -> list[Run]:
    """Poll the schedules' runs until ``expected`` of them are terminal or ``timeout``
    passes; the runs as last seen either way."""
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        runs = runs_of(client, schedule_ids, limit)
        if sum(1 for r in runs if r.terminal) >= expected or time.monotonic() >= deadline:
            return runs
        time.sleep(poll.total_seconds())


#: The most schedules one ``list_runs`` may name.
LIST_BATCH = 1000


def wait_settled(
    client: Client,
    schedule_ids: Sequence[str],
    expected: int,
    timeout: timedelta,
    poll: timedelta = timedelta(seconds=1),
) -> bool:
    """Wait until the schedules have ``expected`` runs and none in flight, or
    ``timeout`` passes; True when they settled. Each look asks only whether a run is
    still in flight (one call per 1,000 schedules, one run back at most), so a burst
    is not slowed by the bench watching it; the runs are counted once none is."""
    deadline = time.monotonic() + timeout.total_seconds()
    chunks = [schedule_ids[i : i + LIST_BATCH] for i in range(0, len(schedule_ids), LIST_BATCH)]
    while True:
        flying = any(
            client.list_runs(schedule_ids=chunk, states=IN_FLIGHT_STATES, limit=1)
            for chunk in chunks
        )
        if not flying and expected <= sum(
            len(client.list_runs(schedule_ids=chunk, limit=len(chunk))) for chunk in chunks
        ):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll.total_seconds())


def delete_schedules(client: Client, schedule_ids: Sequence[str]) -> int:
    """Delete the schedules a scenario made (so a shared database is left as it was
    found, apart from history), cancelling any run still in flight; returns how many
    could not be deleted."""

    def one(sid: str) -> bool:
        try:
            client.delete_schedule(sid, force=True)
        except CronwaveError:
            return False
        return True

    return sum(1 for ok in parallel(one, list(schedule_ids)) if not ok)


def ms_figures(values_ms: Sequence[float], quantiles: Sequence[str]) -> dict[str, float] | None:
    """``{"p50": ..., "p99": ..., "max": ..., "count": n}`` of millisecond values,
    exact (``cronwave_waterfall.percentiles``); None when there are none."""
    if not values_ms:
        return None
    ordered = sorted(values_ms)
    out: dict[str, float] = {"count": float(len(ordered))}
    for name in quantiles:
        if name == "max":
            out[name] = ordered[-1]
        elif name == "min":
            out[name] = ordered[0]
        elif name == "mean":
            out[name] = sum(ordered) / len(ordered)
        else:
            out[name] = quantile(ordered, float("0." + name[1:]))
    return out


def ms(delta: timedelta) -> float:
    return delta / timedelta(milliseconds=1)


def rounded(data: Any, digits: int = 3) -> Any:
    """JSON-ready figures with floats rounded to ``digits`` places."""
    if isinstance(data, float):
        return round(data, digits)
    if isinstance(data, dict):
        return {k: rounded(v, digits) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [rounded(v, digits) for v in data]
    return data


#: The database and broker servers whose CPU a scenario's runs also cost (their
#: processes' ``comm`` on Linux).
SERVER_COMMANDS = ("postgres", "redis-server")


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of a process so far (Linux ``/proc/<pid>/stat``);
    None when it is gone or there is no ``/proc``."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> tuple[float, float] | None:
    """CPU time so far of ``pid`` itself, and of every process below it (a worker's
    job processes and their fork server): the live ones' own time, plus what each
    process of the tree, ``pid`` included, has collected from children it reaped. A
    descendant that exits moves its time into its reaper's collected time, so the
    second sum only grows and the difference of two readings is what the tree spent in
    between. None when ``pid`` is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    own = int(fields[11]) + int(fields[12])
    below = int(fields[13]) + int(fields[14])  # reaped children
    for child in descendants(pid):
        child_fields = _stat_fields(child)
        if child_fields is not None:
            below += sum(int(child_fields[i]) for i in (11, 12, 13, 14))
    tick = os.sysconf("SC_CLK_TCK")
    return own / tick, below / tick


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after ``pid (comm)``; None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (``/proc/<pid>/task/*/children``)."""
    found: list[int] = []
    todo = [pid]
    while todo and len(found) < 10_000:
        parent = todo.pop()
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
            found += children
            todo += children
    return found


@dataclass(frozen=True)
class MachineTimes:
    """The whole machine's CPU time so far, all CPUs together (Linux ``/proc/stat``),
    in clock ticks: busy (user, nice, system, irq, softirq), idle (idle, iowait), and
    stolen (time a virtual CPU was ready but its host ran another guest)."""

    busy: int
    idle: int
    steal: int

    @classmethod
    def now(cls) -> MachineTimes | None:
        try:
            with open("/proc/stat") as stat:
                fields = [int(v) for v in stat.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        if len(fields) < 8:
            return None
        user, nice, system, idle, iowait, irq, softirq, steal = fields
        return cls(user + nice + system + irq + softirq, idle + iowait, steal)

    def shares_since(self, before: MachineTimes) -> dict[str, float] | None:
        """The shares of the time since ``before`` that were busy and stolen."""
        busy = self.busy - before.busy
        steal = self.steal - before.steal
        total = busy + steal + self.idle - before.idle
        if total <= 0:
            return None
        return {"busy": busy / total, "stolen": steal / total}


def server_pids(commands: Sequence[str] = SERVER_COMMANDS) -> dict[int, str]:
    """The running processes named one of ``commands`` (their ``comm``), by pid."""
    found: dict[int, str] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
        except OSError:
            continue
        if comm in commands:
            found[int(entry)] = comm
    return found


class CpuMeter:
    """CPU seconds spent by named processes between ``start()`` and ``stop()``: the
    suite's services by pid; the processes each one started, under ``<name> children``
    (a worker's job processes); and the database and broker servers (every process of
    theirs, summed under its command name, so connections opened meanwhile count
    from their start)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._before: dict[str, tuple[float, float]] = {}  # own, below (tree_cpu_seconds)
        self._servers_before: dict[int, float] = {}
        self._machine_before: MachineTimes | None = None
        self.seconds: dict[str, float] = {}
        #: The machine's busy and stolen shares of its CPU time in between, if known.
        self.machine: dict[str, float] | None = None

    def start(self) -> None:
        self._before = {n: tree_cpu_seconds(p) or (0.0, 0.0) for n, p in self.pids.items()}
        self._servers_before = {p: cpu_seconds(p) or 0.0 for p in server_pids()}
        self._machine_before = MachineTimes.now()

    def stop(self) -> dict[str, float]:
        out = {}
        for name, pid in self.pids.items():
            tree = tree_cpu_seconds(pid)
            if tree is not None:
                own, below = self._before.get(name, (0.0, 0.0))
                out[name] = tree[0] - own
                children = tree[1] - below
                if children > 0:
                    out[f"{name} children"] = children
        for pid, comm in server_pids().items():
            now = cpu_seconds(pid)
            if now is not None:
                out[comm] = out.get(comm, 0.0) + now - self._servers_before.get(pid, 0.0)
        self.seconds = out
        machine = MachineTimes.now()
        if machine is not None and self._machine_before is not None:
            self.machine = machine.shares_since(self._machine_before)
        return out
