"""MISSED rows on their way to the store: a row waits for its slot's fire time (the
store records a slot MISSED only once it is due), and is then sent once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cron_planner.backoff import Backoff
from cron_planner.fire_stats import FireStats
from cron_planner.missed_rows import MissedRows
from cron_planner.work import Missed

T0 = datetime(2030, 1, 7, 12, 0, tzinfo=UTC)


@dataclass
class Store:
    calls: list[list[tuple[str, datetime, str]]] = field(default_factory=list)

    def record_missed(self, slots: Sequence[Missed], token: int) -> list[str]:
        self.calls.append([(m.schedule_id, m.fire_time, m.reason) for m in slots])
        return []


def test_a_row_decided_ahead_of_its_slot_waits_for_its_fire_time() -> None:
    # Given a slot decided 5 s ahead of its fire time (the dispatch lead), then
    # skipped, beside a slot whose fire time has passed
    store = Store()
    rows = MissedRows(store, Backoff(), FireStats())  # type: ignore[arg-type]
    ahead = T0 + timedelta(seconds=5)
    rows.queue([Missed("a", ahead, "overlap_skip"), Missed("b", T0, "paused")], 7, T0)

    # When the loop steps before the first slot's fire time
    rows.flush(T0)

    # Then only the row of the past slot is sent; the other waits for its fire time
    assert store.calls == [[("b", T0, "paused")]]
    assert (len(rows), rows.next_try(), rows.due(T0)) == (1, ahead, 0)

    # And it is sent once the loop steps at its fire time
    rows.flush(ahead)
    assert store.calls[1:] == [[("a", ahead, "overlap_skip")]]
    assert len(rows) == 0 and rows.next_try() is None
