"""Leases in Redis, one per scope, each with a fencing token that strictly increases.

Every operation is one Lua script, so it is atomic against every other candidate.
Keys: ``<namespace>:lease:<scope>`` (a hash: holder, owner, token, ttl in ms; it
expires with the lease) and ``<namespace>:fence:<scope>`` (the newest token granted
in this Redis; it never expires).

A lease belongs to the pair that campaigned for it: the candidate name and the
``owner``, the caller's authenticated identity (``service:cron-planner``). Renew and
Resign must come from both: a caller that names the holder but speaks as another
identity is refused (``LeaseOwnedByAnother``), and so is one naming another candidate
(``LeaseHeldByAnother``), so nobody resigns or keeps alive a lease on another's behalf.
The holder's own stale calls (a token of an earlier term, after it campaigned again)
change nothing: ``ok`` is false and the current lease stays. No reply reveals the
token of a lease to anyone but its holder: a lease as observed, or as a refused
caller sees it, has token 0.

Tokens are not counted in Redis: a new holder's token is issued by the
workflow-store (``Issue``), which keeps the newest token it issued durably and
accepts no other, so tokens keep increasing when Redis loses its data or is restored
from an old snapshot, and no caller can make one up. When the store cannot be asked,
the campaign fails with ``Unavailable``: no lease is granted that could not write.
A token is issued only once the lease was seen free; if a rival took it meanwhile,
the token is left unused (the store accepts tokens up to the newest issued, and a
write is still refused when older than the newest it has seen).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import redis

from cronwave_core.errors import (
    InvalidArgument,
    LeaseHeldByAnother,
    LeaseOwnedByAnother,
    Unavailable,
)
from cronwave_core.shards import shard_scope

MIN_TTL = timedelta(seconds=1)
# A token issued while a rival was granted a newer one is not used; the campaign asks
# for another, this many times at most (rivals racing for one free lease).
_ISSUE_ATTEMPTS = 3

# Replies of every script: {status, holder, token, remaining ms, ttl ms}; the token is
# 0 unless the caller holds the lease. Status: 1 done; 0 not done (the lease is free,
# or the holder's token is not this one); -4 another candidate holds it; -5 this
# candidate holds it under another owner; -6 its ttl is above the maximum.
# Campaign's ARGV[3]: 'ask' (is the lease free? status -1 when it is), or the token to
# grant it with (status -3 when a newer token was granted in this Redis meanwhile).
_CAMPAIGN = """
local lease = redis.call('HMGET', KEYS[1], 'holder', 'owner', 'token', 'ttl')
if lease[1] and (lease[1] ~= ARGV[1] or lease[2] ~= ARGV[4]) then
  return {0, lease[1], 0, redis.call('PTTL', KEYS[1]), tonumber(lease[4])}
end
if lease[1] then
  redis.call('HSET', KEYS[1], 'ttl', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, lease[1], tonumber(lease[3]), tonumber(ARGV[2]), tonumber(ARGV[2])}
end
if ARGV[3] == 'ask' then
  return {-1, '', 0, 0, 0}
end
local granted = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = tonumber(ARGV[3])
if token <= granted then
  return {-3, '', 0, 0, 0}
end
redis.call('SET', KEYS[2], ARGV[3])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'owner', ARGV[4], 'token', ARGV[3], 'ttl', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, ARGV[1], token, tonumber(ARGV[2]), tonumber(ARGV[2])}
"""

# Whose lease is KEYS[1], for Renew and Resign (ARGV: candidate, token, owner): the
# status to refuse with, or nil when the caller may go on. A lease written before
# leases had owners (no 'owner' field) is its candidate's with the right token.
_WHOSE = """
local function refusal(lease)
  if lease[1] ~= ARGV[1] then
    return -4
  end
  if lease[2] and lease[2] ~= ARGV[3] then
    return -5
  end
  if lease[3] ~= ARGV[2] then
    return 0
  end
  return nil
end
"""

# ARGV[4]: the longest ttl granted now (a lease granted under a larger maximum is not
# renewed past it).
_RENEW = (
    _WHOSE
    + """
local lease = redis.call('HMGET', KEYS[1], 'holder', 'owner', 'token', 'ttl')
if not lease[1] then
  return {0, '', 0, 0, 0}
end
local status = refusal(lease)
if status == nil and tonumber(lease[4]) > tonumber(ARGV[4]) then
  status = -6
end
if status ~= nil then
  return {status, lease[1], 0, redis.call('PTTL', KEYS[1]), tonumber(lease[4])}
end
if not lease[2] then
  redis.call('HSET', KEYS[1], 'owner', ARGV[3])
end
redis.call('PEXPIRE', KEYS[1], lease[4])
return {1, lease[1], tonumber(lease[3]), tonumber(lease[4]), tonumber(lease[4])}
"""
)

_RESIGN = (
    _WHOSE
    + """
local lease = redis.call('HMGET', KEYS[1], 'holder', 'owner', 'token', 'ttl')
if not lease[1] then
  return {0, '', 0, 0, 0}
end
local status = refusal(lease)
if status ~= nil then
  return {status, lease[1], 0, redis.call('PTTL', KEYS[1]), tonumber(lease[4])}
end
redis.call('DEL', KEYS[1])
return {1, '', 0, 0, 0}
"""
)

# The live members of a group (KEYS[1], a sorted set scored by expiry in ms on Redis's
# clock): ARGV[1] joins or stays for ARGV[2] ms; expired members are dropped.
_MEMBERS = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 4)
return {ms, redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')}
"""

_OBSERVE = """
local lease = redis.call('HMGET', KEYS[1], 'holder', 'ttl')
if not lease[1] then
  return {0, '', 0, 0, 0}
end
return {1, lease[1], 0, redis.call('PTTL', KEYS[1]), tonumber(lease[2])}
"""


@dataclass(frozen=True)
class Lease:
    """A scope's lease as Redis holds it; ``holder`` is empty when nobody holds it."""

    scope: str
    holder: str
    token: int
    ttl: timedelta
    remaining: timedelta


@dataclass(frozen=True)
class ShardSync:
    """One round of a sharded planner: ``held`` (shard, token) pairs to renew,
    ``release`` pairs to resign, ``want`` shards to campaign for, among ``count``
    shards; its membership and every lease last ``ttl``."""

    candidate: str
    count: int
    ttl: timedelta
    held: tuple[tuple[int, int], ...] = ()
    release: tuple[tuple[int, int], ...] = ()
    want: tuple[int, ...] = ()


@dataclass(frozen=True)
class ShardRound:
    """What a ``ShardSync`` round found: the live members, every shard the candidate
    holds afterwards with its token, and how long until the soonest other member's
    membership lapses unless renewed (None: no other member)."""

    members: list[str]
    held: dict[int, int]
    next_lapse: timedelta | None


@dataclass(frozen=True)
class Outcome:
    """The answer to a campaign, renewal or resignation, with the lease as it is now."""

    ok: bool
    lease: Lease


# A new fencing token for a scope, issued by the workflow-store; raises
# ``Unavailable`` when the store cannot be asked.
Issue = Callable[[str], int]


def _ms(td: timedelta) -> int:
    return int(td.total_seconds() * 1000)


class LeaseStore:
    """Campaign, renew, resign and observe leases kept in Redis. ``owner`` is the
    caller's authenticated identity; ``max_ttl`` the longest lease granted or renewed."""

    def __init__(
        self, client: redis.Redis, namespace: str, issue: Issue, max_ttl: timedelta
    ) -> None:
        self._namespace = namespace
        self._issue = issue
        self.max_ttl = max_ttl
        self._campaign = client.register_script(_CAMPAIGN)
        self._renew = client.register_script(_RENEW)
        self._resign = client.register_script(_RESIGN)
        self._observe = client.register_script(_OBSERVE)
        self._members = client.register_script(_MEMBERS)
        self._client = client

    def lease_key(self, scope: str) -> str:
        return f"{self._namespace}:lease:{scope}"

    def fence_key(self, scope: str) -> str:
        return f"{self._namespace}:fence:{scope}"

    def campaign(self, scope: str, candidate: str, ttl: timedelta, owner: str) -> Outcome:
        """Grant ``scope`` to ``candidate`` (for ``owner``) if nobody else holds it.

        The pair that holds the lease already keeps its token and gets the new ttl; a
        new holder gets a token larger than every token issued or seen before. A lease
        held by another pair is not granted, and its token is not shown.
        """
        if ttl > self.max_ttl:
            raise InvalidArgument("ttl", _too_long(ttl, self.max_ttl))
        keys = [self.lease_key(scope), self.fence_key(scope)]
        reply = self._run(self._campaign, keys, [candidate, _ms(ttl), "ask", owner])
        for _ in range(_ISSUE_ATTEMPTS):
            if reply[0] != -1 and reply[0] != -3:
                return self._outcome(scope, reply)
            # The lease is free: the store issues the new holder's token. The second
            # script re-checks everything, so a rival that won meanwhile still wins.
            token = self._issue(scope)
            reply = self._run(self._campaign, keys, [candidate, _ms(ttl), str(token), owner])
        if reply[0] == -3:
            raise Unavailable(f"scope '{scope}': rivals kept taking newer tokens; campaign again")
        return self._outcome(scope, reply)

    def renew(self, scope: str, candidate: str, token: int, owner: str) -> Outcome:
        """Extend the lease by its ttl if ``candidate`` holds it for ``owner`` with
        ``token``. ``ok`` is false when the lease is lost to the caller: it is free, or
        the holder's token is another (a term of the caller's that ended). A lease held
        by another candidate or owner is refused (``LeaseHeldByAnother``,
        ``LeaseOwnedByAnother``), and so is one whose ttl is above ``max_ttl``."""
        args = [candidate, str(token), owner, _ms(self.max_ttl)]
        reply = self._run(self._renew, [self.lease_key(scope)], args)
        self._refuse(scope, candidate, reply)
        return self._outcome(scope, reply)

    def resign(self, scope: str, candidate: str, token: int, owner: str) -> bool:
        """Release the lease if ``candidate`` holds it for ``owner`` with ``token``.
        False, with the lease left alone, when it is free or held under another token
        (a stale resignation of an earlier term); refused, as ``renew``, when another
        candidate or owner holds it."""
        reply = self._run(self._resign, [self.lease_key(scope)], [candidate, str(token), owner])
        self._refuse(scope, candidate, reply)
        return bool(reply[0] == 1)

    def sync(self, request: ShardSync, owner: str) -> ShardRound:
        """A sharded planner's round (see ``ShardSync``). Each lease is checked as
        ``renew``, ``resign`` and ``campaign`` check it; a held shard whose renewal is
        refused for any reason is simply not held any more."""
        if request.ttl > self.max_ttl:
            raise InvalidArgument("ttl", _too_long(request.ttl, self.max_ttl))
        count, candidate = request.count, request.candidate
        members_key = f"{self._namespace}:members:planner-shards-of-{count}"
        try:
            pipe = self._client.pipeline(transaction=False)
            self._members(keys=[members_key], args=[candidate, _ms(request.ttl)], client=pipe)
            for shard, token in request.release:
                key = self.lease_key(shard_scope(shard, count))
                self._resign(keys=[key], args=[candidate, str(token), owner], client=pipe)
            renewals = list(request.held)
            for shard, token in renewals:
                key = self.lease_key(shard_scope(shard, count))
                args: list[str | int] = [candidate, str(token), owner, _ms(self.max_ttl)]
                self._renew(keys=[key], args=args, client=pipe)
            replies = pipe.execute(raise_on_error=False)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise Unavailable(f"redis: {exc}; leases cannot be read or granted") from exc
        if isinstance(replies[0], Exception):
            raise Unavailable("redis: the planners' membership could not be updated")
        now_ms, scored = replies[0]
        until = {_text(m): float(ms) for m, ms in zip(scored[::2], scored[1::2], strict=True)}
        members = sorted(until)
        others = [ms for member, ms in until.items() if member != candidate]
        next_lapse = timedelta(milliseconds=max(0.0, min(others) - now_ms)) if others else None
        held: dict[int, int] = {}
        renewed = replies[1 + len(request.release) :]
        for (shard, token), reply in zip(renewals, renewed, strict=True):
            if not isinstance(reply, Exception) and reply[0] == 1:
                held[shard] = token
        for shard in request.want:
            if shard in held:
                continue
            try:
                outcome = self.campaign(shard_scope(shard, count), candidate, request.ttl, owner)
            except Unavailable:
                break  # the store or Redis is away: the next round asks again
            if outcome.ok:
                held[shard] = outcome.lease.token
        return ShardRound(members, held, next_lapse)

    def observe(self, scope: str) -> Lease:
        """The lease as anyone may see it: holder and ttl, never the token (0)."""
        reply = self._run(self._observe, [self.lease_key(scope)], [])
        return self._outcome(scope, reply).lease

    def _refuse(self, scope: str, candidate: str, reply: list[Any]) -> None:
        status, holder = reply[0], _text(reply[1])
        if status == -4:
            raise LeaseHeldByAnother(scope, candidate, holder)
        if status == -5:
            raise LeaseOwnedByAnother(scope, candidate)
        if status == -6:
            ttl = timedelta(milliseconds=int(reply[4] or 0))
            raise InvalidArgument(
                "ttl",
                f"the lease of scope '{scope}' was granted for {ttl.total_seconds()}s, above "
                f"the maximum of {self.max_ttl.total_seconds()}s now in force; campaign "
                "again (the holder may) for a shorter one",
            )

    @staticmethod
    def _run(script: Any, keys: list[str], args: list[Any]) -> list[Any]:
        try:
            return list(script(keys=keys, args=args))
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise Unavailable(f"redis: {exc}; leases cannot be read or granted") from exc

    @staticmethod
    def _outcome(scope: str, reply: list[Any]) -> Outcome:
        status, holder, token, remaining_ms, ttl_ms = reply
        return Outcome(
            ok=status == 1,
            lease=Lease(
                scope=scope,
                holder=_text(holder),
                token=int(token or 0),
                ttl=timedelta(milliseconds=int(ttl_ms or 0)),
                remaining=timedelta(milliseconds=max(0, int(remaining_ms or 0))),
            ),
        )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


def _too_long(ttl: timedelta, maximum: timedelta) -> str:
    return (
        f"must be at most {maximum.total_seconds()}s, the longest lease granted "
        f"(CRONWAVE_LEASE_MAX_TTL), got {ttl.total_seconds()}s"
    )
