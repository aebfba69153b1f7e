"""MISSED rows on their way to the store: a row waits for its slot's fire time (the
store records a slot MISSED only once it is due), and is then sent once; a placeholder
goes at once; rows a term leaves go under this planner's next token."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cron_planner.backoff import Backoff
from cron_planner.fire_stats import FireStats
from cron_planner.missed_rows import ROWS_A_STEP, MissedRows
from cron_planner.work import Missed
from cronwave_core.errors import Unavailable

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


def test_a_placeholder_goes_at_once_even_ahead_of_its_slot() -> None:
    # Given a fire decided 5 s ahead and put off (its start failed): its placeholder
    store = Store()
    rows = MissedRows(store, Backoff(), FireStats())  # type: ignore[arg-type]
    ahead = T0 + timedelta(seconds=5)
    rows.queue([Missed("a", ahead, "pending:retry")], 7, T0)

    # When the loop steps before its fire time
    rows.flush(T0)

    # Then it is sent: the slot stands in the store before a later one can be recorded
    assert store.calls == [[("a", ahead, "pending:retry")]]
    assert len(rows) == 0


def test_rows_left_by_a_term_go_under_the_next_token_of_this_planner() -> None:
    # Given a final row waiting for its slot and a placeholder the store did not take
    tokens: list[int] = []

    class Away(Store):
        away = 1

        def record_missed(self, slots: Sequence[Missed], token: int) -> list[str]:
            if self.away:
                self.away -= 1
                raise Unavailable("the store is away")
            tokens.append(token)
            return super().record_missed(slots, token)

    store = Away()
    rows = MissedRows(store, Backoff(), FireStats())  # type: ignore[arg-type]
    ahead = T0 + timedelta(seconds=5)
    placeholder = Missed("b", T0, "pending:retry")
    rows.queue([Missed("a", ahead, "overlap_skip"), placeholder], 7, T0)
    rows.flush(T0)
    assert (len(rows), store.calls) == (2, [])

    # When this planner begins its next term (token 8), nobody having led between; a
    # token further on would mean another leader had a term (its rows stay under 7)
    assert rows.retoken(9) == []
    moved = rows.retoken(8)

    # Then both go under token 8 when their turn comes, and the placeholder is handed
    # to the new term (the store could not list it)
    assert sorted(m.schedule_id for m in moved) == ["a", "b"]
    rows.flush(ahead + timedelta(minutes=1))
    assert tokens == [8] and len(rows) == 0


def test_a_backlog_goes_a_batch_a_step_and_a_failed_batch_waits_alone() -> None:
    # Given 1,200 rows due at once (a stall past which many slots were decided)
    class Flaky(Store):
        fail_next = False

        def record_missed(self, slots: Sequence[Missed], token: int) -> list[str]:
            if self.fail_next:
                self.fail_next = False
                raise Unavailable("the store is away")
            return super().record_missed(slots, token)

    store = Flaky()
    rows = MissedRows(store, Backoff(), FireStats())  # type: ignore[arg-type]
    slots = [Missed(f"s{i:04d}", T0 - timedelta(seconds=1200 - i), "paused") for i in range(1200)]
    rows.queue(slots, 7, T0)

    # When the loop steps three times, the second call failing
    rows.flush(T0)
    store.fail_next = True
    rows.flush(T0)
    rows.flush(T0)

    # Then each step sent one call of at most ROWS_A_STEP rows, the oldest first; the
    # failed batch alone waits for its backoff, and nothing else was sent twice
    assert [len(c) for c in store.calls] == [ROWS_A_STEP, 1200 - 2 * ROWS_A_STEP]
    assert store.calls[0][0][0] == "s0000"
    assert store.calls[1][0][0] == f"s{2 * ROWS_A_STEP:04d}"
    assert len(rows) == ROWS_A_STEP and rows.due(T0) == 0
    retry = rows.next_try()
    assert retry is not None and retry > T0
    rows.flush(retry)
    sent = [c[0] for call in store.calls for c in call]
    assert sorted(sent) == [m.schedule_id for m in slots] and len(set(sent)) == 1200
