"""Leases in Redis, one per scope, each with a fencing token that strictly increases.

Every operation is one Lua script, so it is atomic against every other candidate.
Keys: ``<namespace>:lease:<scope>`` (a hash: holder, token, ttl in ms; it expires with
the lease) and ``<namespace>:fence:<scope>`` (the counter that tokens are INCRed from;
it never expires).

A new token is only ever issued after the counter has been floored at the newest token
the workflow-store has seen (``floor``), so tokens keep increasing even when Redis loses
its data or is restored from an old snapshot. When the store cannot be asked, a new
token is still issued from an existing counter, but never from a missing one: that
campaign fails with ``Unavailable`` instead of risking a token the store would take
for a newer leader's than it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import redis

from cronwave_core.errors import Unavailable

MIN_TTL = timedelta(seconds=1)
MAX_TTL = timedelta(minutes=5)

# Replies of every script: {status, holder, token, remaining ms, ttl ms}.
_CAMPAIGN = """
local holder = redis.call('HGET', KEYS[1], 'holder')
if holder and holder ~= ARGV[1] then
  local lease = redis.call('HMGET', KEYS[1], 'token', 'ttl')
  return {0, holder, tonumber(lease[1]), redis.call('PTTL', KEYS[1]), tonumber(lease[2])}
end
if holder then
  local token = tonumber(redis.call('HGET', KEYS[1], 'token'))
  redis.call('HSET', KEYS[1], 'ttl', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, holder, token, tonumber(ARGV[2]), tonumber(ARGV[2])}
end
local counter = redis.call('GET', KEYS[2])
if ARGV[3] == 'ask' then
  return {-1, '', tonumber(counter or '0'), 0, 0}
end
if ARGV[3] == 'none' then
  if not counter then
    return {-2, '', 0, 0, 0}
  end
elseif not counter or tonumber(counter) < tonumber(ARGV[3]) then
  redis.call('SET', KEYS[2], ARGV[3])
end
local token = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', token, 'ttl', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, ARGV[1], token, tonumber(ARGV[2]), tonumber(ARGV[2])}
"""

_RENEW = """
local lease = redis.call('HMGET', KEYS[1], 'holder', 'token', 'ttl')
if lease[1] == ARGV[1] and lease[2] == ARGV[2] then
  redis.call('PEXPIRE', KEYS[1], lease[3])
  return {1, lease[1], tonumber(lease[2]), tonumber(lease[3]), tonumber(lease[3])}
end
if not lease[1] then
  return {0, '', 0, 0, 0}
end
return {0, lease[1], tonumber(lease[2]), redis.call('PTTL', KEYS[1]), tonumber(lease[3])}
"""

_RESIGN = """
local lease = redis.call('HMGET', KEYS[1], 'holder', 'token')
if lease[1] == ARGV[1] and lease[2] == ARGV[2] then
  redis.call('DEL', KEYS[1])
  return {1, '', 0, 0, 0}
end
return {0, '', 0, 0, 0}
"""

_OBSERVE = """
local lease = redis.call('HMGET', KEYS[1], 'holder', 'token', 'ttl')
if not lease[1] then
  return {0, '', 0, 0, 0}
end
return {1, lease[1], tonumber(lease[2]), redis.call('PTTL', KEYS[1]), tonumber(lease[3])}
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
class Outcome:
    """The answer to a campaign, renewal or resignation, with the lease as it is now."""

    ok: bool
    lease: Lease


# The newest fencing token the workflow-store has seen for a scope; raises
# ``Unavailable`` when the store cannot say.
Floor = Callable[[str], int]


def _ms(td: timedelta) -> int:
    return int(td.total_seconds() * 1000)


class LeaseStore:
    """Campaign, renew, resign and observe leases kept in Redis."""

    def __init__(self, client: redis.Redis, namespace: str, floor: Floor) -> None:
        self._namespace = namespace
        self._floor = floor
        self._campaign = client.register_script(_CAMPAIGN)
        self._renew = client.register_script(_RENEW)
        self._resign = client.register_script(_RESIGN)
        self._observe = client.register_script(_OBSERVE)

    def lease_key(self, scope: str) -> str:
        return f"{self._namespace}:lease:{scope}"

    def fence_key(self, scope: str) -> str:
        return f"{self._namespace}:fence:{scope}"

    def campaign(self, scope: str, candidate: str, ttl: timedelta) -> Outcome:
        """Grant ``scope`` to ``candidate`` if nobody else holds it.

        A candidate that already holds the lease keeps its token and gets the new ttl;
        a new holder gets a token larger than every token issued or seen before.
        """
        keys = [self.lease_key(scope), self.fence_key(scope)]
        reply = self._run(self._campaign, keys, [candidate, _ms(ttl), "ask"])
        if reply[0] != -1:
            return self._outcome(scope, reply)
        # The lease is free: a new token will be issued. Floor it at the store's newest
        # first; the second script re-checks everything, so a rival that won meanwhile
        # still wins.
        try:
            floor = str(self._floor(scope))
        except Unavailable:
            floor = "none"  # issue from the counter only if it exists
        reply = self._run(self._campaign, keys, [candidate, _ms(ttl), floor])
        if reply[0] == -2:
            raise Unavailable(
                f"scope '{scope}': the fencing counter is missing from Redis and the "
                "workflow-store cannot be asked for the newest token it has seen; no "
                "token is issued until the store answers (check CRONWAVE_STORE_ADDR)"
            )
        return self._outcome(scope, reply)

    def renew(self, scope: str, candidate: str, token: int) -> Outcome:
        """Extend the lease by its ttl if ``candidate`` holds it with ``token``;
        otherwise the lease is lost to the caller (``ok`` is false)."""
        reply = self._run(self._renew, [self.lease_key(scope)], [candidate, str(token)])
        return self._outcome(scope, reply)

    def resign(self, scope: str, candidate: str, token: int) -> bool:
        """Release the lease if ``candidate`` holds it with ``token``."""
        reply = self._run(self._resign, [self.lease_key(scope)], [candidate, str(token)])
        return bool(reply[0] == 1)

    def observe(self, scope: str) -> Lease:
        reply = self._run(self._observe, [self.lease_key(scope)], [])
        return self._outcome(scope, reply).lease

    @staticmethod
    def _run(script: Any, keys: list[str], args: list[Any]) -> list[Any]:
        try:
            return list(script(keys=keys, args=args))
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise Unavailable(f"redis: {exc}; leases cannot be read or granted") from exc

    @staticmethod
    def _outcome(scope: str, reply: list[Any]) -> Outcome:
        status, holder, token, remaining_ms, ttl_ms = reply
        if isinstance(holder, bytes):
            holder = holder.decode()
        return Outcome(
            ok=status == 1,
            lease=Lease(
                scope=scope,
                holder=holder,
                token=int(token or 0),
                ttl=timedelta(milliseconds=int(ttl_ms or 0)),
                remaining=timedelta(milliseconds=max(0, int(remaining_ms or 0))),
            ),
        )
