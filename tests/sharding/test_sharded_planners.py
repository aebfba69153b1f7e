"""Sharded planning on a real suite: three planners divide the shards, each holds and
fires only its shards' schedules; a planner killed with SIGKILL has its shards taken
over by the others, and when it comes back it takes back its share; through all of
it every slot of every schedule has exactly one run. (How long a takeover takes is
the bench's figure, `make bench`.)"""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from cronwave_core.convert import ts_to_dt
from cronwave_core.shards import assigned, standby
from tests.failover.support import LEASE_ENV, log_text
from tests.harness.suites import SuiteFactory
from tests.helpers import eventually
from tests.sharding.support import audit_slots, create_schedules, holders, runs_of, shards_of

pytestmark = pytest.mark.slow

SHARDS = 16
SCHEDULES = 40
# Dispatched at the instant, not ahead: a slot left while a shard changes hands is a
# slot the new holder must fire itself.
ENV = {**LEASE_ENV, "CRONWAVE_PLANNER_SHARDS": str(SHARDS), "CRONWAVE_DISPATCH_LEAD": "0s"}
PLANNER = "cron-planner"
# The feed's log line of each listing: the shards it listed.
LISTED = re.compile(r"loaded \d+ schedules .*?of (?:\d+ more )?shards \[([\d, ]*)\]")


def _all_recorded_after(suite, ids: list[str], instant: datetime) -> bool:  # type: ignore[no-untyped-def]
    """Whether every one of ``ids`` has a run recorded after ``instant``."""
    fresh = {r.schedule_id for r in runs_of(suite, ids) if ts_to_dt(r.created_at) > instant}
    return fresh == set(ids)


def test_planners_split_the_shards_take_over_a_killed_ones_and_give_them_back(
    make_suite: SuiteFactory, drill_of
) -> None:
    # Given three planners sharing 16 shards and 40 schedules firing every second
    suite = make_suite(planners=3, env=ENV)
    drill = drill_of(suite)
    names = drill.planner_names()
    assert len(names) == 3
    ids = create_schedules(suite, SCHEDULES, "sharded")
    created = datetime.now(UTC)
    shard = shards_of(ids, SHARDS)

    # Then the shards are split the way rendezvous hashing over the three says (each
    # planner's name is its process's, with the host: the split is computed, not
    # assumed), and each holds exactly its own and its standby shards' schedules
    candidates = {}
    for name in names:
        status = eventually(lambda n=name: drill.status(n), timeout=60, what=f"{name} answers")
        candidates[name] = status.candidate
    members = list(candidates.values())
    division = {k: name for name in names for k in assigned(candidates[name], members, SHARDS)}
    assert len(division) == SHARDS and len(set(division.values())) >= 2
    owners = eventually(
        lambda: (seen := holders(suite, SHARDS)) == division and seen,
        timeout=60,
        interval=0.2,
        what="every shard held by the planner rendezvous hashing names",
    )

    def holding_own_schedules() -> bool:
        for name in names:
            mine = {k for k, holder in holders(suite, SHARDS).items() if holder == name}
            # and those of its warm standby (loaded, not fired)
            mine |= standby(candidates[name], members, SHARDS)
            status = drill.status(name)
            expected = sum(1 for sid in ids if shard[sid] in mine)
            if status is None or status.schedules != expected:
                return False
        return True

    eventually(holding_own_schedules, timeout=30, interval=0.2, what="each planner's schedules")
    # and every schedule fires, a few times
    eventually(
        lambda: (
            min(Counter(r.schedule_id for r in runs_of(suite, ids)).values(), default=0) >= 3
            and {r.schedule_id for r in runs_of(suite, ids)} == set(ids)
        ),
        timeout=30,
        interval=0.2,
        what="a run of every schedule",
    )

    # When the planner holding the most shards is killed with SIGKILL
    victim = Counter(owners.values()).most_common(1)[0][0]
    lost = {k for k, holder in owners.items() if holder == victim}
    killed_at = drill.end(victim, graceful=False)
    survivors = [n for n in names if n != victim]

    # Then the two others take over its shards
    def taken_over() -> dict[int, str] | None:
        seen = holders(suite, SHARDS)
        return seen if set(seen.values()) <= set(survivors) and "" not in seen.values() else None

    after = eventually(taken_over, timeout=60, interval=0.1, what="the dead planner's shards held")
    assert set(after.values()) == set(survivors)
    # and its shards' schedules fire again, by the new holders
    orphans = [sid for sid in ids if shard[sid] in lost]
    assert orphans
    # (recorded after the kill: runs are recorded ahead of their fire time)
    dead_since = datetime.fromtimestamp(killed_at, UTC)
    eventually(
        lambda: _all_recorded_after(suite, orphans, dead_since),
        timeout=60,
        interval=0.2,
        what="every schedule of the dead planner's shards firing again",
    )

    # When it comes back
    suite.restart(victim)

    # Then it takes back its share (rendezvous gives it the same shards again)
    def given_back() -> bool:
        seen = holders(suite, SHARDS)
        return {k for k, holder in seen.items() if holder == victim} == lost

    eventually(given_back, timeout=60, interval=0.2, what="the restarted planner's shards back")
    back = datetime.now(UTC)
    # and fires them again
    eventually(
        lambda: _all_recorded_after(suite, orphans, back),
        timeout=60,
        interval=0.2,
        what="the returned planner's shards firing",
    )

    # And through the split, the kill, the takeover and the return, every slot of
    # every schedule has exactly one run, none of them MISSED
    # (up to a few seconds ahead: slots are recorded ahead of their fire time)
    through = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    since = created
    eventually(
        lambda: not audit_slots(runs_of(suite, ids), ids, since, through).missing,
        timeout=30,
        interval=0.5,
        what="a run of every slot",
    )
    result = audit_slots(runs_of(suite, ids), ids, since, through)
    assert result.slots >= SCHEDULES * 5
    assert result.duplicates == []
    assert result.missing == []
    assert result.missed == []


def test_a_survivor_takes_over_from_its_warm_standby_without_listing_again(
    make_suite: SuiteFactory, drill_of
) -> None:
    # Given three planners sharing 16 shards and 24 schedules firing every second
    suite = make_suite(planners=3, env=ENV)
    drill = drill_of(suite)
    names = drill.planner_names()
    ids = create_schedules(suite, 24, "standby")
    shard = shards_of(ids, SHARDS)
    candidates = {
        name: eventually(
            lambda n=name: drill.status(n), timeout=60, what=f"{name} answers"
        ).candidate
        for name in names
    }
    members = list(candidates.values())
    own = {name: assigned(candidates[name], members, SHARDS) for name in names}
    spare = {name: standby(candidates[name], members, SHARDS) for name in names}
    eventually(
        lambda: (
            {k: own_name for own_name in names for k in own[own_name]} == holders(suite, SHARDS)
        ),
        timeout=60,
        interval=0.2,
        what="every shard held by the planner rendezvous hashing names",
    )

    # Then each planner holds its standby shards' schedules as well as its own, before
    # anyone dies
    def loaded(name: str) -> bool:
        status = drill.status(name)
        expected = sum(1 for sid in ids if shard[sid] in own[name] | spare[name])
        return status is not None and status.schedules == expected

    eventually(lambda: all(loaded(n) for n in names), timeout=30, interval=0.2, what="loaded")
    victim = max(names, key=lambda n: len(own[n]))
    survivors = [n for n in names if n != victim]
    for name in survivors:
        wins = assigned(candidates[name], [candidates[n] for n in survivors], SHARDS)
        assert wins - own[name] <= spare[name]
    logged = {name: len(log_text(drill, name)) for name in survivors}

    # When the planner holding the most shards is killed with SIGKILL
    killed_at = drill.end(victim, graceful=False)

    # Then the survivors hold its shards
    lost = own[victim]
    eventually(
        lambda: set(holders(suite, SHARDS).values()) == set(survivors),
        timeout=60,
        interval=0.1,
        what="the dead planner's shards held",
    )
    # and fire them again
    orphans = [sid for sid in ids if shard[sid] in lost]
    dead_since = datetime.fromtimestamp(killed_at, UTC)
    eventually(
        lambda: _all_recorded_after(suite, orphans, dead_since),
        timeout=60,
        interval=0.2,
        what="every schedule of the dead planner's shards firing again",
    )
    # without either survivor listing any shard it took over from the store again
    after = holders(suite, SHARDS)
    for name in survivors:
        taken = {k for k in lost if after[k] == name}
        tail = log_text(drill, name)[logged[name] :]
        listed = {int(k) for found in LISTED.findall(tail) for k in found.split(",") if k.strip()}
        assert taken and not (listed & taken), (name, taken, listed)


def test_one_planner_alone_holds_every_shard_and_fires_them_all(
    make_suite: SuiteFactory, drill_of
) -> None:
    # Given one planner over 16 shards and 12 schedules firing every second
    suite = make_suite(planners=1, env=ENV)
    drill = drill_of(suite)
    (name,) = drill.planner_names()
    ids = create_schedules(suite, 12, "alone")
    created = datetime.now(UTC)

    # Then it holds every shard and all the schedules
    eventually(
        lambda: set(holders(suite, SHARDS).values()) == {name},
        timeout=60,
        interval=0.2,
        what="every shard held by the one planner",
    )
    eventually(
        lambda: (status := drill.status(name)) is not None and status.schedules == len(ids),
        timeout=30,
        interval=0.2,
        what="every schedule held",
    )
    # And every slot of every schedule runs once
    through = created.replace(microsecond=0) + timedelta(seconds=5)
    eventually(
        lambda: not audit_slots(runs_of(suite, ids), ids, created, through).missing,
        timeout=30,
        interval=0.5,
        what="a run of every slot",
    )
    result = audit_slots(runs_of(suite, ids), ids, created, through)
    assert result.slots == len(ids) * 5
    assert (result.duplicates, result.missed) == ([], [])
