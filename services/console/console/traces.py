"""The waterfalls the console draws, from the suite's spans (``cronwave_waterfall``,
the code behind ``cronwave waterfall``): one run's, and that of the runs of a scenario.

Spans are read from the local span store (``<data dir>/spans``) -- or, where the
services export them over OTLP (``OTEL_EXPORTER_OTLP_ENDPOINT``, as in Kubernetes) and
``CRONWAVE_JAEGER_URL`` is set, from that Jaeger's query service (the last hour's
traces through the dispatcher, which every run crosses). Reading them again for every
page would cost as much as the page is worth, so the runs built from them are kept
until a span file changes (size or modification time), or for ``JAEGER_TTL``.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from cronwave_core.errors import CronwaveError
from cronwave_waterfall import (
    JaegerQuery,
    RunFilter,
    query_jaeger,
    render_fragment,
    render_run,
    waterfall,
)
from cronwave_waterfall.local_store import read_local_store, span_files
from cronwave_waterfall.runs import Run, build_runs

log = logging.getLogger("console")

#: The triggers a scenario can pick (``cronwave_core.domain.runs.Trigger``'s values).
TRIGGERS = ("scheduled", "manual", "backfill", "catchup")
CACHE_HITS = ("local", "redis", "miss")
#: How long spans read from Jaeger are kept before it is asked again.
JAEGER_TTL = timedelta(seconds=10)


@dataclass(frozen=True)
class Scenario:
    """Which runs a waterfall covers; ``None`` everywhere: every run but backfill and
    catch-up runs, their own population (``cronwave_waterfall.selection``)."""

    cache_hit: str | None = None
    trigger: str | None = None
    schedule_id: str | None = None
    last: int | None = None

    @classmethod
    def parse(cls, query: dict[str, str]) -> Scenario:
        """From a page's query string; a value outside the choices means "any"."""
        hit = query.get("cache_hit") or None
        trigger = query.get("trigger") or None
        last = query.get("last", "")
        return cls(
            cache_hit=hit if hit in CACHE_HITS else None,
            trigger=trigger if trigger in TRIGGERS else None,
            schedule_id=(query.get("schedule_id") or "").strip()[:200] or None,
            last=int(last) if last.isdigit() and 0 < int(last) <= 100_000 else None,
        )


class SpanRuns:
    """The runs of the spans under ``spans_dir`` (or of ``jaeger``'s), rebuilt when
    a span file changes (or after ``JAEGER_TTL``)."""

    def __init__(self, spans_dir: Path, jaeger: JaegerQuery | None = None) -> None:
        self.spans_dir = spans_dir
        self.jaeger = jaeger
        self._lock = threading.Lock()
        self._key: object = None
        self._runs: list[Run] = []

    def runs(self) -> list[Run]:
        if self.jaeger is not None:
            key: object = int(time.monotonic() // JAEGER_TTL.total_seconds())
            with self._lock:
                if key != self._key:
                    try:
                        self._runs = build_runs(query_jaeger(self.jaeger))
                    except CronwaveError as exc:  # keep what was read last
                        log.warning("spans from Jaeger: %s", exc)
                    self._key = key
                return self._runs
        files = span_files(self.spans_dir) if self.spans_dir.is_dir() else []
        key = tuple((str(f), st.st_size, st.st_mtime_ns) for f in files for st in [f.stat()])
        with self._lock:
            if key != self._key:
                spans = read_local_store(self.spans_dir) if files else iter(())
                self._runs, self._key = build_runs(spans), key
            return self._runs

    def of_run(self, run_id: str) -> Run | None:
        return next((r for r in self.runs() if r.run_id == run_id), None)

    def scenario_html(self, scenario: Scenario) -> tuple[str, int]:
        """The waterfall of ``scenario``'s runs, as the HTML the CLI's page holds, and
        how many runs it covers."""
        selection = RunFilter(
            last=scenario.last,
            schedule_id=scenario.schedule_id,
            scenario=scenario.cache_hit,
            trigger=scenario.trigger,
        )
        chart = waterfall(self.runs(), selection)
        return render_fragment(chart), chart.runs

    def run_html(self, run_id: str) -> str | None:
        """One run's waterfall (its own hops where they happened, by kind: no
        percentiles of one sample), or ``None`` when no span of the run has been
        exported yet."""
        run = self.of_run(run_id)
        if run is None:
            return None
        return render_run(run)
