"""``truth``: how often the waterfall's headline names a delay injected into one hop and
kind of real runs, beside this machine's own stalls.

A trial is what ``tests/tracing/test_truth.py`` does once: a suite whose processes add
``truth_delay_ms`` to one hop and kind of 3% of the runs (``CRONWAVE_FAULT``, test
hooks on), ``truth_runs`` runs driven end to end one at a time after a warm-up, the
suite stopped (so every span is flushed), and the p99 tail attributed from the span
files (``cronwave_waterfall.attribute_tail``). A trial is *named right* when the
headline's (hop, kind) is the injected one and its delay is within 20% of the injected
delay. The trials go round the truth tests' three injection points; target: at least
95% named right. Each trial also counts the slowest runs (above the end-to-end p99)
that carried no injected delay (the host's own stalls the rule had to see past), and
reads the injected point's own p99 over its median in the runs without the delay: the
point's natural tail, recurring or not, which a rule reading the plain p99 would need
the delay to stand above (the waterfall's rule sees past it where it is scattered).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from cronwave_bench.context import BenchContext
from cronwave_bench.harness import SuiteOptions, own_database, suite_config
from cronwave_bench.load_drive import Target, drive
from cronwave_bench.report import Result
from cronwave_core.faults import LatencyFault, run_key
from cronwave_core.suite import Suite
from cronwave_waterfall import (
    Run,
    RunFilter,
    attribute_tail,
    build_runs,
    load_spans,
    select_runs,
)
from cronwave_waterfall.percentiles import quantile
from cronwave_waterfall.tail import MIN_RUNS_PER_CAUSE, TAIL_SHARE

#: The truth tests' injection points, in the order the trials go round them.
POINTS = (("persist", "database"), ("pickup", "queue"), ("dispatch", "cache"))
FRACTION = 0.03
TOLERANCE = 0.2
TARGET = 0.95
WARMUP = 40
#: As the truth tests: job bodies in threads, a short idle poll, and a switch interval
#: short enough that the span exporter puts no tail of its own into the runs.
_ENV = {
    "CRONWAVE_JOB_ISOLATION": "thread",
    "CRONWAVE_WORKER_POLL_MS": "5",
    "CRONWAVE_SWITCH_INTERVAL": "0.0005",
}


@dataclass(frozen=True)
class Trial:
    """One trial's outcome. ``error`` is the headline's delay against the injected one
    (a fraction; ``None`` when nothing was named)."""

    hop: str
    kind: str
    named: str
    right: bool
    excess_ms: float | None
    error: float | None
    injected_runs: int
    tail_runs: int
    tail_stalls: int
    #: The injected point's own p99 over its median in the runs without the delay.
    floor_ms: float | None
    headline: str


def run_trial(ctx: BenchContext, fault: LatencyFault, index: int) -> Trial:
    """One suite, ``truth_runs`` runs, one attribution (see the module docstring)."""
    delay_ms = fault.delay.total_seconds() * 1000
    data_dir = ctx.suite_dir(f"truth-{fault.hop}-{fault.kind}-{index}")
    spec = f"delay={fault.hop}:{fault.kind}:{delay_ms:g}ms:{fault.fraction}"
    options = SuiteOptions(tracing=True, env={**_ENV, "CRONWAVE_FAULT": spec})
    runs = ctx.sizes.truth_runs
    with own_database(ctx.backend, "truth") as backend:
        config = replace(suite_config(backend, data_dir, options), test_hooks=True)
        suite = Suite(config)
        try:
            suite.start()
            target = Target(
                suite.store_addr,
                suite.dispatcher_addr,
                suite.redis_url,
                config.env["CRONWAVE_NAMESPACE"],
                tls=suite.tls(),
            )
            report = drive(
                target,
                runs=runs,
                concurrency=1,
                warmup=WARMUP,
                timeout=timedelta(seconds=60 + runs),
            )
        finally:
            suite.stop()  # a stopped service has flushed all its spans
    if report.unfinished or report.refused or report.states != {"SUCCEEDED": runs}:
        raise RuntimeError(f"truth trial {index}: not every run succeeded: {report.summary()}")
    traced = select_runs(build_runs(load_spans(Path(data_dir))), RunFilter(since=report.since))
    return judge(traced, fault)


def judge(runs: Sequence[Run], fault: LatencyFault) -> Trial:
    """Whether the waterfall's headline over ``runs`` names ``fault`` right."""
    delay_ms = fault.delay.total_seconds() * 1000
    slowed = {
        r.run_id
        for r in runs
        if r.fire_time is not None and fault.selected(run_key(r.schedule_id, r.fire_time))
    }
    tail = attribute_tail(runs)
    threshold_ns = (tail.threshold_ms or 0.0) * 1e6
    above = [r for r in runs if (r.end_to_end_ns or 0) > threshold_ns]
    top = tail.top
    named = f"{top.hop}:{top.kind}" if top is not None and top.excess_ms > 0 else "nothing"
    error = None if top is None else abs(top.excess_ms - delay_ms) / delay_ms
    right = (
        top is not None
        and (top.hop, top.kind) == (fault.hop, fault.kind)
        and f"{fault.kind} in {fault.hop}" in tail.headline
        and error is not None
        and error <= TOLERANCE
    )
    # The point's own tail without the cause: the stalls the rule had to see past.
    point = (fault.hop, fault.kind)
    unslowed = [r for r in runs if r.run_id not in slowed and r.end_to_end_ns is not None]
    floor_ms = own_tail_ms(unslowed, point) if len(unslowed) > 1 else None
    return Trial(
        fault.hop,
        fault.kind,
        named,
        right,
        None if top is None else top.excess_ms,
        error,
        len(slowed),
        len(above),
        sum(1 for r in above if r.run_id not in slowed),
        floor_ms,
        tail.headline,
    )


def own_tail_ms(runs: Sequence[Run], point: tuple[str, str]) -> float:
    """How far above its median all of ``point``'s own slowest 1% of ``runs`` (at least
    three) lie, recurring or not: its p99 over its median, as the attribution counts
    its slowest runs."""
    values = sorted(r.kind_ns.get(point, 0) for r in runs)
    slowest = min(len(values), max(MIN_RUNS_PER_CAUSE, math.ceil(len(values) * TAIL_SHARE)))
    return (values[len(values) - slowest] - quantile(values, 0.5)) / 1e6


def table(trials: list[Trial]) -> str:
    """The trial table: per injection point and in all, trials, named right and the
    delay error of the headline (median and worst)."""
    lines = [
        "| injected | trials | named right | delay error (median, worst) | stalls in tail "
        "| its own p99 without the delay (median) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    groups = [(f"{h}:{k}", [t for t in trials if (t.hop, t.kind) == (h, k)]) for h, k in POINTS]
    for label, group in [*groups, ("all", trials)]:
        if not group:
            continue
        errors = [t.error for t in group if t.error is not None]
        said = f"{statistics.median(errors):.0%}, {max(errors):.0%}" if errors else "n/a"
        stalls = sum(t.tail_stalls for t in group)
        tails = sum(t.tail_runs for t in group)
        right = sum(t.right for t in group)
        floors = [t.floor_ms for t in group if t.floor_ms is not None]
        floor = f"+{statistics.median(floors):.1f} ms" if floors and label != "all" else ""
        lines.append(
            f"| {label} | {len(group)} | {right} ({right / len(group):.0%}) | {said} "
            f"| {stalls} of {tails} | {floor} |"
        )
    return "\n".join(lines)


def run_truth(ctx: BenchContext) -> Result:
    sizes = ctx.sizes
    delay = timedelta(milliseconds=sizes.truth_delay_ms)
    result = Result("truth")
    ctx.say(
        f"truth: {sizes.truth_trials} trials of {sizes.truth_runs} runs, "
        f"{sizes.truth_delay_ms} ms into {FRACTION:.0%} of runs at one hop and kind"
    )
    trials: list[Trial] = []
    for index in range(sizes.truth_trials):
        hop, kind = POINTS[index % len(POINTS)]
        trial = run_trial(ctx, LatencyFault(hop, kind, delay, FRACTION), index)
        trials.append(trial)
        ctx.say(
            f"truth trial {index + 1}/{sizes.truth_trials} {hop}:{kind}: "
            f"{'right' if trial.right else 'WRONG'}; {trial.headline}"
        )
    text = table(trials)
    ctx.say(text)
    right = sum(t.right for t in trials)
    figures: dict[str, Any] = {
        "delay_ms": sizes.truth_delay_ms,
        "fraction": FRACTION,
        "runs_per_trial": sizes.truth_runs,
        "trials": [t.__dict__ for t in trials],
        "named_right": right,
        "table": text,
    }
    result.figures = figures
    for line in text.splitlines()[2:]:
        point, count, named, error, stalls, floor = [c.strip() for c in line.strip("|").split("|")]
        right_of = named.replace(" (", f" of {count} (", 1)
        said = f"{right_of}; delay error {error}; stalls in tail {stalls}"
        result.row(f"{point}: named right", said + (f"; own p99 {floor}" if floor else ""))
    share = right / len(trials) if trials else 0.0
    result.row(
        f"headline names a {sizes.truth_delay_ms} ms cause",
        f"{right} of {len(trials)} ({share:.0%})",
        f">= {TARGET:.0%}, delay within {TOLERANCE:.0%}",
        share >= TARGET if trials else None,
    )
    return result
