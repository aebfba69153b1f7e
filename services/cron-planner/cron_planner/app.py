"""The planner assembled: schedule feed -> index -> fire loop, gated by the elector."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from cron_planner.backfills import Backfiller, BackfillRequest, BackfillResult
from cron_planner.clock import Clock, SystemClock
from cron_planner.elector import Elector
from cron_planner.faults import with_faults
from cron_planner.feed import ScheduleFeed
from cron_planner.fire_loop import FireLoop
from cron_planner.remote import (
    DispatcherClient,
    Fence,
    LeaderClient,
    StoreClient,
    single_fence,
)
from cron_planner.schedule_index import ScheduleIndex
from cron_planner.shard_elector import ShardElector
from cronwave_core.caching import redis_client
from cronwave_core.limits import DEFAULT_LIMITS, RequestLimits
from cronwave_core.queue_epoch import LossView
from cronwave_core.rpc import open_channel
from cronwave_core.settings import (
    LeaseSettings,
    LimitSettings,
    NetworkSettings,
    PlannerSettings,
    RedisSettings,
    TestHooks,
    TlsSettings,
)
from cronwave_core.shards import shard_of


def _everything(_schedule_id: str) -> bool:
    return True


@dataclass(frozen=True)
class PlannerStatus:
    candidate: str
    leader: bool
    fencing_token: int
    schedules: int
    next_fire_time: datetime | None
    next_schedule_id: str
    fired: int
    revision: int
    queued: int = 0  # fires waiting for their turn (paced catch-up, backfill, retries)
    buffered: int = 0  # fires waiting behind a run in flight
    left_out: int = 0  # schedules the feed left out so far (see cron_planner.feed)


class Planner:
    """Owns the channels and threads of one planner replica. ``start`` campaigns,
    loads and fires; ``stop`` stops firing first, then resigns the lease."""

    def __init__(
        self,
        settings: PlannerSettings,
        lease: LeaseSettings,
        network: NetworkSettings,
        redis: RedisSettings,
        hooks: TestHooks,
        clock: Clock | None = None,
        idle: timedelta | None = None,
        limits: RequestLimits = DEFAULT_LIMITS,
        tls: TlsSettings | None = None,
    ) -> None:
        """``limits``: the request limits (a backfill's slots). ``idle`` bounds how long
        the fire loop waits with nothing due (a change or a leadership change wakes it
        at once anyway); tests on a manual clock raise it. ``tls``: the certificate it
        calls with (None: this process's ``CRONWAVE_TLS_*``)."""
        self.settings = settings
        self.clock = clock or SystemClock()
        timeout = network.rpc_timeout
        self._leader_channel = open_channel(network.leader_addr, timeout, traced=False, tls=tls)
        self._store_channel = open_channel(network.store_addr, timeout, tls=tls)
        self._watch_channel = open_channel(network.store_addr, timeout, traced=False, tls=tls)
        self._dispatcher_channel = open_channel(network.dispatcher_addr, timeout, tls=tls)
        self.shards = lease.planner_shards
        count = self.shards
        self.index = ScheduleIndex(
            lead=settings.dispatch_lead,
            shard=lambda schedule_id: shard_of(schedule_id, count),
            lead_max=settings.dispatch_lead_max,
        )
        self.elector: Elector | ShardElector
        fence: Fence = single_fence
        keep: Callable[[str], bool] = _everything
        sharded: ShardElector | None = None
        if self.shards > 1:
            sharded = ShardElector(
                self._leader_channel,
                settings.candidate,
                self.shards,
                ttl=lease.ttl,
                renew_interval=lease.renew_interval,
                rpc_timeout=timeout,
                loaded=lambda: self.feed.loaded_shards,
                on_assignment=lambda shards, paced: self.feed.refilter(shards, paced=paced),
                on_change=self._on_change,
            )
            fence, keep = (lambda sid, _token: sharded.fence(sid)), sharded.holds
            self.elector = sharded
        else:
            self.elector = Elector(
                self._leader_channel,
                settings.candidate,
                ttl=lease.ttl,
                renew_interval=lease.renew_interval,
                retry_interval=lease.retry_interval,
                rpc_timeout=timeout,
                on_change=self._on_change,
                ready=lambda: self.feed.loaded.is_set(),
            )
        store = StoreClient(self._store_channel, timeout, fence, keep)
        # The broker's Redis, read only for its queue epoch (a lost queue's runs are no
        # reason to skip a slot); short timeouts: Redis away means "a loss up to now".
        # Only the fire loop reads it (and a backfill, through the loop): two at most.
        self._queue_redis = redis_client(redis.redis_url, size=2)
        self.loop = FireLoop(
            self.index,
            self.clock,
            self.elector,
            with_faults(DispatcherClient(self._dispatcher_channel, timeout, fence), hooks),
            store,
            idle=idle or timedelta(seconds=1),
            queue_loss=LossView(self._queue_redis, redis.namespace),
            holds=keep,
            shards=sharded,
        )
        leader = LeaderClient(self._leader_channel, timeout, self.elector.scope)
        self.backfiller = Backfiller(
            self.index,
            self.clock,
            self.elector,
            leader.holder,
            store,
            self.loop.submit,
            loaded=lambda sid: self.feed.has_loaded(sid),
            max_fires=limits.backfill_slots,
            holds=keep,
        )
        self.feed = ScheduleFeed(
            self._watch_channel,
            self.index,
            self.clock,
            rpc_timeout=timeout,
            on_change=self._on_change,
            on_loaded=self._loaded,
            on_pause=self.loop.paused,
            shard_count=self.shards,
        )

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        idle: timedelta | None = None,
    ) -> Planner:
        """A planner with the settings in ``env`` (the process's environment if None)."""
        return cls(
            PlannerSettings.from_env(env),
            LeaseSettings.from_env(env),
            NetworkSettings.from_env(env),
            RedisSettings.from_env(env),
            TestHooks.from_env(env),
            clock=clock,
            idle=idle,
            limits=LimitSettings.from_env(env).limits(),
            tls=TlsSettings.from_env(env),
        )

    def _on_change(self) -> None:
        self.loop.wake()

    def _loaded(self) -> None:
        if isinstance(self.elector, ShardElector):
            self.elector.poke()  # campaign for the shards just loaded now

    def start(self) -> None:
        self.feed.start()
        self.loop.start()
        self.elector.start()

    def stop(self) -> None:
        self.loop.stop()
        self.feed.stop()
        self.elector.stop(resign=True)
        for channel in (
            self._leader_channel,
            self._store_channel,
            self._watch_channel,
            self._dispatcher_channel,
        ):
            channel.close()
        self._queue_redis.close()

    def status(self) -> PlannerStatus:
        leadership = self.elector.leadership()
        slot = self.index.peek()
        return PlannerStatus(
            candidate=self.elector.candidate,
            leader=leadership.leader,
            fencing_token=leadership.token,
            schedules=len(self.index),
            next_fire_time=slot.fire_time if slot else None,
            next_schedule_id=slot.schedule_id if slot else "",
            fired=self.loop.stats.fired,
            revision=self.index.revision,
            queued=self.loop.queued,
            buffered=self.loop.buffered,
            left_out=self.feed.left_out,
        )

    def backfill(self, request: BackfillRequest) -> BackfillResult:
        return self.backfiller.backfill(request)
