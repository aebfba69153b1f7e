"""The feed says a schedule's shard is loaded (``ScheduleFeed.has_loaded``, what a
backfill asks) while it lists another shard: a warm standby's listing, minutes long
at a million schedules, does not refuse a backfill of a shard held all along. Over a
real store, paused with SIGSTOP so that the other shard's listing cannot end."""

from __future__ import annotations

import os
import signal
from datetime import timedelta

from cron_planner.clock import SystemClock
from cron_planner.feed import ScheduleFeed
from cron_planner.schedule_index import ScheduleIndex
from cronwave_core.shards import shard_of
from tests.harness.processes import read_stat
from tests.harness.store import StoreProcess, create_schedule, register_job_type
from tests.harness.tls import hop_channel
from tests.helpers import eventually

SHARDS = 4


def test_a_shard_loaded_stays_loaded_while_another_is_listed(store: StoreProcess) -> None:
    # Given schedules in two shards, and a feed holding the first shard alone
    stub = store.stub()
    job = register_job_type(stub)
    by_shard: dict[int, str] = {}
    for _ in range(40):
        schedule_id = create_schedule(stub, job).schedule_id
        by_shard.setdefault(shard_of(schedule_id, SHARDS), schedule_id)
    (first, held), (second, other) = sorted(by_shard.items())[:2]
    index = ScheduleIndex(shard=lambda sid: shard_of(sid, SHARDS))
    channel = hop_channel(None, store.address)
    feed = ScheduleFeed(
        channel, index, SystemClock(), rpc_timeout=timedelta(seconds=5), shard_count=SHARDS
    )
    feed.refilter(frozenset({first}))
    feed.start()
    assert store.popen is not None
    pid = store.popen.pid
    try:
        eventually(feed.loaded.is_set, timeout=30, what="the first shard loaded")
        assert feed.has_loaded(held) and not feed.has_loaded(other)

        # When the feed is told to hold the second shard too, while the store is paused
        os.kill(pid, signal.SIGSTOP)
        try:
            eventually(lambda: _state(pid) == "T", timeout=5, what="the store stopped")
            feed.refilter(frozenset({first, second}))

            # Then, the second shard's listing pending, the first is still loaded
            assert not feed.loaded.is_set()
            assert feed.has_loaded(held)
            assert not feed.has_loaded(other)
            assert _state(pid) == "T"  # the pause held throughout
        finally:
            os.kill(pid, signal.SIGCONT)

        # and once the store answers, the second is loaded too
        eventually(lambda: feed.has_loaded(other), timeout=30, what="the second shard loaded")
        assert feed.has_loaded(held) and index.get(other) is not None
    finally:
        feed.stop()
        channel.close()


def _state(pid: int) -> str:
    """The process's state letter (``T``: stopped by a signal)."""
    stat = read_stat(pid)
    return stat.state if stat is not None else ""
