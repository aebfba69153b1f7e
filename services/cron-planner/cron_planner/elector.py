"""Keeps this planner's lease: campaign until granted, then renew; step down the moment
the lease may be lost.

Leadership is judged on this process's monotonic clock alone. When a Campaign or Renew
succeeds, the lease is valid here until::

    valid_until = (monotonic() when the request was SENT) + ttl - margin
    margin      = max(renew interval, 20% of ttl)

Redis starts the ttl when it runs the script, which is after the request was sent, so
``sent + ttl`` can only be earlier than the lease's real end, never later, however long
the call took. The margin is taken off because two clocks are involved: 20% of the ttl
covers a rate difference between this host's clock and Redis's far larger than real
clocks drift, and at least one renew interval covers the fire that passed its leader
check just before ``valid_until`` and is still on its way to the store. No successor
can be granted before the lease expires in Redis, so within those bounds two planners
never fire at once. Correctness does not rest on timing alone: every fire carries the
fencing token, and the store refuses a token older than the newest it has seen.

``is_leader()`` is true only while ``monotonic() < valid_until``, so the planner stops
firing on time even while a renewal hangs: every Renew has a deadline no longer than
the validity left. A refused renewal steps down at once: ``renewed=false`` (the lease
is free, or held under a newer token), or a status that says the lease is not this
planner's (``REFUSED``: another candidate or identity holds it, or its ttl is above
the server's maximum). ``stop`` resigns, so a successor need not wait out the ttl.

The lease is bound to this planner's candidate name and certificate identity, and
only Campaign and Renew replies to this planner carry its token (``Observe`` shows
none): nothing here reads a token from anywhere else.

A planner campaigns only once ``ready()`` says it knows the schedules: a term begun
with an empty index would learn of the schedules afterwards without the store's newest
runs, and plan them from a minute back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import grpc
from cronwave_proto.v1 import leader_election_service_pb2 as pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as pb_grpc

from cron_planner.metrics import LEADER_CHANGES

log = logging.getLogger("cronwave.planner.elector")

DEFAULT_SCOPE = "planner"
#: Renew statuses that are an answer, not a failure: the lease is not this planner's.
REFUSED = frozenset(
    {
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INVALID_ARGUMENT,
    }
)
_MIN_CALL = 0.01  # seconds: a call that must finish sooner than this is not worth sending


@dataclass(frozen=True)
class Leadership:
    """A snapshot: whether this planner leads, with which token, for how much longer."""

    leader: bool
    token: int
    remaining: timedelta


def safety_margin(ttl: timedelta, renew_interval: timedelta) -> timedelta:
    """How long before the lease's earliest possible expiry this planner stops leading;
    ``ValueError`` when that leaves no time to lead."""
    margin = max(renew_interval, ttl * 0.2)
    if margin >= ttl:
        raise ValueError(
            f"lease ttl {ttl.total_seconds()}s leaves no time to lead after a safety "
            f"margin of {margin.total_seconds()}s; raise CRONWAVE_LEASE_TTL or lower "
            "CRONWAVE_LEASE_RENEW_INTERVAL"
        )
    return margin


class Elector:
    def __init__(
        self,
        channel: grpc.Channel,
        candidate: str,
        *,
        ttl: timedelta,
        renew_interval: timedelta,
        retry_interval: timedelta,
        rpc_timeout: timedelta,
        scope: str = DEFAULT_SCOPE,
        on_change: Callable[[], None] = lambda: None,
        ready: Callable[[], bool] = lambda: True,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        margin = safety_margin(ttl, renew_interval)
        self._stub = pb_grpc.LeaderElectionServiceStub(channel)
        self.candidate = candidate
        self.scope = scope
        self._ttl = ttl
        self._margin = margin
        self._renew_interval = renew_interval.total_seconds()
        self._retry_interval = retry_interval.total_seconds()
        self._rpc_timeout = rpc_timeout.total_seconds()
        self._on_change = on_change
        self._ready = ready
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._token = 0  # the token of the lease held (or last held, until resigned)
        self._valid_until = 0.0
        self._resign_token = 0  # a token to resign before campaigning again
        self._granted_ttl = ttl
        self._next_renew = 0.0  # monotonic instant of the next renewal
        self._last_campaign_error = ""
        self._poke = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.campaigns = 0
        self.renewals = 0

    # reading ---------------------------------------------------------------
    def is_leader(self) -> bool:
        with self._lock:
            return self._token > 0 and self._monotonic() < self._valid_until

    def token(self) -> int:
        """The fencing token while leading, else 0."""
        with self._lock:
            leading = self._token > 0 and self._monotonic() < self._valid_until
            return self._token if leading else 0

    def leadership(self) -> Leadership:
        with self._lock:
            left = self._valid_until - self._monotonic()
            leading = self._token > 0 and left > 0
            return Leadership(
                leading, self._token if leading else 0, timedelta(seconds=max(0.0, left))
            )

    # lifecycle ---------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="elector", daemon=True)
        self._thread.start()

    def stop(self, resign: bool = True) -> None:
        """Stop campaigning; lead no more; resign the lease if held, so another
        planner can take over without waiting for the ttl."""
        self._stopping.set()
        self._poke.set()
        if self._thread is not None:
            self._thread.join(timeout=self._rpc_timeout + 1)
        with self._lock:
            token, self._token, self._valid_until = self._token, 0, 0.0
            token = token or self._resign_token
        if resign and token:
            self._resign(token)

    def step_down(self, reason: str) -> None:
        """Stop leading now (e.g. the store refused the token as stale); the lease is
        resigned and the planner campaigns again."""
        with self._lock:
            if not self._token:
                return
            log.warning("stepping down (token %d): %s", self._token, reason)
            self._resign_token = self._token
            self._token, self._valid_until = 0, 0.0
        self._poke.set()
        LEADER_CHANGES.labels(self.scope, "lost").inc()
        self._on_change()

    # the loop ------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopping.is_set():
            self._poke.clear()
            with self._lock:
                held = self._token
                left = self._valid_until - self._monotonic()
                resign = self._resign_token
            if resign:
                self._resign(resign)
                with self._lock:
                    self._resign_token = 0
            if held and left <= _MIN_CALL:
                self._lose(held, "the lease's validity ran out before a renewal succeeded")
                continue
            if held:
                self._renew(held, left)
                continue
            if not self._ready():
                self._poke.wait(self._retry_interval)
                continue
            if not self._campaign():
                self._poke.wait(self._retry_interval)

    def _campaign(self) -> bool:
        self.campaigns += 1
        sent = self._monotonic()
        request = pb.CampaignRequest(scope=self.scope, candidate=self.candidate)
        request.ttl.FromTimedelta(self._ttl)
        try:
            reply = self._stub.Campaign(request, timeout=self._rpc_timeout)
        except grpc.RpcError as exc:
            # Said once per distinct cause: a campaign is retried every retry interval.
            text = _describe(exc)
            if text != self._last_campaign_error:
                log.warning("campaign failed: %s", text)
            self._last_campaign_error = text
            return False
        self._last_campaign_error = ""
        if not reply.granted:
            return False
        ttl = self._ttl
        if reply.lease.HasField("ttl") and reply.lease.ttl.ToTimedelta() > timedelta(0):
            ttl = min(ttl, reply.lease.ttl.ToTimedelta())
        with self._lock:
            if self._stopping.is_set():
                self._resign_token = reply.lease.fencing_token
                return True
            self._token = reply.lease.fencing_token
            self._granted_ttl = ttl
            self._valid_until = sent + (ttl - self._margin).total_seconds()
            self._next_renew = sent + self._renew_interval
        log.info(
            "%s leads scope '%s' with fencing token %d", self.candidate, self.scope, self._token
        )
        LEADER_CHANGES.labels(self.scope, "acquired").inc()
        self._on_change()
        return True

    def _renew(self, token: int, left: float) -> None:
        # Wait for the next renewal, but never past half the validity left, so a
        # slow Renew still comes back in time.
        wait = min(self._next_renew - self._monotonic(), left / 2)
        if wait > 0 and self._poke.wait(wait):
            return
        with self._lock:
            if self._token != token:
                return
            left = self._valid_until - self._monotonic()
        if left <= _MIN_CALL:
            return  # the loop steps down
        self.renewals += 1
        sent = self._monotonic()
        request = pb.RenewRequest(scope=self.scope, candidate=self.candidate, fencing_token=token)
        try:
            reply = self._stub.Renew(request, timeout=min(self._rpc_timeout, left))
        except grpc.RpcError as exc:
            if _code(exc) in REFUSED:
                self._lose(token, f"renewal refused ({_describe(exc)})")
                return
            # Unknown outcome: keep leading until the validity runs out, and retry soon.
            log.warning("renew failed (%s); %.2fs of validity left", _describe(exc), left)
            self._next_renew = self._monotonic() + min(self._retry_interval, self._renew_interval)
            return
        if not reply.renewed:
            self._lose(token, f"renewal refused; the lease is held by '{reply.lease.holder}'")
            return
        with self._lock:
            if self._token == token:
                self._valid_until = sent + (self._granted_ttl - self._margin).total_seconds()
        self._next_renew = sent + self._renew_interval

    def _lose(self, token: int, reason: str) -> None:
        with self._lock:
            if self._token != token:
                return
            self._token, self._valid_until = 0, 0.0
        log.warning("%s lost the lease (token %d): %s", self.candidate, token, reason)
        LEADER_CHANGES.labels(self.scope, "lost").inc()
        self._on_change()

    def _resign(self, token: int) -> None:
        request = pb.ResignRequest(scope=self.scope, candidate=self.candidate, fencing_token=token)
        try:
            self._stub.Resign(request, timeout=self._rpc_timeout)
        except grpc.RpcError as exc:
            if _code(exc) in REFUSED:
                # Not ours any more (another holds the lease): nothing to give up.
                log.info("resign of token %d refused: %s", token, _describe(exc))
                return
            log.warning(
                "resign of token %d failed (%s); it expires by itself", token, _describe(exc)
            )


def _code(exc: grpc.RpcError) -> grpc.StatusCode | None:
    return exc.code() if hasattr(exc, "code") else None


def _describe(exc: grpc.RpcError) -> str:
    code = exc.code().name if hasattr(exc, "code") else "UNKNOWN"
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return f"{code}: {details}"
