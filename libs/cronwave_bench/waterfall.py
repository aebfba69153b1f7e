"""``waterfall``: where the time of the runs above went, hop by hop.

The spans the traced suites of ``single``, ``burst`` and ``throughput`` wrote to
their local span stores go through ``cronwave_waterfall`` (the code behind
``cronwave waterfall``): per hop, the p50 and p99 of its wall time, and where the hop
sits relative to the nominal fire time (negative: before it, thanks to the dispatch
lead). Run alone, it first runs a short ``single`` of its own.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from cronwave_bench.context import BenchContext
from cronwave_bench.report import Result, fmt_ms
from cronwave_bench.single import run_single
from cronwave_waterfall import build_runs, load_spans, waterfall

_OWN_FIRES = 20


def run_waterfall(ctx: BenchContext) -> Result:
    result = Result("waterfall")
    if not ctx.span_dirs:
        own = BenchContext(
            ctx.backend,
            ctx.work_dir,
            ctx.sizes.scaled(single_fires=min(_OWN_FIRES, ctx.sizes.single_fires)),
            ctx.say,
        )
        run_single(own)
        ctx.span_dirs.update(own.span_dirs)
        result.notes.append(f"no earlier scenario ran traced; measured a {_OWN_FIRES}-fire single")
    figures: dict[str, Any] = {}
    for source, data_dir in ctx.span_dirs.items():
        spans_dir = data_dir / "spans"
        if not spans_dir.exists():
            continue
        runs = [r for r in build_runs(load_spans(spans_dir)) if r.hop_ns]
        chosen = waterfall(runs)
        figures[source] = {
            "runs": chosen.runs,
            "hops": {
                row.hop: {
                    **asdict(row.stats),
                    "offset_ms": row.offset_ms,
                    "end_offset_ms": row.end_offset_ms,
                    "kinds": {k.kind: asdict(k.stats) for k in row.kinds},
                }
                for row in chosen.hops
            },
            "end_to_end": asdict(chosen.end_to_end) if chosen.end_to_end else None,
            "lateness": asdict(chosen.lateness) if chosen.lateness else None,
        }
        for row in chosen.hops:
            where = "" if row.offset_ms is None else f", starts at {fmt_ms(row.offset_ms)}"
            result.row(
                f"{source}: {row.hop}",
                f"p50 {fmt_ms(row.stats.p50_ms)}, p99 {fmt_ms(row.stats.p99_ms)}{where}",
            )
        if chosen.lateness:
            result.row(
                f"{source}: lateness (spans)",
                f"p50 {fmt_ms(chosen.lateness.p50_ms)}, p99 {fmt_ms(chosen.lateness.p99_ms)} "
                f"over {chosen.lateness.count} runs",
            )
    result.figures = figures
    if not figures:
        result.status = "not available"
        result.notes.append("no spans were written (tracing off, or OTLP export configured)")
    return result
