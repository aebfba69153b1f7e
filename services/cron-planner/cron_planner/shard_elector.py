"""Keeps this planner's share of the shards: one ``SyncShards`` call per renew interval
renews every shard lease it holds, resigns those it gives up, campaigns for those it
should hold, and tells it who the live planners are.

Which shards a planner should hold is rendezvous hashing over the live members
(``cronwave_core.shards``): each planner computes the same division from the same
member list, so there is no coordinator to lose. A planner joins the members with its
first call and leaves when it resigns or its membership's ttl lapses (a kill -9): the
others then see the smaller list, and each campaigns for the dead planner's shards it
now wins as soon as their leases expire -- within the lease ttl of the last renewal.
Each answer says when the soonest membership of another planner lapses unless
renewed, and the next call is made just after it if that is sooner than the renew
interval: a dead planner's shards are campaigned for the moment its leases lapse.
A planner that joins (or rejoins) wins about ``shards / planners`` shards; their
holders stop firing them at once and resign them at their next call, and the new
holder campaigns for them when its feed holds their schedules.

Warm standby: the feed loads, besides the shards this planner should hold, those it
would win if any one other live planner died (``cronwave_core.shards.standby``). They
sit in the index unfired (the fire loop skips what ``holds`` denies), so when a planner
dies the survivors campaign for its shards at once, without listing them first; the
cost is memory, about twice the schedules held.

A shard is held on this process's monotonic clock exactly as ``Elector`` holds the
single lease (``valid_until = sent + ttl - margin``; see its docstring); all shards
granted or renewed by one call share that bound. Overlap is safe regardless: the
store refuses a write under a shard's token older than the newest it has seen for
that shard, and records each (schedule, fire time) once.

To the fire loop this is one ``Leadership`` whose token is a *term number*, which
changes whenever the set of shards held (or their tokens, or the schedules loaded for
them) changes, so the loop re-bases its index from the store's word for the new set.
Each write then carries its own shard's scope and token (``fence``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import grpc
from cronwave_proto.v1 import leader_election_service_pb2 as pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as pb_grpc

from cron_planner.elector import Leadership, safety_margin
from cron_planner.metrics import LEADER_CHANGES
from cronwave_core.shards import assigned, shard_of, shard_scope, standby

log = logging.getLogger("cronwave.planner.shards")

SCOPE = "planner-shards"
#: A round is made this long after another member's membership lapses (the answer
#: says when), its leases lapsing with it: not a renew interval later.
_LAPSE_SLACK = 0.02
_LAPSE_MIN_WAIT = 0.005


class ShardElector:
    def __init__(
        self,
        channel: grpc.Channel,
        candidate: str,
        count: int,
        *,
        ttl: timedelta,
        renew_interval: timedelta,
        rpc_timeout: timedelta,
        loaded: Callable[[], frozenset[int]],
        on_assignment: Callable[[frozenset[int], bool], None],
        on_change: Callable[[], None] = lambda: None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``loaded``: the shards whose schedules the feed holds (only those are
        campaigned for); ``on_assignment``: told the shards to load whenever that
        changes -- those this planner should hold and its standby ones (the feed loads
        them) -- and whether their listing may go slowly (only standby shards are
        new: it should not starve the lease renewals of this planner or the store)."""
        margin = safety_margin(ttl, renew_interval)
        self._stub = pb_grpc.LeaderElectionServiceStub(channel)
        self.candidate = candidate
        self.count = count
        self.scope = SCOPE
        self._ttl = ttl
        self._margin = margin.total_seconds()
        self._interval = renew_interval.total_seconds()
        self._rpc_timeout = rpc_timeout.total_seconds()
        self._loaded = loaded
        self._on_assignment = on_assignment
        self._on_change = on_change
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._held: dict[int, int] = {}  # shard -> token
        self._release: dict[int, int] = {}  # given up, to resign at the next call
        self._valid_until = 0.0
        self._term = 0
        self._loaded_seen: frozenset[int] = frozenset()
        self._assigned: frozenset[int] | None = None
        self._loading: frozenset[int] | None = None  # told to the feed last
        self.members: tuple[str, ...] = ()
        self._lapse_at: float | None = None  # another member's lapse (monotonic), if sooner
        self._poke = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.syncs = 0

    # reading (any thread) -------------------------------------------------------
    def is_leader(self) -> bool:
        """Whether this planner holds any shard."""
        return self.token() > 0

    def token(self) -> int:
        """The term number while this planner holds a shard, else 0."""
        with self._lock:
            return self._term if self._leading() else 0

    def leadership(self) -> Leadership:
        with self._lock:
            left = max(0.0, self._valid_until - self._monotonic())
            leading = self._leading()
            return Leadership(leading, self._term if leading else 0, timedelta(seconds=left))

    def held(self) -> dict[int, int]:
        """Each shard held now, with its fencing token (empty once the bound passed)."""
        with self._lock:
            return dict(self._held) if self._leading() else {}

    def fence(self, schedule_id: str) -> tuple[str, int]:
        """The scope and token a write of ``schedule_id`` carries; token 0 when this
        planner does not hold its shard now. A shard being given up still carries its
        token until it is resigned at the next call, so the writes already decided
        (MISSED rows waiting for their batch) land before the next holder plans from
        the store's newest fire time; the next holder's newer token fences out any
        later one."""
        shard = shard_of(schedule_id, self.count)
        with self._lock:
            token = 0
            if self._leading():
                token = self._held.get(shard) or self._release.get(shard, 0)
        return shard_scope(shard, self.count), token

    def shard(self, schedule_id: str) -> int:
        return shard_of(schedule_id, self.count)

    def holds(self, schedule_id: str) -> bool:
        """Whether this planner holds the schedule's shard (not one it is giving up)."""
        shard = shard_of(schedule_id, self.count)
        with self._lock:
            return self._leading() and shard in self._held

    def _leading(self) -> bool:
        return bool(self._held) and self._monotonic() < self._valid_until

    # lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="shard-elector", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Call leader-election now (the feed loaded shards; a write was refused)."""
        self._poke.set()

    def step_down(self, reason: str) -> None:
        """A write was refused as stale: some shard was taken over. The next call,
        made now, tells which; the rest are kept."""
        log.warning("a write was refused (%s); checking the shards held", reason)
        self._poke.set()

    def stop(self, resign: bool = True) -> None:
        self._stopping.set()
        self._poke.set()
        if self._thread is not None:
            self._thread.join(timeout=self._rpc_timeout + 1)
        with self._lock:
            held, self._held, self._valid_until = dict(self._held), {}, 0.0
            held.update(self._release)
        if resign and held:
            self._call(held={}, release=held, want=())

    # the loop ----------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopping.is_set():
            self._poke.clear()
            started = self._monotonic()
            self._round()
            now = self._monotonic()
            wait = self._interval - (now - started)
            if self._lapse_at is not None:
                # Call right after another member's lapse: its shards are free then.
                wait = min(wait, max(self._lapse_at - now, _LAPSE_MIN_WAIT))
            if wait > 0:
                self._poke.wait(wait)

    def _round(self) -> None:
        with self._lock:
            if self._held and self._monotonic() >= self._valid_until:
                log.warning("shard leases ran out before a renewal succeeded: %s", self._held)
                self._held = {}
                self._bump()
            held, release = dict(self._held), dict(self._release)
        loaded = self._loaded()
        want: tuple[int, ...] = ()
        if self._assigned is not None:
            want = tuple(sorted((self._assigned & loaded) - held.keys()))
        sent = self._monotonic()
        reply = self._call(held=held, release=release, want=want)
        if reply is None:
            return
        self._lapse_at = None
        if reply.HasField("next_lapse"):
            lapse = reply.next_lapse.ToTimedelta().total_seconds()
            self._lapse_at = self._monotonic() + lapse + _LAPSE_SLACK
        granted = {lease.shard: lease.fencing_token for lease in reply.held}
        members = tuple(reply.members)
        mine = assigned(self.candidate, members, self.count)
        with self._lock:
            for shard in release:
                self._release.pop(shard, None)
            # Shards given up while the call was out stay given up.
            granted = {k: t for k, t in granted.items() if k not in self._release}
            # What this planner should no longer hold: stop firing now, resign next call.
            for shard in set(granted) - mine:
                self._release[shard] = granted.pop(shard)
            changed = granted != self._held or loaded != self._loaded_seen
            gained = granted.keys() - self._held.keys()
            lost = self._held.keys() - granted.keys()
            self._held = granted
            self._loaded_seen = loaded
            self._valid_until = sent + self._ttl.total_seconds() - self._margin if granted else 0
            if changed:
                self._bump()
            release_now = bool(self._release)
        self.members = members
        if gained:
            LEADER_CHANGES.labels(self.scope, "acquired").inc(len(gained))
        if lost:
            LEADER_CHANGES.labels(self.scope, "lost").inc(len(lost))
        if gained or lost:
            log.info(
                "%s holds %d of %d shards (+%d -%d) among %d planners",
                self.candidate,
                len(granted),
                self.count,
                len(gained),
                len(lost),
                len(members),
            )
        # Newly assigned shards already loaded (standby ones): campaign now, not a
        # renew interval later.
        campaign = mine != self._assigned and bool((mine & loaded) - granted.keys())
        self._assigned = mine
        # Standby shards not loaded yet wait until this planner holds all its own: their
        # listing would compete with a takeover (or a cold start) for the store.
        spare = standby(self.candidate, members, self.count)
        settled = mine <= granted.keys()
        if not settled:
            spare &= self._loading or frozenset()
        loading = mine | spare
        if loading != self._loading:
            self._loading = loading
            self._on_assignment(loading, settled)
        if changed:
            self._on_change()
        if release_now or campaign:
            self._poke.set()

    def _bump(self) -> None:
        self._term += 1

    def _call(
        self, *, held: dict[int, int], release: dict[int, int], want: tuple[int, ...]
    ) -> pb.SyncShardsResponse | None:
        self.syncs += 1
        request = pb.SyncShardsRequest(
            candidate=self.candidate,
            shard_count=self.count,
            held=[pb.ShardLease(shard=k, fencing_token=t) for k, t in sorted(held.items())],
            release=[pb.ShardLease(shard=k, fencing_token=t) for k, t in sorted(release.items())],
            want=want,
        )
        request.ttl.FromTimedelta(self._ttl)
        try:
            reply: pb.SyncShardsResponse = self._stub.SyncShards(request, timeout=self._rpc_timeout)
        except grpc.RpcError as exc:
            code = exc.code().name if hasattr(exc, "code") else "UNKNOWN"
            log.warning("shard sync failed (%s); held shards last until their bound", code)
            return None
        return reply
