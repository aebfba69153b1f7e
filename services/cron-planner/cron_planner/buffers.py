"""Fires buffered behind a run still in flight (overlap policies ``buffer_one`` and
``buffer_all``), per schedule, oldest fire first.

The fire loop polls the schedules that have a buffer -- a bounded number per round, in
turn -- and starts the oldest buffered fire once nothing of its schedule is in flight.
Each buffered fire has a placeholder in the store (see ``work``), so a new leader picks
it up if this one goes away. Not thread-safe: the fire loop owns it.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict

from cron_planner.work import Fire


class Buffers:
    def __init__(self) -> None:
        self._by_schedule: OrderedDict[str, list[Fire]] = OrderedDict()

    def __len__(self) -> int:
        return sum(len(fires) for fires in self._by_schedule.values())

    def __bool__(self) -> bool:
        return bool(self._by_schedule)

    def count(self, schedule_id: str) -> int:
        return len(self._by_schedule.get(schedule_id, ()))

    def add(self, fire: Fire) -> None:
        fires = self._by_schedule.setdefault(fire.schedule_id, [])
        if any(f.fire_time == fire.fire_time for f in fires):
            return  # the same slot buffered twice is one fire
        bisect.insort(fires, fire, key=lambda f: f.fire_time)

    def pop_oldest(self, schedule_id: str) -> Fire | None:
        fires = self._by_schedule.get(schedule_id)
        if not fires:
            return None
        fire = fires.pop(0)
        if not fires:
            del self._by_schedule[schedule_id]
        return fire

    def take(self, schedule_id: str) -> list[Fire]:
        """Every buffered fire of the schedule, which leaves the buffer."""
        return self._by_schedule.pop(schedule_id, [])

    def clear(self) -> list[Fire]:
        fires = [f for fs in self._by_schedule.values() for f in fs]
        self._by_schedule.clear()
        return fires

    def next_round(self, limit: int) -> list[str]:
        """Up to ``limit`` schedules to poll now; the ones polled move to the back, so
        every schedule with a buffer gets its turn."""
        chosen = list(self._by_schedule)[:limit]
        for schedule_id in chosen:
            self._by_schedule.move_to_end(schedule_id)
        return chosen
