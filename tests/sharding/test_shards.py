"""cronwave_core.shards: a schedule's shard is stable, shards spread evenly over the
planners, and a planner joining or leaving moves only the shards it wins or held."""

from __future__ import annotations

from collections import Counter

import pytest

from cronwave_core.errors import InvalidArgument
from cronwave_core.shards import (
    assigned,
    division,
    in_scope,
    parse_scope,
    shard_list,
    shard_of,
    shard_scope,
)

SHARDS = 64


def _division(members: list[str]) -> dict[int, str]:
    return division(members, SHARDS)


def test_a_schedules_shard_is_a_stable_hash_of_its_id() -> None:
    # The same id lands in the same shard in every process (not Python's salted hash)
    # pinned: a changed hash would move every schedule of a running deployment
    assert shard_of("nightly-billing", SHARDS) == 60
    assert shard_of("nightly-billing", 1) == 0
    counts = Counter(shard_of(f"s-{i}", SHARDS) for i in range(64_000))
    assert len(counts) == SHARDS
    assert max(counts.values()) < 1.15 * 1000 and min(counts.values()) > 0.85 * 1000


def test_a_shard_scope_names_its_shard_and_count() -> None:
    assert shard_scope(0, 1) == "planner"
    assert shard_scope(7, 64) == "planner-shard-7-of-64"
    assert parse_scope("planner-shard-7-of-64") == (7, 64)
    assert parse_scope("planner") is None
    assert parse_scope("planner-shard-64-of-64") is None
    sid = "nightly-billing"
    assert in_scope(sid, shard_scope(shard_of(sid, SHARDS), SHARDS))
    assert not in_scope(sid, shard_scope((shard_of(sid, SHARDS) + 1) % SHARDS, SHARDS))
    assert in_scope(sid, "planner")


def test_shards_are_divided_evenly_and_a_join_or_leave_moves_a_bounded_share() -> None:
    # Given four planners
    members = [f"planner-{i}@host" for i in range(4)]
    before = _division(members)
    # Then each holds a quarter, and each planner's own view agrees
    assert sorted(Counter(before.values()).values()) == [16, 16, 16, 16]
    for m in members:
        assert assigned(m, members, SHARDS) == {k for k, o in before.items() if o == m}

    # When a fifth joins: it gets its share, and few others move (13 at the least)
    joined = _division([*members, "planner-4@host"])
    moved = {k for k in range(SHARDS) if joined[k] != before[k]}
    assert max(Counter(joined.values()).values()) == 13
    assert sum(1 for k in moved if joined[k] == "planner-4@host") == 13
    assert len(moved) <= 2 * 13

    # When one leaves: its shards go to the others, and few others move (16 at least)
    left = _division(members[1:])
    moved = {k for k in range(SHARDS) if left[k] != before[k]}
    assert {k for k, o in before.items() if o == members[0]} <= moved
    assert len(moved) <= 2 * 16 and max(Counter(left.values()).values()) == 22

    # And no members, no division
    assert division([], SHARDS) == {}


def test_a_request_names_only_shards_of_the_count() -> None:
    assert shard_list([0, 3], 4, "shards") == {0, 3}
    with pytest.raises(InvalidArgument, match="between 0 and 3, got 4"):
        shard_list([4], 4, "shards")
    with pytest.raises(InvalidArgument, match=r"shards\.count"):
        shard_list([], 0, "shards")
