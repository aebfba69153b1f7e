"""A start the store refuses because its schedule was paused (before the planner heard
of the pause): the slot is MISSED with reason paused, as a fire the planner itself
held back for a pause is (the fire loop's rig: ``test_fire_loop``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from cronwave_core.errors import SchedulePaused
from tests.cron_planner.test_fire_loop import T0, Rig, make_rig


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = make_rig()
    yield r
    r.loop.stop()


def test_a_start_refused_for_a_pause_is_missed_paused(rig: Rig) -> None:
    # Given a dispatcher that refuses the start as the store does for a paused schedule
    rig.dispatcher.failures.append(SchedulePaused("s"))

    # When the schedule's slot comes
    rig.add("s", "* * * * *", since=T0 - timedelta(seconds=40))
    rig.run_until(T0 + timedelta(seconds=20))

    # Then it is recorded MISSED, reason paused, once, and not retried
    assert rig.ledger.final() == [("s", "12:00", "paused")]
    assert len(rig.dispatcher.calls) == 1
