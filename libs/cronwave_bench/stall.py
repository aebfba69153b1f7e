"""The store stopped under load, and how long the suite takes to be on time again.

A suite of the defaults of ``cronwave up --workers 2`` (TLS, tracing, job processes)
runs ``stall_rate`` 1-second schedules (overlap ``allow_all``, the default catch-up
policy), so that many runs are due every second; after a warm-up the store is stopped
with SIGSTOP for ``stall_hold`` (a long garbage-collection pause, a frozen VM, a disk
that stops answering), then continued. Meanwhile the planner's starts fail and the
slots pile up; afterwards every late slot is run as a paced catch-up run or recorded
MISSED with its reason, as the schedules' policies say. The question is whether the
suite gets back, or whether catching up costs more than the spare capacity it has and
firing stays late.

Per run, over the slots from 5 s before the stop to the end of the observation
(``stall_after`` after the stall, less a quarter of it so that every slot had time to
run):

- **slots** and **missing**: the schedules' fire times in that window, and those with
  no row at all (neither a run nor a MISSED record);
- **MISSED** by reason, and **not finished**: rows still in flight (or placeholders
  still waiting) when read, at the end of the observation, a quarter of it after the
  window's end (a noop takes milliseconds once started);
- **back on time**: from the stall's end to the first slot from which every later slot
  of the window started its body within 1 s of its fire time (None: firing was still
  late when the window closed).

Each run is a fresh suite; the stop is checked to have held (the process state read
back as stopped).
"""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwave import Run
from cronwave_bench.context import BenchContext
from cronwave_bench.harness import SuiteOptions, bench_suite, dispatch_lead, wait_leading
from cronwave_bench.measure import every_second, runs_of, sleep_until
from cronwave_bench.report import Result
from cronwave_bench.single import next_whole_second
from cronwave_bench.slot_audit import reason_label
from cronwave_core.domain.runs import is_placeholder

#: A slot is on time when its body started at most this long after its fire time.
ON_TIME = timedelta(seconds=1)
WARMUP = timedelta(seconds=4)
#: The window ends this share of the observation before it does, so its last slots
#: could run.
SETTLE_SHARE = 0.25
EVERY = timedelta(seconds=1)
STORE = "workflow-store"


@dataclass
class StallRun:
    slots: int = 0
    missing: int = 0
    missed_by_reason: dict[str, int] = field(default_factory=dict)
    not_finished: int = 0
    late_p50_s: float | None = None
    late_max_s: float | None = None
    back_on_time_s: float | None = None

    def figures(self) -> dict[str, Any]:
        return {
            "slots": self.slots,
            "missing": self.missing,
            "missed_by_reason": self.missed_by_reason,
            "not_finished": self.not_finished,
            "start_late_p50_s": self.late_p50_s,
            "start_late_max_s": self.late_max_s,
            "back_on_time_after_stall_s": self.back_on_time_s,
        }


def run_stall(ctx: BenchContext) -> Result:
    sizes = ctx.sizes
    result = Result("stall")
    runs = [_trial(ctx, trial) for trial in range(max(sizes.stall_repeats, 1))]
    result.figures = {"runs": [r.figures() for r in runs]}
    back = [r.back_on_time_s for r in runs]
    result.row(
        "back on time after the stall (min / median / max)",
        _spread(back),
        "",
        None,
    )
    result.row(
        "slots: missing; not finished",
        " / ".join(f"{r.missing}; {r.not_finished}" for r in runs)
        + f" (of {' / '.join(str(r.slots) for r in runs)})",
        "0; 0",
        all(r.missing == 0 and r.not_finished == 0 for r in runs),
    )
    result.row(
        "MISSED by reason",
        " / ".join(_reasons(r.missed_by_reason) for r in runs),
        "",
        None,
    )
    result.row(
        "body start after fire time, p50 / max",
        " / ".join(f"{_s(r.late_p50_s)}, {_s(r.late_max_s)}" for r in runs),
        "",
        None,
    )
    hold = sizes.stall_hold.total_seconds()
    result.notes.append(
        f"{sizes.stall_rate} 1-second schedules (overlap allow_all, catch-up latest); the "
        f"store stopped {hold:g} s with SIGSTOP; defaults of cronwave up --workers 2; "
        f"on time: the body started within {ON_TIME.total_seconds():g} s"
    )
    return result


def _trial(ctx: BenchContext, trial: int) -> StallRun:
    sizes = ctx.sizes
    rate, hold, after = sizes.stall_rate, sizes.stall_hold, sizes.stall_after
    options = SuiteOptions(tracing=True, own_database=True, workers=2)
    with bench_suite(ctx.backend, ctx.suite_dir(f"stall-{trial}"), options) as (suite, client):
        wait_leading(client)
        ids = [f"bench-stall-{uuid.uuid4().hex[:8]}-{i:05d}" for i in range(rate)]
        first = next_whole_second(
            datetime.now(UTC) + dispatch_lead() + timedelta(seconds=2 + rate * 0.01)
        )
        every_second(client, ids, first)
        sleep_until(max(first, datetime.now(UTC)) + WARMUP)
        stopped_at = datetime.now(UTC)
        suite.signal(STORE, signal.SIGSTOP)
        try:
            # the stop held: nothing below is measured otherwise
            _wait_state(suite.procs[STORE].pid, "T")
            ctx.say(f"stall: run {trial + 1}, store stopped at {stopped_at:%H:%M:%S}")
            time.sleep(hold.total_seconds())
        finally:
            suite.signal(STORE, signal.SIGCONT)
        continued_at = datetime.now(UTC)
        end = continued_at + after * (1 - SETTLE_SHARE)
        sleep_until(continued_at + after)
        limit = int((WARMUP + hold + after + dispatch_lead()).total_seconds()) + 10
        read = runs_of(client, ids, limit=limit)
    start = stopped_at - timedelta(seconds=5)
    return _judge(ids, first, read, start, end, continued_at)


def _wait_state(pid: int, state: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == state:
                return
        time.sleep(0.01)
    raise RuntimeError(f"process {pid} did not reach state {state} within {timeout:g} s")


def _judge(
    ids: list[str],
    first: datetime,
    runs: list[Run],
    start: datetime,
    end: datetime,
    continued_at: datetime,
) -> StallRun:
    """The window's slots (fire time in ``(start, end]``), accounted for."""
    by_slot = {(r.schedule_id, r.fire_time): r for r in runs}
    out = StallRun()
    reasons: Counter[str] = Counter()
    late: list[float] = []
    judged: list[tuple[datetime, bool]] = []
    n = len(ids)
    seconds = int((end - start).total_seconds()) + 2
    base = start.replace(microsecond=0)
    for i, sid in enumerate(ids):
        phase = EVERY * i / n  # as ``every_second`` spreads them
        for k in range(seconds):
            at = base + timedelta(seconds=k) + phase
            if at < first or not (start < at <= end):
                continue
            out.slots += 1
            run = by_slot.get((sid, at))
            on_time = False
            if run is None:
                out.missing += 1
            elif run.state == "MISSED" and is_placeholder(run.error):
                out.not_finished += 1  # a paced catch-up run still waiting for its turn
            elif run.state == "MISSED":
                reasons[reason_label(run.error)] += 1
            else:
                if not run.terminal:
                    out.not_finished += 1
                if run.started_at is not None:
                    lateness = (run.started_at - at).total_seconds()
                    late.append(lateness)
                    on_time = lateness <= ON_TIME.total_seconds()
            judged.append((at, on_time))
    out.missed_by_reason = dict(reasons)
    if late:
        late.sort()
        out.late_p50_s = round(late[len(late) // 2], 3)
        out.late_max_s = round(late[-1], 3)
    out.back_on_time_s = _back_on_time(judged, continued_at)
    return out


def _back_on_time(judged: list[tuple[datetime, bool]], since: datetime) -> float | None:
    """From ``since`` to the first slot after which every slot is on time (None when
    the last one is not)."""
    judged.sort()
    back: datetime | None = None
    for at, on_time in judged:
        if not on_time:
            back = None
        elif back is None:
            back = at
    if back is None:
        return None
    return round(max(0.0, (back - since).total_seconds()), 2)


def _spread(values: list[float | None]) -> str:
    known = sorted(v for v in values if v is not None)
    shown = [f"{v:.1f} s" for v in known] + ["not within the window"] * (len(values) - len(known))
    return " / ".join(shown)


def _reasons(reasons: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "none"


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} s"
