"""The worker process: a dramatiq worker inside our own process, plus the gRPC status
service and health checks.

Start-up order: start the warm job processes, register this worker's job types (those
of the queues it consumes) with the store, start consuming, then report SERVING, so a
schedule can name these job types as soon as the worker is healthy. On SIGTERM: stop
taking messages and let in-flight jobs finish (up to the grace period), then stop the
gRPC server and the job processes.
"""

from __future__ import annotations

import functools
import logging
import signal
import threading
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import dramatiq
import grpc
from dramatiq.middleware import Retries, TimeLimit

from cronwave.v1 import common_pb2, worker_service_pb2
from cronwave.v1 import worker_service_pb2_grpc as worker_grpc
from cronwave.v1 import workflow_store_service_pb2 as store_pb
from cronwave.v1 import workflow_store_service_pb2_grpc as store_grpc
from cronwave_core.bootstrap import RunningServer, Service, full_names
from cronwave_core.caching import RunStatusCache, redis_client
from cronwave_core.convert import td_to_duration
from cronwave_core.errors import ConfigurationError, CronwaveError
from cronwave_core.faults import fault_hooks
from cronwave_core.rpc import error_from_rpc, open_channel
from cronwave_core.settings import Settings
from cronwave_core.telemetry import init_tracing
from worker.acks import BatchAckBroker
from worker.actors import declare_actors
from worker.dead_letters import DeadLetterRejected
from worker.drills import drill_hooks
from worker.held_runs import HeldRuns
from worker.job_process import JobProcessPool
from worker.jobs import JobType, Registry, default_registry
from worker.options import WorkerOptions
from worker.runtime import Isolation, RunProcessor, WorkerStats, with_retries
from worker.status import WorkerStatusServicer

log = logging.getLogger("cronwave.worker")

#: dramatiq's consumer idle poll, in ms: a new message waits at most this long
#: before a sleeping consumer looks again, so it bounds the pickup lateness it adds.
WORKER_TIMEOUT_MS = 100
POLL_VAR = "CRONWAVE_WORKER_POLL_MS"


def poll_ms(env: Mapping[str, str]) -> int:
    """The consumer's idle poll in ms: ``CRONWAVE_WORKER_POLL_MS``, else
    ``WORKER_TIMEOUT_MS``. Lower means less pickup lateness and more Redis polling
    while idle (benchmarks and latency tests lower it)."""
    raw = env.get(POLL_VAR) or str(WORKER_TIMEOUT_MS)
    if not raw.isdigit() or not 1 <= int(raw) <= 10_000:
        raise ConfigurationError(
            f"{POLL_VAR}: expected whole milliseconds in [1, 10000], got {raw!r}"
        )
    return int(raw)


def job_type_to_proto(job_type: JobType) -> common_pb2.JobType:
    return common_pb2.JobType(
        name=job_type.name,
        duration_limit=td_to_duration(job_type.duration_limit),
        heartbeat_timeout=td_to_duration(job_type.heartbeat_timeout),
        retry=job_type.retry_policy.to_proto(),
        queue=job_type.queue,
        priority=job_type.priority,
        financial=job_type.financial,
    )


def register_job_types(store: Any, registry: Registry) -> None:
    """Register every job type with the store, waiting out a store that is still
    starting; any other refusal stops start-up with the store's reason."""
    for job_type in registry:
        request = store_pb.RegisterJobTypeRequest(job_type=job_type_to_proto(job_type))
        try:
            with_retries(
                functools.partial(store.RegisterJobType, request),
                f"register job type {job_type.name}",
                attempts=20,
            )
        except grpc.RpcError as exc:
            err = error_from_rpc(exc)
            raise CronwaveError(
                f"worker: the store refused job type '{job_type.name}': {err.message}"
            ) from exc
        log.info("registered job type %s on queue %s", job_type.name, job_type.queue)


def run_until_stopped(server: RunningServer, consumer: dramatiq.Worker, grace: timedelta) -> None:
    """Start ``consumer`` and ``server``; on SIGTERM or SIGINT stop the consumer
    (in-flight jobs get up to ``grace``), then the server. Blocks until stopped."""
    stopping = threading.Event()

    def shutdown() -> None:
        try:
            consumer.stop(timeout=int(grace.total_seconds() * 1000))
        finally:
            server.stop()

    def on_signal(signum: int, _frame: Any) -> None:
        if stopping.is_set():
            return
        stopping.set()
        log.info("worker: signal %d, stopping gracefully", signum)
        threading.Thread(target=shutdown, name="graceful-stop", daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    consumer.start()
    server.start()
    server.wait()
    log.info("worker stopped")


def main() -> None:
    settings = Settings.from_env()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker %(levelname)s %(message)s")
    provider = init_tracing("worker", settings)
    options = WorkerOptions.from_env(settings.extra, settings.worker_threads)
    registry = default_registry(settings)
    pool: JobProcessPool | None = None
    if options.isolation == "process":
        pool = JobProcessPool(warm=options.warm_processes, max_processes=options.max_processes)
        pool.start(wait=False)
    # Handled messages are acknowledged in batches (worker.acks). Of dramatiq's
    # middleware only the two that act on run messages: the time limit (a backstop
    # behind the supervisor's) and retries, which with max_retries=0 turns a failed
    # message into a rejected one (dead-lettered by DeadLetterRejected). Age limits,
    # callbacks, pipelines and shutdown notices are not used, and each would be
    # called for every message.
    broker = BatchAckBroker(
        url=settings.redis_url,
        namespace=settings.namespace,
        middleware=[TimeLimit(), Retries()],
    )
    dramatiq.set_broker(broker)
    channel = open_channel(settings.store_addr, settings.rpc_timeout)
    store = store_grpc.WorkflowStoreServiceStub(channel)
    register_job_types(store, registry)
    if pool is not None:
        # A couple ready before SERVING; the rest of the warm ones come up meanwhile.
        pool.wait_ready(min(2, pool.warm))

    stats = WorkerStats()
    held = HeldRuns()
    cache_redis = redis_client(settings.redis_url)
    processor = RunProcessor(
        store,
        registry,
        settings.worker_id,
        stats,
        broker=broker,
        isolation=Isolation(pool=pool, kill_grace=options.kill_grace),
        run_status=RunStatusCache(cache_redis, settings.namespace),
        faults=fault_hooks(settings),
        held=held,
        drills=drill_hooks(settings),
    )
    broker.add_middleware(DeadLetterRejected(processor))
    declare_actors(broker, settings.worker_queues, processor, registry)
    consumer = dramatiq.Worker(
        broker,
        queues=set(settings.worker_queues),
        worker_threads=settings.worker_threads,
        worker_timeout=poll_ms(settings.extra),
    )
    status = WorkerStatusServicer(
        settings.worker_id, settings.worker_queues, registry.names(), stats
    )

    def on_stop() -> None:
        held.stop(settings.grace)  # the consumer has stopped: nothing new is held
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
        address=settings.worker_addr,
        register=lambda server: worker_grpc.add_WorkerServiceServicer_to_server(status, server),
        service_names=full_names([worker_service_pb2.DESCRIPTOR]),
        on_stop=on_stop,
    )
    run_until_stopped(RunningServer(service, settings), consumer, settings.grace)
