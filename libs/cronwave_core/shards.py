"""Planner shards: which shard a schedule is in, the lease scope of a shard, and which
live planner should hold each shard.

A schedule's shard is a stable hash of its id (BLAKE2b, not Python's ``hash``, which
changes per process), so every planner, leader-election and the workflow-store agree
on it without asking anyone. Each shard is its own lease scope,
``planner-shard-<k>-of-<n>``, with its own fencing token: the store refuses a write
whose token is older than the newest seen for that shard, and one whose schedule is
not in the shard its scope names.

Shards are divided by rendezvous (highest random weight) hashing with bounded loads
over the live planners: each shard, in order, goes to the planner with the highest
``weight(planner, shard)`` among those holding fewer than ``ceil(n / planners)``.
Every planner computes the same answer from the same member list, with no
coordinator. Plain rendezvous hashing moves only the shards a joining planner wins or
a leaving one held, but its split is uneven (up to 28 of 64 shards on one of four
planners); the bound makes it even (at most ``ceil(n / planners)`` each) at the cost
of a few more moves (at most 21 when a fifth planner joins four over 64 shards, 24
when one of four leaves, over 200 random namings; 13 and 16 at the least). Leases and
fencing make a disagreement (two planners briefly seeing different member lists)
safe: a shard is granted to one planner at a time, and a write under an older token
is refused.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable

from cronwave_core.errors import InvalidArgument

#: The planners' single lease when planning is not sharded (one shard).
SINGLE_SCOPE = "planner"
MAX_SHARDS = 4096
_SCOPE = re.compile(r"planner-shard-(\d{1,4})-of-(\d{1,4})")


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def shard_of(schedule_id: str, count: int) -> int:
    """The shard of ``schedule_id`` among ``count`` shards (0 .. count-1)."""
    if count <= 1:
        return 0
    return _digest(schedule_id) % count


def shard_scope(shard: int, count: int) -> str:
    """The lease scope of ``shard`` (``planner`` when there is one shard)."""
    if count <= 1:
        return SINGLE_SCOPE
    return f"planner-shard-{shard}-of-{count}"


def shard_scopes(count: int) -> tuple[str, ...]:
    """Every shard's scope, in shard order."""
    return tuple(shard_scope(k, count) for k in range(max(1, count)))


def parse_scope(scope: str) -> tuple[int, int] | None:
    """``(shard, count)`` of a shard scope; None for any other scope."""
    match = _SCOPE.fullmatch(scope)
    if match is None:
        return None
    shard, count = int(match.group(1)), int(match.group(2))
    if not 0 <= shard < count <= MAX_SHARDS:
        return None
    return shard, count


def in_scope(schedule_id: str, scope: str) -> bool:
    """Whether a write of ``schedule_id`` may be fenced under ``scope``: any schedule
    under a scope that is not a shard's, else only the shard's own schedules."""
    parsed = parse_scope(scope)
    return parsed is None or shard_of(schedule_id, parsed[1]) == parsed[0]


def weight(member: str, shard: int) -> int:
    return _digest(f"{member}\x00{shard}")


def division(members: Collection[str], count: int) -> dict[int, str]:
    """Which member should hold each of ``count`` shards (empty when no members)."""
    if not members:
        return {}
    cap = -(-count // len(members))
    load = dict.fromkeys(members, 0)
    out: dict[int, str] = {}
    for shard in range(count):
        ranked = sorted(members, key=lambda m: (weight(m, shard), m), reverse=True)
        chosen = next(m for m in ranked if load[m] < cap)
        load[chosen] += 1
        out[shard] = chosen
    return out


def assigned(me: str, members: Iterable[str], count: int) -> frozenset[int]:
    """The shards ``me`` should hold among ``members`` (``me`` counted even if absent)."""
    everyone = set(members) | {me}
    return frozenset(k for k, m in division(everyone, count).items() if m == me)


def standby(me: str, members: Iterable[str], count: int) -> frozenset[int]:
    """The shards ``me`` would win, beyond its own, if any one other member left: what
    a warm standby loads ahead, so that a takeover needs no load. Bounded loads move
    a few shards between survivors too, so the union over the others is about as many
    shards again as ``me`` holds (11 to 22 besides its 16 for four planners over 64
    shards; all the other's for two planners)."""
    everyone = set(members) | {me}
    mine = assigned(me, everyone, count)
    spare: set[int] = set()
    for gone in everyone - {me}:
        spare |= assigned(me, everyone - {gone}, count)
    return frozenset(spare - mine)


def shard_list(values: Iterable[int], count: int, field: str) -> frozenset[int]:
    """Shard numbers of a request, each in 0 .. count-1, else ``InvalidArgument``."""
    if not 1 <= count <= MAX_SHARDS:
        raise InvalidArgument(f"{field}.count", f"must be between 1 and {MAX_SHARDS}, got {count}")
    shards = frozenset(int(v) for v in values)
    bad = sorted(k for k in shards if not 0 <= k < count)
    if bad:
        raise InvalidArgument(
            f"{field}.shards", f"must each be between 0 and {count - 1}, got {bad[0]}"
        )
    return shards
