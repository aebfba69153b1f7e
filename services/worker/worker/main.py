"""The worker process: a dramatiq worker inside our own process, plus the gRPC status
service and health checks.

Start-up order: start the warm job processes, register this worker's job types (those
of the queues it consumes) with the store, start consuming, then report SERVING, so a
schedule can name these job types as soon as the worker is healthy.

On SIGTERM (``stop_gracefully``): report NOT_SERVING, stop taking messages, hand every
run held for its fire time back to the store, ask every running job to stop at its next
checkpoint and wait up to the grace period (``CRONWAVE_GRACE``) for it, stop the jobs
still running, and hand each stopped run back with its checkpoint and a new message
(``worker.draining``), so another worker resumes it at once; then stop the gRPC server,
send the last acknowledgements and spans, and exit 0.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
from datetime import timedelta
from typing import Any, NoReturn

import dramatiq
import grpc
from cronwave_proto.v1 import worker_service_pb2
from cronwave_proto.v1 import worker_service_pb2_grpc as worker_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc
from dramatiq.middleware import Retries, TimeLimit
from dramatiq.worker import WorkerThread

from cronwave_core.bootstrap import RunningServer, Service, full_names
from cronwave_core.caching import RunStatusCache, redis_client
from cronwave_core.entry import entry_point
from cronwave_core.errors import CronwaveError
from cronwave_core.limits import MIB
from cronwave_core.redis_pools import process_client
from cronwave_core.rpc import error_from_rpc, open_channel
from cronwave_core.settings import (
    LimitSettings,
    NetworkSettings,
    ProcessSettings,
    RedisSettings,
    TelemetrySettings,
    TestHooks,
    WorkerSettings,
)
from cronwave_core.settings_pools import PoolSettings
from cronwave_core.settings_sampling import TraceKeepSettings
from cronwave_core.telemetry.deferred import DeferredSpans
from cronwave_core.telemetry.tracing import init_tracing
from worker import metrics_gauges
from worker.acks import BatchAckBroker
from worker.actors import declare_actors
from worker.attempts import Isolation
from worker.dead_letters import DeadLetterRejected
from worker.draining import Draining
from worker.drills import drill_channel
from worker.held_runs import PROCESS_RELEASE_AHEAD, PROCESS_THREADS, HeldRuns
from worker.job_process import JobProcessPool
from worker.jobs import Registry, default_registry
from worker.jobs.wire import job_type_to_proto
from worker.log_format import configure_logging
from worker.middleware import Tracing, standard
from worker.middleware.faults import test_hooks
from worker.runtime import RunProcessor, WorkerStats
from worker.status import WorkerStatusServicer
from worker.store_port import RunStore, with_retries

log = logging.getLogger("cronwave.worker")

#: Past the grace period the jobs still running are stopped; their runs are handed
#: back within this much more (beyond a job process's kill grace).
HAND_BACK_WAIT = timedelta(seconds=2)


def poll_ms(worker: WorkerSettings) -> int:
    """dramatiq's consumer idle poll, in whole ms (``CRONWAVE_WORKER_POLL_MS``): a new
    message waits at most this long before a sleeping consumer looks again, so it bounds
    the pickup lateness it adds. Lower means less pickup lateness and more Redis polling
    while idle (benchmarks and latency tests lower it)."""
    return max(1, round(worker.poll / timedelta(milliseconds=1)))


#: How often an idle consumer thread wakes to see whether the worker is stopping (ms).
#: A message wakes it at once, so this bounds only how long a stop waits for idle
#: threads, never a pickup; the broker's idle poll (``poll_ms``) is separate.
IDLE_WAKE_MS = 1000


class Consumer(dramatiq.Worker):
    """dramatiq's ``Worker`` whose idle worker threads wake every ``IDLE_WAKE_MS``,
    not every broker poll. dramatiq gives both the one ``worker_timeout``: with 64
    threads and a 100 ms poll an idle worker woke 640 times a second, 2.3% of a core
    (0.3% with this), measured on an idle suite's worker by its /proc CPU time."""

    def _add_worker(self) -> None:
        thread = WorkerThread(
            broker=self.broker,
            consumers=self.consumers,
            work_queue=self.work_queue,
            worker_timeout=max(self.worker_timeout, IDLE_WAKE_MS),
        )
        thread.start()
        self.workers.append(thread)


def broker_users(worker: WorkerSettings) -> int:
    """The broker pool's size: a connection for each consumer thread (a retry or a
    put-back is queued from it), for the fetcher of each queue and of its delay queue
    queue, for the acknowledgement
    batcher and for the graceful stop. A held-run thread queues a retry as a consumer
    thread does; it holds a connection for that one command, so a burst of them takes
    turns, each waiting at most ``CRONWAVE_REDIS_POOL_TIMEOUT``."""
    return worker.threads + 2 * len(worker.queues) + 2


def register_job_types(store: RunStore, registry: Registry) -> None:
    """Register every job type with the store, waiting out a store that is still
    starting; any other refusal stops start-up with the store's reason."""
    for job_type in registry:
        request = store_pb.RegisterJobTypeRequest(job_type=job_type_to_proto(job_type))
        try:
            with_retries(
                functools.partial(store.RegisterJobType, request),
                f"register job type {job_type.name}",
                within=timedelta(seconds=30),
            )
        except grpc.RpcError as exc:
            err = error_from_rpc(exc)
            raise CronwaveError(
                f"worker: the store refused job type '{job_type.name}': {err.message}"
            ) from exc
        log.info("registered job type %s on queue %s", job_type.name, job_type.queue)


def stop_taking_messages(consumer: dramatiq.Worker) -> None:
    """The consumer's fetching threads end and its worker threads take nothing more
    from its work queue (each finishes the message it has); what was fetched and not
    taken goes back to the broker in ``consumer.stop``. (Not ``pause``: a paused
    fetcher closes its consumer and sleeps before it looks at its flags again.)"""
    for fetcher in consumer.consumers.values():
        fetcher.stop()
    for thread in consumer.workers:
        thread.stop()


def stop_gracefully(
    consumer: dramatiq.Worker,
    draining: Draining,
    held: HeldRuns,
    grace: timedelta,
    kill_grace: timedelta,
) -> None:
    """SIGTERM's work before the gRPC server stops (see ``worker.draining``): no more
    claims, held runs handed back, running jobs asked to stop and given ``grace``,
    then stopped (a job process gets ``kill_grace`` between SIGTERM and SIGKILL), their
    runs handed back; then the consumer stops. Every wait is bounded."""
    draining.begin()  # a message that arrives from now on goes back unclaimed
    stop_taking_messages(consumer)
    held_back = held.stop()
    left = draining.drain(grace, kill_grace + HAND_BACK_WAIT)
    if left:
        log.warning(
            "worker: %d run(s) not handed back in time (%s); the store re-sends them "
            "once their heartbeats lapse",
            len(left),
            ", ".join(left),
        )
    held.join(HAND_BACK_WAIT)
    consumer.stop(timeout=int(HAND_BACK_WAIT.total_seconds() * 1000))
    log.info("worker: %d held run(s) handed back; consumer stopped", held_back)


def run_until_stopped(server: RunningServer, consumer: dramatiq.Worker) -> None:
    """Start ``consumer`` and ``server``; on SIGTERM or SIGINT stop the server (its
    ``on_stopping`` stops the consumer, see ``stop_gracefully``). Blocks until
    stopped."""
    stopping = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        if stopping.is_set():
            return
        stopping.set()
        log.info("worker: signal %d, stopping gracefully", signum)
        threading.Thread(target=server.stop, name="graceful-stop", daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    consumer.start()
    server.start()
    server.wait()
    log.info("worker stopped")


def exit_stopped() -> NoReturn:
    """End the stopped worker with status 0, without finalizing the interpreter.

    Everything the worker owns has stopped by now, within bounds, and its logs and
    spans are flushed. What may still run is what no bound can end: a job body in a
    thread stuck in C code past its forced stop, or threads a job started itself.
    Finalizing the interpreter under such a thread is what crashes a process inside
    grpc or psycopg (SIGSEGV), and a non-daemon one would hold the exit open; so the
    process ends here, the same way whatever is left."""
    left = [
        t.name
        for t in threading.enumerate()
        if t is not threading.current_thread() and t.is_alive() and not t.daemon
    ]
    if left:
        log.warning("worker: exiting with threads still running: %s", ", ".join(sorted(left)))
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)


@entry_point("worker")
def main() -> None:
    process = ProcessSettings.from_env()
    network = NetworkSettings.from_env()
    redis_settings = RedisSettings.from_env()
    telemetry = TelemetrySettings.from_env()
    settings = WorkerSettings.from_env()
    hooks = TestHooks.from_env()
    limits = LimitSettings.from_env().limits()
    pools = PoolSettings.from_env()
    keep = TraceKeepSettings.from_env()
    configure_logging()
    # A job module that cannot be loaded stops start-up (ConfigurationError, its one
    # line and status 2: cronwave_core.entry), named, before anything else has started.
    registry = default_registry(settings)
    # The spans of runs not sampled are held until the run's outcome decides
    # (middleware.tracing); only the worker does so.
    deferred = DeferredSpans() if telemetry.tracing else None
    provider = init_tracing("worker", telemetry, deferred)
    pool: JobProcessPool | None = None
    if settings.isolation == "process":
        pool = JobProcessPool(warm=settings.warm_processes, max_processes=settings.max_processes)
        pool.start(wait=False)
    # Handled messages are acknowledged in batches (worker.acks). Of dramatiq's
    # middleware only the two that act on run messages: the time limit (a backstop
    # behind the supervisor's) and retries, which with max_retries=0 turns a failed
    # message into a rejected one (dead-lettered by DeadLetterRejected). Age limits,
    # callbacks, pipelines and shutdown notices are not used, and each would be
    # called for every message.
    broker = BatchAckBroker(
        client=process_client(
            redis_settings.redis_url,
            pools,
            name="worker broker",
            users=broker_users(settings),
        ),
        namespace=redis_settings.namespace,
        middleware=[TimeLimit(), Retries()],
    )
    dramatiq.set_broker(broker)
    channel = drill_channel(hooks, open_channel(network.store_addr, network.rpc_timeout))
    store = store_grpc.WorkflowStoreServiceStub(channel)
    register_job_types(store, registry)
    if pool is not None:
        # A couple ready before SERVING; the rest of the warm ones come up meanwhile.
        pool.wait_ready(min(2, pool.warm))

    stats = WorkerStats()
    held = (
        HeldRuns()
        if pool is None
        else HeldRuns(threads=PROCESS_THREADS, release_ahead=PROCESS_RELEASE_AHEAD)
    )
    draining = Draining()
    # Completions (consumer and held-run threads) fill it; the metrics scrape reads it.
    cache_redis = redis_client(
        redis_settings.redis_url, size=pools.redis_size(settings.threads + 2)
    )
    metrics_gauges.install(cache_redis, redis_settings.namespace, settings.queues)
    middleware = standard(
        store,
        registry,
        settings.worker_id,
        queues=settings.queues,
        broker=broker,
        run_status=RunStatusCache(cache_redis, redis_settings.namespace),
        kill_grace=settings.kill_grace,
        cancel_check=settings.cancel_check,
        test_hooks=test_hooks(hooks),
        result_bytes=limits.result_bytes,
        tracing=Tracing(settings.worker_id, deferred, keep.keep_late),
    )
    processor = RunProcessor(
        store,
        registry,
        middleware,
        stats,
        broker=broker,
        isolation=Isolation(pool=pool, checkpoint_bytes=limits.checkpoint_bytes),
        held=held,
        draining=draining,
        max_runs=settings.max_runs,
    )
    broker.add_middleware(DeadLetterRejected(processor.dead_letters))
    declare_actors(broker, settings.queues, processor, registry)
    consumer = Consumer(
        broker,
        queues=set(settings.queues),
        worker_threads=settings.threads,
        worker_timeout=poll_ms(settings),
    )
    status = WorkerStatusServicer(settings.worker_id, settings.queues, registry.names(), stats)

    def on_stopping() -> None:
        stop_gracefully(consumer, draining, held, process.grace, settings.kill_grace)

    def on_stop() -> None:
        processor.close()  # the last completions go to the store before the channel closes
        if pool is not None:
            pool.close()
        broker.close()
        cache_redis.close()
        channel.close()
        for job_type in registry:
            dispose = getattr(job_type.fn, "dispose", None)
            if callable(dispose):
                dispose()
        provider.shutdown()  # flush the spans still buffered

    service = Service(
        name="worker",
        address=network.worker_addr,
        register=lambda server: worker_grpc.add_WorkerServiceServicer_to_server(status, server),
        service_names=full_names([worker_service_pb2.DESCRIPTOR]),
        on_stopping=on_stopping,
        on_stop=on_stop,
        # GetWorkerStatus takes an empty request.
        max_receive_bytes=1 * MIB,
    )
    run_until_stopped(RunningServer(service, process.grace, traced=telemetry.tracing), consumer)
    exit_stopped()
