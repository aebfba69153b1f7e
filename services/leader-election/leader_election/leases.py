"""Leases in Redis, one per scope, each with a fencing token that strictly increases.

Every operation is one Lua script, so it is atomic against every other candidate.
Keys: ``<namespace>:lease:<scope>`` (a hash: holder, token, ttl in ms; it expires with
the lease) and ``<namespace>:fence:<scope>`` (the newest token granted in this Redis;
it never expires).

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

from cronwave_core.errors import Unavailable

MIN_TTL = timedelta(seconds=1)
MAX_TTL = timedelta(minutes=5)
# A token issued while a rival was granted a newer one is not used; the campaign asks
# for another, this many times at most (rivals racing for one free lease).
_ISSUE_ATTEMPTS = 3

# Replies of every script: {status, holder, token, remaining ms, ttl ms}.
# ARGV[3]: 'ask' (is the lease free? status -1 when it is), or the token to grant it
# with (status -3 when a newer token was granted in this Redis meanwhile).
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
if ARGV[3] == 'ask' then
  return {-1, '', 0, 0, 0}
end
local granted = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = tonumber(ARGV[3])
if token <= granted then
  return {-3, '', granted, 0, 0}
end
redis.call('SET', KEYS[2], ARGV[3])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', ARGV[3], 'ttl', ARGV[2])
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


# A new fencing token for a scope, issued by the workflow-store; raises
# ``Unavailable`` when the store cannot be asked.
Issue = Callable[[str], int]


def _ms(td: timedelta) -> int:
    return int(td.total_seconds() * 1000)


class LeaseStore:
    """Campaign, renew, resign and observe leases kept in Redis."""

    def __init__(self, client: redis.Redis, namespace: str, issue: Issue) -> None:
        self._namespace = namespace
        self._issue = issue
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
        for _ in range(_ISSUE_ATTEMPTS):
            if reply[0] != -1 and reply[0] != -3:
                return self._outcome(scope, reply)
            # The lease is free: the store issues the new holder's token. The second
            # script re-checks everything, so a rival that won meanwhile still wins.
            token = self._issue(scope)
            reply = self._run(self._campaign, keys, [candidate, _ms(ttl), str(token)])
        if reply[0] == -3:
            raise Unavailable(f"scope '{scope}': rivals kept taking newer tokens; campaign again")
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
