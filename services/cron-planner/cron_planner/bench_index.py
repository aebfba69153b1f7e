"""Time the planner's schedule heap in one process, for the planner-memory benchmark
(``cronwave_bench.planner_memory``).

    python -m cron_planner.bench_index FIRES < schedules.jsonl

Each input line is ``{"id": ..., "cron": ..., "time_zone": ...}``. The schedules are
loaded into a ``ScheduleIndex`` as a planner loads them; then ``FIRES`` times the next
due slot is found and fired (``peek`` + ``advance``: the O(log n) pop and the next fire
time). Prints ``{"p50": .., "p99": .., "max": ..}`` in microseconds.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime

from cron_planner.schedule_index import ScheduleIndex
from cronwave_core.domain.spec import ScheduleDef, Spec


def main() -> None:
    fires = int(sys.argv[1])
    now = datetime.now(UTC)
    rows = [json.loads(line) for line in sys.stdin]
    index = ScheduleIndex()
    index.load(
        (
            (
                ScheduleDef(
                    row["id"], Spec(cron=(row["cron"],), time_zone=row["time_zone"]), revision=i + 1
                ),
                now,
            )
            for i, row in enumerate(rows)
        ),
        revision=len(rows),
    )
    samples = []
    for _ in range(min(fires, len(rows))):
        t0 = time.perf_counter()
        slot = index.peek()
        if slot is None:
            break
        index.advance(slot, slot.fire_time, 1)
        samples.append((time.perf_counter() - t0) * 1e6)
    samples.sort()

    def at(q: float) -> float:
        return samples[min(len(samples) - 1, int(q * len(samples)))] if samples else 0.0

    print(json.dumps({"p50": at(0.5), "p99": at(0.99), "max": samples[-1] if samples else 0.0}))


if __name__ == "__main__":
    main()
