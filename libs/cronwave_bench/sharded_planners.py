"""``sharded-planners``: many schedules across several planners that divide the shards.

On a suite of real processes (store, leader-election, dispatcher, worker and
``PLANNERS`` planners with ``CRONWAVE_PLANNER_SHARDS``) on a database of its own:

1. With the planners stopped, ``N`` schedules are written straight into the store's
   database by the store's own code (``workflow_store.bench_seed``, as
   ``planner-memory`` writes them: cron times months away, ``DISTINCT`` different
   specs).
2. Every planner is started at once (a cold start of the whole tier): ``cold_load_s``
   per planner is the time from the start until it holds exactly its own shards'
   schedules and those of its warm standby, and leads its own; ``all_held_s`` until
   every shard is held. Then one *probe* schedule per shard firing every second is
   created over the API (the probes are what fires during the measurement), and once
   they all fire, the resident memory (``VmRSS``, and ``VmHWM``, the peak) of each planner.
3. The planner holding the most shards is killed with SIGKILL. ``held_again_s``: until
   leader-election shows all of its shards held by the others; ``firing_again_s``:
   until every probe of its shards has a run recorded after the kill (the store's
   ``created_at``), the figure the target is stated for.
4. It is started again: ``rejoin_s`` until it holds its share again, and its probes
   fire from it.
5. Every whole-second slot of every probe from its creation to the end: runs per slot
   (``duplicates``: more than one; ``missing``: none; ``missed``: a MISSED record).

Run it: ``python -m cronwave_bench.sharded_planners [N [PLANNERS [SHARDS [DISTINCT [TTL]]]]]``
prints the figures as JSON.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, overload

from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import leader_election_service_pb2 as leader_pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as leader_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_bench.context import BenchContext
from cronwave_bench.harness import Backend, SuiteOptions, bench_suite, own_database
from cronwave_bench.measure import wait_until
from cronwave_bench.planner_memory import JOB_TYPE, rss_mib, run_tool, specs
from cronwave_bench.report import Result
from cronwave_core.convert import ts_to_dt
from cronwave_core.domain.runs import is_placeholder
from cronwave_core.settings import LeaseSettings
from cronwave_core.shards import shard_of, shard_scope, standby
from cronwave_core.suite import Suite

RSS_TARGET_MIB = 300.0
TAKEOVER_TARGET_S = 2.0
PLANNER = "cron-planner"
_RPC = 10.0
_POLL = 0.1


@dataclass
class SlotAudit:
    """Every whole second in ``(since, through]`` of every schedule: its runs."""

    slots: int = 0
    duplicates: list[tuple[str, datetime]] = field(default_factory=list)
    missing: list[tuple[str, datetime]] = field(default_factory=list)
    missed: list[tuple[str, datetime, str]] = field(default_factory=list)
    #: Slots whose run waits as a placeholder (``pending:...``): decided, still to start.
    pending: list[tuple[str, datetime, str]] = field(default_factory=list)


def audit_slots(
    runs: Sequence[common_pb2.Run], ids: Sequence[str], since: datetime, through: datetime
) -> SlotAudit:
    """One run per whole-second slot of schedules firing every second, none MISSED."""
    per_slot = Counter((r.schedule_id, ts_to_dt(r.fire_time)) for r in runs)
    missed = {
        (r.schedule_id, ts_to_dt(r.fire_time)): r.error
        for r in runs
        if r.state == common_pb2.RUN_STATE_MISSED
    }
    result = SlotAudit()
    first = since.replace(microsecond=0) + timedelta(seconds=1)
    for sid in ids:
        at = first
        while at <= through:
            result.slots += 1
            n = per_slot.get((sid, at), 0)
            if n == 0:
                result.missing.append((sid, at))
            elif n > 1:
                result.duplicates.append((sid, at))
            if (sid, at) in missed:
                why = missed[(sid, at)]
                late = result.pending if is_placeholder(why) else result.missed
                late.append((sid, at, why))
            at += timedelta(seconds=1)
    return result


class Shards:
    """A suite's shard leases and probe schedules, read over the API."""

    def __init__(self, suite: Suite, count: int) -> None:
        self.suite = suite
        self.count = count
        self._leader_channel = suite.channel(suite.leader_addr)
        self._store_channel = suite.channel(suite.store_addr)
        self.leases = leader_grpc.LeaderElectionServiceStub(self._leader_channel)
        self.store = store_grpc.WorkflowStoreServiceStub(self._store_channel)

    def close(self) -> None:
        self._leader_channel.close()
        self._store_channel.close()

    def holders(self, shards: Sequence[int] | None = None) -> dict[int, str]:
        """Each shard's holder (its planner's process name; "" when nobody)."""
        found = {}
        for shard in range(self.count) if shards is None else shards:
            request = leader_pb.ObserveRequest(scope=shard_scope(shard, self.count))
            holder = self.leases.Observe(request, timeout=_RPC).lease.holder
            found[shard] = holder.split("@", 1)[0]
        return found

    def create_probes(self, prefix: str) -> list[str]:
        """One schedule per shard firing every second (ids tried in order until every
        shard has one)."""
        ids: dict[int, str] = {}
        i = 0
        while len(ids) < self.count and i < self.count * 100:
            sid = f"{prefix}-{i:05d}"
            ids.setdefault(shard_of(sid, self.count), sid)
            i += 1
        for sid in ids.values():
            spec = common_pb2.ScheduleSpec()
            spec.intervals.add().every.FromTimedelta(timedelta(seconds=1))
            schedule = common_pb2.Schedule(
                schedule_id=sid,
                spec=spec,
                policy=common_pb2.SchedulePolicy(overlap=common_pb2.OVERLAP_POLICY_ALLOW_ALL),
                job_type=JOB_TYPE,
            )
            self.store.CreateSchedule(
                store_pb.CreateScheduleRequest(schedule=schedule), timeout=_RPC
            )
        return [ids[k] for k in sorted(ids)]

    def runs(self, ids: Sequence[str]) -> list[common_pb2.Run]:
        """Every run of ``ids``, one schedule per call (a probe has a run a second)."""
        runs: list[common_pb2.Run] = []
        for sid in ids:
            request = store_pb.ListRunsRequest(schedule_id=sid, limit=20_000, lean=True)
            runs.extend(self.store.ListRuns(request, timeout=_RPC).runs)
        return runs

    def recent(self, ids: Sequence[str], per_schedule: int = 30) -> list[common_pb2.Run]:
        request = store_pb.ListRecentRunsRequest(schedule_ids=ids, per_schedule=per_schedule)
        return list(self.store.ListRecentRuns(request, timeout=_RPC).runs)

    def recorded_after(self, ids: Sequence[str], instant: float) -> dict[str, float]:
        """Per schedule of ``ids``, the earliest ``created_at`` after ``instant`` among
        its newest runs (polled while the gap is seconds: 30 runs reach past it)."""
        first: dict[str, float] = {}
        for run in self.recent(ids):
            created = ts_to_dt(run.created_at).timestamp()
            if created > instant and created < first.get(run.schedule_id, float("inf")):
                first[run.schedule_id] = created
        return first


@overload
def run_sharded_planners(schedules: BenchContext) -> Result: ...


@overload
def run_sharded_planners(
    schedules: int = 1_000_000,
    *,
    planners: int = 4,
    shards: int = 64,
    distinct: int = 1_000,
    lease_ttl: float | None = None,
    backend: Backend | None = None,
    work_dir: Path | None = None,
    say: Callable[[str], None] = ...,
) -> dict[str, Any]: ...


def run_sharded_planners(
    schedules: int | BenchContext = 1_000_000,
    *,
    planners: int = 4,
    shards: int = 64,
    distinct: int = 1_000,
    lease_ttl: float | None = None,
    backend: Backend | None = None,
    work_dir: Path | None = None,
    say: Callable[[str], None] = lambda _line: None,
) -> dict[str, Any] | Result:
    """Measure ``planners`` planners dividing ``shards`` shards of ``schedules``
    schedules (see the module docstring); ``distinct``: how many different specs they
    share (0: each its own); ``lease_ttl``: the planners' ``CRONWAVE_LEASE_TTL`` in
    seconds (None: the default). Given a
    ``BenchContext`` (``cronwave bench``), its ``sharded_schedules`` on its backend, as
    the scenario's ``Result``."""
    if isinstance(schedules, BenchContext):
        ctx = schedules
        figures = run_sharded_planners(
            ctx.sizes.sharded_schedules,
            backend=ctx.backend,
            work_dir=ctx.suite_dir("sharded-planners"),
            say=ctx.say,
        )
        return _result(figures)
    progress = _say(say)
    if work_dir is None:
        with TemporaryDirectory(prefix="cronwave-sharded-") as tmp:
            return _measure(schedules, planners, shards, distinct, lease_ttl,
                            backend or Backend(), Path(tmp), progress)  # fmt: skip
    return _measure(schedules, planners, shards, distinct, lease_ttl, backend or Backend(),
                    work_dir, progress)  # fmt: skip


def _say(say: Callable[[str], None]) -> Callable[[str], None]:
    return lambda text: say(f"sharded-planners: {text}")


def _measure(
    n: int,
    planners: int,
    count: int,
    distinct: int,
    lease_ttl: float | None,
    backend: Backend,
    work_dir: Path,
    say: Callable[[str], None],
) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "schedules": n,
        "planners": planners,
        "shards": count,
        "distinct_specs": min(distinct, n) if distinct else n,
        "database": backend.database,
    }
    with own_database(backend, "sharded_planners") as own:
        database_url = own.database_url if own.database == "postgresql" else None
        suite_backend = replace(own, database_url=database_url)
        env = {
            "CRONWAVE_PLANNER_SHARDS": str(count),
            # A probe's run is recorded at its fire time, so "firing again" is when
            # the store took its start (with the lead, up to half a second before).
            "CRONWAVE_DISPATCH_LEAD": "0",
        }
        if lease_ttl is not None:
            env["CRONWAVE_LEASE_TTL"] = str(lease_ttl)
        options = SuiteOptions(tracing=False, planners=planners, env=env)
        with bench_suite(suite_backend, work_dir, options) as (suite, _client):
            view = Shards(suite, count)
            try:
                _scenario(suite, view, n, distinct, database_url, figures, say)
            finally:
                view.close()
    return figures


def _scenario(
    suite: Suite,
    view: Shards,
    n: int,
    distinct: int,
    database_url: str | None,
    figures: dict[str, Any],
    say: Callable[[str], None],
) -> None:
    names = [name for name in suite.procs if name.startswith(PLANNER)]
    ttl = suite.config.env.get("CRONWAVE_LEASE_TTL")
    figures["lease_ttl_s"] = float(ttl) if ttl else LeaseSettings.from_env({}).ttl.total_seconds()
    for name in names:
        suite.stop_proc(suite.procs[name])

    url = database_url or f"sqlite:///{suite.config.data_dir / 'cronwave.db'}"
    say(f"writing {n:,} schedules into the store's database")
    done = run_tool(
        "workflow_store.bench_seed", [url, JOB_TYPE], specs(n, datetime.now(UTC), distinct), 3600
    )
    figures["insert_s"] = done["insert_s"]
    ids = [row["id"] for row in specs(n, datetime.now(UTC), distinct)]
    per_shard = Counter(shard_of(sid, view.count) for sid in ids)
    del ids

    say(f"starting {len(names)} planners at once over {view.count} shards")
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        list(pool.map(suite.restart, names))
    loaded: dict[str, float] = {}
    candidates: dict[str, str] = {}  # process name -> candidate (the name it hashes)
    counts: dict[str, tuple[int, int]] = {}  # process name -> (schedules loaded, wanted)

    def all_loaded() -> bool:
        holders = view.holders()
        statuses = {name: _status(suite, name) for name in names}
        for name, status in statuses.items():
            if status is not None:
                candidates[name] = status.candidate
        if len(candidates) < len(names):
            return False
        for name in names:
            mine = [k for k, holder in holders.items() if holder == name]
            status = statuses[name]
            # Its own shards' schedules and those of its warm standby.
            spare = standby(candidates[name], candidates.values(), view.count)
            want = sum(per_shard[k] for k in set(mine) | spare)
            if status is not None:
                counts[name] = (status.schedules, want)
            if status is not None and mine and status.leader and status.schedules == want:
                loaded.setdefault(name, time.monotonic() - began)
        return "" not in holders.values() and len(loaded) == len(names)

    try:
        # A cold start of 1,000,000 takes minutes here; far past that, say what is off.
        _wait(all_loaded, "every planner holding its shards' schedules", max(300, n / 1000))
    except TimeoutError as exc:
        off = ", ".join(
            f"{name} {got:,} of {want:,}" for name, (got, want) in sorted(counts.items())
        )
        why = f"schedules loaded of its own and standby shards': {off}"
        raise TimeoutError(f"{exc} ({why})") from exc
    figures["all_held_s"] = time.monotonic() - began
    figures["cold_load_s"] = loaded
    # The probes, created once the planners run: what fires during the measurement.
    probes = view.create_probes("probe")
    _wait(lambda: len(view.recorded_after(probes, time.time() - 1.5)) == len(probes),
          "every probe firing", 120)  # fmt: skip
    pids = {name: suite.procs[name].pid for name in names}
    figures["rss_mib"] = {name: rss_mib(pid) for name, pid in pids.items()}
    figures["hwm_mib"] = {name: rss_mib(pid, "VmHWM") for name, pid in pids.items()}
    holders = view.holders()
    figures["shards_held"] = dict(Counter(holders.values()))
    say(f"figures so far: {json.dumps(figures, default=str)}")
    # The audit's window: from every probe firing on.
    steady = datetime.now(UTC)

    victim = Counter(holders.values()).most_common(1)[0][0]
    lost = {k for k, holder in holders.items() if holder == victim}
    orphans = [sid for sid in probes if shard_of(sid, view.count) in lost]
    say(f"kill -9 of {victim}, holding {len(lost)} shards")
    proc = suite.procs[victim]
    killed = time.time()
    suite.signal(victim, signal.SIGKILL)
    if proc.popen is not None:
        proc.popen.wait(timeout=10)
    held_again: float | None = None
    fired: dict[str, float] = {}
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and (held_again is None or len(fired) < len(orphans)):
        if held_again is None:
            seen = view.holders(sorted(lost))
            if all(seen[k] not in ("", victim) for k in lost):
                held_again = time.time() - killed
        fired = view.recorded_after(orphans, killed)
        time.sleep(_POLL)  # (the polling's own calls load the machine too: not too often)
    figures["victim_shards"] = len(lost)
    figures["held_again_s"] = held_again
    figures["firing_again_s"] = max(fired.values()) - killed if len(fired) == len(orphans) else None

    say(f"figures so far: {json.dumps(figures, default=str)}")
    say(f"restarting {victim}")
    back = time.time()
    suite.restart(victim)

    def rejoined() -> bool:
        seen = view.holders()
        return {k for k, holder in seen.items() if holder == victim} == lost

    _wait(rejoined, "the restarted planner's shards back", 600)
    figures["rejoin_s"] = time.time() - back
    returned = time.time()
    _wait(lambda: len(view.recorded_after(orphans, returned)) == len(orphans),
          "the returned planner's probes firing", 120)  # fmt: skip
    figures["rejoined_rss_mib"] = rss_mib(suite.procs[victim].pid)
    say(f"figures so far: {json.dumps(figures, default=str)}")

    through = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=2)
    with contextlib.suppress(TimeoutError):  # what is still missing is counted below
        _wait(
            lambda: not audit_slots(view.runs(probes), probes, steady, through).missing,
            "a run of every probe slot",
            60,
        )
    audit = audit_slots(view.runs(probes), probes, steady, through)
    figures["missing_examples"] = [f"{sid}@{at.isoformat()}" for sid, at in audit.missing[:5]]
    figures["missed_examples"] = [
        f"{sid}@{at.isoformat()}: {why}" for sid, at, why in audit.missed[:5]
    ]
    figures["probe_slots"] = audit.slots
    figures["duplicates"] = len(audit.duplicates)
    figures["missing"] = len(audit.missing)
    figures["missed"] = len(audit.missed)
    figures["pending"] = len(audit.pending)


def _status(suite: Suite, name: str) -> Any:
    from cronwave_proto.v1 import cron_planner_service_pb2 as planner_pb
    from cronwave_proto.v1 import cron_planner_service_pb2_grpc as planner_grpc

    with suite.channel(suite.procs[name].address) as channel:
        stub = planner_grpc.CronPlannerServiceStub(channel)
        try:
            return stub.GetPlannerStatus(planner_pb.GetPlannerStatusRequest(), timeout=2.0)
        except Exception:  # starting or dead: no status yet
            return None


def _wait(check: Callable[[], Any], what: str, timeout: float) -> Any:
    return wait_until(check, what, timeout, poll=0.2, scenario="sharded-planners")


def _result(figures: dict[str, Any]) -> Result:
    result = Result("sharded-planners")
    result.figures = figures
    rss = [v for v in figures["rss_mib"].values() if v is not None]
    hwm = [v for v in figures["hwm_mib"].values() if v is not None]
    result.row(
        "schedules",
        f"{figures['schedules']:,} ({figures['distinct_specs']:,} specs) across "
        f"{figures['planners']} planners, {figures['shards']} shards; lease ttl "
        f"{figures['lease_ttl_s']:g} s, dispatch lead 0 (probes recorded at their fire time)",
    )
    result.row(
        "planner RSS after the cold start",
        f"max {max(rss):.0f} MiB (each: {', '.join(f'{v:.0f}' for v in rss)}; peak {max(hwm):.0f})"
        if rss
        else "n/a",
        f"<= {RSS_TARGET_MIB:.0f} MiB",
        bool(rss) and max(rss) <= RSS_TARGET_MIB,
    )
    loads = sorted(figures["cold_load_s"].values())
    result.row(
        "cold start: a planner's shards loaded and led",
        f"{loads[0]:.1f} .. {loads[-1]:.1f} s; every shard held at {figures['all_held_s']:.1f} s",
    )
    firing = figures["firing_again_s"]
    result.row(
        "kill -9: its shards firing again",
        "never"
        if firing is None
        else f"{firing:.2f} s ({figures['victim_shards']} shards; "
        f"held again at {figures['held_again_s']:.2f} s)",
        f"<= {TAKEOVER_TARGET_S:g} s",
        firing is not None and firing <= TAKEOVER_TARGET_S,
    )
    result.row("rejoin: its shards back", f"{figures['rejoin_s']:.1f} s")
    bad = figures["duplicates"] + figures["missing"] + figures["missed"]
    result.row(
        "probe slots through it all",
        f"{figures['probe_slots']:,}: {figures['duplicates']} duplicate, "
        f"{figures['missing']} missing, {figures['missed']} MISSED "
        f"({figures['pending']} caught up late, still queued at the audit)",
        "0 duplicate, 0 missed",
        bad == 0,
    )
    return result


def main() -> None:
    """``python -m cronwave_bench.sharded_planners [N [PLANNERS [SHARDS [DISTINCT [TTL]]]]]``"""
    args = [float(a) for a in sys.argv[1:6]]
    defaults = [1_000_000.0, 4.0, 64.0, 1_000.0]
    n, planners, count, distinct = args[:4] + defaults[len(args[:4]) :]
    ttl = args[4] if len(args) > 4 else None
    figures = run_sharded_planners(
        int(n), planners=int(planners), shards=int(count), distinct=int(distinct),
        lease_ttl=ttl, backend=Backend.from_env(), say=print,
    )  # fmt: skip
    print(json.dumps(figures, default=str))


if __name__ == "__main__":
    main()
