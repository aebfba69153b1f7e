"""The queue epoch on a real redis-server the test owns: a dispatcher's watch notices an
empty restart, a flush and another server, exactly one of several watchers takes each
loss, and the planner's view tells when the last loss was."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import redis

from cronwave_bench.faults import OwnRedis
from cronwave_core.queue_epoch import EpochWatch, Loss, LossView, QueueEpoch, epoch_key
from tests.helpers import eventually


def _now() -> datetime:
    return datetime.now(UTC)


def test_the_watch_notices_an_empty_restart_a_flush_and_another_server(
    own_redis: OwnRedis, namespace: str
) -> None:
    # Given a watch that has set the epoch of this Redis
    client = redis.Redis.from_url(own_redis.url)
    watch = EpochWatch(client, namespace)
    first = watch.check(_now())
    assert first is not None and "gone" in first.why  # nothing was there: a loss
    assert watch.check(_now()) is None  # nothing changed since

    # When Redis is flushed, Then the next look is a loss
    client.flushall()
    flushed = watch.check(_now())
    assert flushed is not None and "gone" in flushed.why
    assert flushed.epoch.token != first.epoch.token

    # When Redis is killed and restarted empty, Then too
    own_redis.kill()
    own_redis.start()
    restarted = watch.check(_now())
    assert restarted is not None and "gone" in restarted.why
    assert restarted.epoch.server != first.epoch.server  # a new run_id

    # When the marker names another server (a restart from a snapshot, a failover)
    other = QueueEpoch("another-server", _now(), "t")
    client.set(epoch_key(namespace), other.encode())
    moved = watch.check(_now())

    # Then that is a loss as well, and the marker names this server again
    assert moved is not None and "another server" in moved.why
    assert QueueEpoch.decode(client.get(epoch_key(namespace))) == moved.epoch
    client.close()


def test_of_several_watchers_exactly_one_takes_a_loss(own_redis: OwnRedis, namespace: str) -> None:
    # Given eight dispatchers' watches on one Redis that has just lost its queue
    clients = [redis.Redis.from_url(own_redis.url) for _ in range(8)]
    watches = [EpochWatch(c, namespace) for c in clients]
    results: list[Loss | None] = []
    lock = threading.Lock()
    go = threading.Barrier(len(watches))

    def look(watch: EpochWatch) -> None:
        go.wait(timeout=10)
        found = watch.check(_now())
        with lock:
            results.append(found)

    # When they all look at once
    threads = [threading.Thread(target=look, args=(w,)) for w in watches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    # Then exactly one takes the loss (and re-sends the runs); the others go on
    assert len(results) == len(watches)
    assert sum(r is not None for r in results) == 1
    assert all(w.check(_now()) is None for w in watches)
    for c in clients:
        c.close()


def test_the_view_tells_when_the_queue_last_lost_its_messages(
    own_redis: OwnRedis, namespace: str
) -> None:
    client = redis.Redis.from_url(own_redis.url)
    view = LossView(client, namespace, horizon=timedelta(seconds=2))
    # A Redis just started, with no marker: a loss no dispatcher has handled yet, as of
    # the server's start (whole seconds of uptime, rounded towards now)
    start = view.lost_at(_now())
    assert start is not None and _now() - start < timedelta(seconds=2)

    # A dispatcher sets the epoch: the loss it stands for is known, while recent
    loss = EpochWatch(client, namespace).check(_now())
    assert loss is not None
    eventually(lambda: view.lost_at(_now()) == loss.epoch.since, timeout=5, what="epoch seen")

    # The marker vanishes (a flush no dispatcher has handled yet): every message up to
    # now may be gone
    client.delete(epoch_key(namespace))
    probe = _now()
    eventually(lambda: view.lost_at(probe) == probe, timeout=5, what="vanished marker")

    # Redis away: nothing rules a loss out (a run recorded meanwhile has no message),
    # so every message up to now may be gone
    own_redis.kill()
    away = _now()
    eventually(lambda: view.lost_at(away) == away, timeout=5, what="a loss up to now while away")

    # Restarted empty: lost as of the restart, until a dispatcher sets a new epoch
    own_redis.start()
    restarted = _now()
    lost = eventually(lambda: view.lost_at(_now()), timeout=5, what="a loss after the restart")
    assert restarted - timedelta(seconds=1) <= lost <= _now()
    again = EpochWatch(client, namespace).check(_now())
    assert again is not None
    eventually(lambda: view.lost_at(_now()) == again.epoch.since, timeout=5, what="new epoch")
    # and a run claimed after the server's restart, even before the dispatcher noticed
    # the loss, was not held through it: the bound is the server's start, not the epoch
    # (a view of its own: this one's 2 s horizon may pass while the machine is slow)
    held_by = LossView(client, namespace, horizon=timedelta(seconds=60)).held_before(_now())
    assert held_by is not None and held_by <= restarted < again.epoch.since

    # A loss is news until the horizon has passed
    eventually(lambda: view.lost_at(_now()) is None, timeout=5, what="the loss aged out")
    assert _now() - again.epoch.since >= timedelta(seconds=2)

    # And a Redis that has long run without a marker (no dispatcher keeps one) tells of
    # no loss
    client.delete(epoch_key(namespace))
    fresh = LossView(client, namespace, horizon=timedelta(seconds=2))
    eventually(lambda: fresh.lost_at(_now()) is None, timeout=5, what="no marker, old server")
    client.close()
