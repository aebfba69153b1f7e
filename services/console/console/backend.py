"""What the console asks of the suite, over gRPC: the SDK ``Client`` for schedules,
runs, events, the lease and previews, a store stub for dead letters, and the health
service of each process. Every call has the client's deadline; every failure is a
``CronwaveError`` (``Unavailable`` naming the service that did not answer).

Reads are made as the console itself (its service certificate, ``console``). A
change is made as the person who asks for it: over channels opened for that one
change, with the console's certificate for TLS and the person's API key as the
bearer token, so the store and the dispatcher authorise it by that person's role and
record that person as its author. The console's own identity may make no change."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import grpc
from cronwave_proto.v1 import api_key_service_pb2 as keys_pb
from cronwave_proto.v1 import api_key_service_pb2_grpc as keys_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cronwave import AuditEvent, Client, DeadlineBreach, Lease, Run, RunEvent, Schedule
from cronwave_core.errors import CronwaveError, RunNotFound, Unavailable
from cronwave_core.rpc import error_from_rpc, open_channel
from cronwave_core.settings import NetworkSettings, TlsSettings

Resp = TypeVar("Resp")

#: The most schedules one ListRecentRuns call names (the store's batch limit).
MAX_SCHEDULES_PER_CALL = 1_000

#: The gRPC service each process answers health checks for, and its address setting.
SERVICES = (
    ("workflow-store", "cronwave.v1.WorkflowStoreService", "store_addr"),
    ("leader-election", "cronwave.v1.LeaderElectionService", "leader_addr"),
    ("dispatcher", "cronwave.v1.DispatcherService", "dispatcher_addr"),
    ("cron-planner", "cronwave.v1.CronPlannerService", "planner_addr"),
    ("worker", "cronwave.v1.WorkerService", "worker_addr"),
)


@dataclass(frozen=True)
class DeadLetter:
    """One entry of the dead-letter list."""

    run_id: str
    reason: str
    error: str
    queue: str
    job_type: str
    attempt: int
    created_at: datetime | None
    replayed_at: datetime | None


@dataclass(frozen=True)
class KeyHolder:
    """Whom a valid API key names: ``name``, ``role`` and the key's id."""

    name: str
    role: str
    key_id: str


@dataclass(frozen=True)
class Health:
    """One process's answer to its health check: ``SERVING``, another status, or why
    it gave none."""

    service: str
    address: str
    status: str

    @property
    def serving(self) -> bool:
        return self.status == "SERVING"


def _when(msg: Any, name: str) -> datetime | None:
    return getattr(msg, name).ToDatetime(tzinfo=UTC) if msg.HasField(name) else None


class Backend:
    """The suite as the console sees it; ``close`` closes every channel."""

    def __init__(self, network: NetworkSettings, tls: TlsSettings | None = None) -> None:
        self.network = network
        self.tls = tls or TlsSettings.from_env()
        self.client = Client.from_settings(network, self.tls)
        self._channels: dict[str, grpc.Channel] = {}
        store = self._channel(network.store_addr)
        self._store = store_grpc.WorkflowStoreServiceStub(store)
        self._keys = keys_grpc.ApiKeyServiceStub(store)

    @property
    def authenticates(self) -> bool:
        """Whether the suite authenticates callers (not ``CRONWAVE_INSECURE=1``)."""
        return not self.tls.insecure

    def _channel(self, address: str) -> grpc.Channel:
        if address not in self._channels:
            self._channels[address] = open_channel(
                address, self.network.rpc_timeout, traced=False, tls=self.tls
            )
        return self._channels[address]

    @contextlib.contextmanager
    def _as_user(self, token: str) -> Iterator[tuple[Client, store_grpc.WorkflowStoreServiceStub]]:
        """A client and a store stub that call with the console's certificate and
        ``token`` as the bearer token, closed when the block ends."""
        tls = dataclasses.replace(self.tls, token=token)
        channel = open_channel(
            self.network.store_addr, self.network.rpc_timeout, traced=False, tls=tls
        )
        try:
            with Client.from_settings(self.network, tls) as client:
                yield client, store_grpc.WorkflowStoreServiceStub(channel)
        finally:
            channel.close()

    def close(self) -> None:
        self.client.close()
        for channel in self._channels.values():
            channel.close()

    def _call(self, method: Callable[[Any], Resp], request: Any) -> Resp:
        try:
            return method(request)
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise Unavailable(
                    f"workflow-store at {self.network.store_addr} did not answer"
                ) from exc
            raise error_from_rpc(exc) from exc

    def authenticate(self, token: str) -> KeyHolder | None:
        """Whom ``token`` names, asked of the store (as the console), or None for a
        key that is unknown, revoked or malformed."""
        resp = self._call(
            self._keys.AuthenticateApiKey, keys_pb.AuthenticateApiKeyRequest(token=token)
        )
        if not resp.valid:
            return None
        return KeyHolder(resp.key.name, resp.key.role, resp.key.key_id)

    # reads ---------------------------------------------------------------------
    def schedules(self) -> list[Schedule]:
        return self.client.list_schedules()

    def schedule_page(self, after: str, limit: int) -> list[Schedule]:
        """Up to ``limit`` live schedules with ids greater than ``after``, by id (the
        store ends a page by bytes too, so this asks on until it has ``limit`` or the
        list ends)."""
        out: list[Schedule] = []
        while len(out) < limit:
            resp = self._call(
                self._store.ListSchedules,
                store_pb.ListSchedulesRequest(limit=limit - len(out), after_schedule_id=after),
            )
            if not resp.schedules:
                break
            out.extend(Schedule.from_proto(s) for s in resp.schedules)
            after = resp.schedules[-1].schedule_id
        return out

    def schedule(self, schedule_id: str) -> Schedule:
        """Raises ``NotFound`` for an unknown or deleted schedule."""
        return self.client.get_schedule(schedule_id)

    def runs(self, schedule_id: str | None = None, limit: int = 50) -> list[Run]:
        return self.client.list_runs(schedule_id, limit=limit)

    def recent_runs(self, schedule_ids: Sequence[str], per_schedule: int) -> dict[str, list[Run]]:
        """Each schedule's newest ``per_schedule`` runs (newest first), lean: one
        ``ListRecentRuns`` call for up to 1,000 schedules, and another only for those
        whose runs did not fit in its answer."""
        out: dict[str, list[Run]] = {schedule_id: [] for schedule_id in schedule_ids}
        wanted = list(out)
        while wanted:
            resp = self._call(
                self._store.ListRecentRuns,
                store_pb.ListRecentRunsRequest(
                    schedule_ids=wanted[:MAX_SCHEDULES_PER_CALL], per_schedule=per_schedule
                ),
            )
            for msg in resp.runs:
                out.setdefault(msg.schedule_id, []).append(Run.from_proto(msg))
            left = list(resp.left_out)
            if len(left) >= len(wanted[:MAX_SCHEDULES_PER_CALL]):  # the store always sends one
                raise RuntimeError("ListRecentRuns left out every schedule it was asked for")
            wanted = left + wanted[MAX_SCHEDULES_PER_CALL:]
        return out

    def run(self, run_id: str) -> Run:
        """Raises ``RunNotFound`` for an unknown run."""
        return self.client.get_run(run_id)

    def events(self, run_id: str) -> list[RunEvent]:
        return self.client.run_events(run_id)

    def audit(self, schedule_id: str, limit: int = 50) -> list[AuditEvent]:
        """The schedule's audit trail, newest first: who changed, paused, triggered it."""
        return self.client.audit_events(schedule_id, limit=limit)

    def deadline_history(self, schedule_id: str | None, limit: int = 50) -> list[DeadlineBreach]:
        """Deadline breaches, newest first: of one schedule, or of all (None)."""
        return self.client.deadline_breaches(schedule_id, limit=limit)

    def dead_letters(self, include_replayed: bool = False, limit: int = 200) -> list[DeadLetter]:
        resp = self._call(
            self._store.ListDeadLetters,
            store_pb.ListDeadLettersRequest(limit=limit, include_replayed=include_replayed),
        )
        return [
            DeadLetter(
                run_id=d.run_id,
                reason=d.reason,
                error=d.error,
                queue=d.queue,
                job_type=d.job_type,
                attempt=d.attempt,
                created_at=_when(d, "created_at"),
                replayed_at=_when(d, "replayed_at"),
            )
            for d in resp.dead_letters
        ]

    def lease(self) -> Lease | None:
        """The planners' lease, or ``None`` when leader-election does not answer."""
        try:
            return self.client.leader()
        except CronwaveError:
            return None

    def health(self) -> list[Health]:
        """Each service's health, asked with a short deadline."""
        out = []
        for name, service, attr in SERVICES:
            address = getattr(self.network, attr)
            stub = health_pb2_grpc.HealthStub(self._channel(address))
            try:
                resp = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=1.0)
                status = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
            except grpc.RpcError as exc:
                status = "UNREACHABLE" if exc.code() != grpc.StatusCode.NOT_FOUND else "UNKNOWN"
            out.append(Health(name, address, status))
        return out

    # changes, each as the person who makes it (``token``: their API key) ---------
    def pause(self, token: str, schedule_id: str, note: str) -> Schedule:
        with self._as_user(token) as (client, _):
            return client.pause_schedule(schedule_id, note=note)

    def resume(self, token: str, schedule_id: str, note: str) -> Schedule:
        with self._as_user(token) as (client, _):
            return client.resume_schedule(schedule_id, note=note)

    def trigger(self, token: str, schedule_id: str) -> Run:
        with self._as_user(token) as (client, _):
            return client.trigger(schedule_id)

    def replay(self, token: str, run_id: str) -> Run:
        """Replay a dead-lettered run; ``RunNotFound`` when the store has no such run."""
        with self._as_user(token) as (_, store):
            resp = self._call(
                store.ReplayDeadLetter, store_pb.ReplayDeadLetterRequest(run_id=run_id)
            )
        if not resp.run.run_id:
            raise RunNotFound(run_id)
        return Run.from_proto(resp.run)
