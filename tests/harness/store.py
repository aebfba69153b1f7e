"""A workflow-store process on its own, driven by pid, the fixtures that start them, and
builders for the requests the tests send it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as api_grpc

from cronwave_core.channels import DeadlineInterceptor
from cronwave_core.convert import dt_to_ts, td_to_duration
from cronwave_core.errors import Unavailable
from cronwave_core.forked import ForkedProcess, start_module
from cronwave_core.security.identity import ON_BEHALF_OF
from cronwave_core.suite import free_port, wait_healthy
from tests.harness.processes import ProcessTable
from tests.harness.tls import hop_channel
from tests.helpers import claim_one, fresh, get_one, issue_tokens, record_one

# The planner scope's fencing tokens a store started here has issued.
TOKENS_ISSUED = 10

SERVICE_DIR = Path(__file__).resolve().parents[2] / "services" / "workflow-store"


def _pythonpath() -> str:
    """The child must import workflow_store even when the editable install predates
    the package: put its folder on PYTHONPATH as well."""
    parts = [str(SERVICE_DIR), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return os.pathsep.join(parts)


#: How many ports a store started on a port of its own tries, and what its log says
#: when one was taken before it bound it.
PORT_TRIES = 3
PORT_TAKEN = "Failed to bind to address"


class StoreProcess:
    """One ``python -P -m workflow_store``, forked from the test process's fork server
    when it runs one; stopped by pid, whatever happens. Its process is recorded in
    ``table`` (a table of its own when none is given)."""

    def __init__(
        self,
        data_dir: Path,
        database_url: str,
        port: int | None = None,
        table: ProcessTable | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.table = table or ProcessTable("the workflow-store process")
        self._fixed_port = port is not None
        self._data_dir = data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWAVE_")}
        self._listen_on(port or free_port())
        self.env.update(
            CRONWAVE_DATA_DIR=str(data_dir),
            CRONWAVE_DATABASE_URL=database_url,
            CRONWAVE_GRACE="2",
            CRONWAVE_TLS_DIR=os.environ["CRONWAVE_TLS_DIR"],
            CRONWAVE_TLS_IDENTITY="workflow-store",
            PYTHONPATH=_pythonpath(),
            PYTHONUNBUFFERED="1",
        )
        self.env.update(env or {})
        self.popen: subprocess.Popen[bytes] | ForkedProcess | None = None
        self._channels: list[grpc.Channel] = []

    def _listen_on(self, port: int) -> None:
        self.port = port
        self.address = f"127.0.0.1:{port}"
        self.log_path = self._data_dir / f"workflow-store-{port}.log"
        self.env["CRONWAVE_STORE_ADDR"] = self.address

    def start(self) -> StoreProcess:
        """Start the process and wait until it answers. A port picked free may be taken
        before the store binds it (a service of another suite picks its own ports):
        then, unless the port was asked for, it starts again on another, three times
        at most."""
        for _ in range(PORT_TRIES):
            argv = [sys.executable, "-P", "-m", "workflow_store"]
            self.popen = self.table.track(start_module(argv, self.env, self.log_path))
            deadline = time.monotonic() + 60
            while True:
                try:
                    wait_healthy(self.address, timedelta(seconds=1))
                    self._play_leader_election()
                    return self
                except Unavailable as exc:
                    if self.alive() and time.monotonic() <= deadline:
                        continue
                    self.stop()
                    if not self._fixed_port and PORT_TAKEN in self.log():
                        break
                    raise AssertionError(
                        f"workflow-store did not start: {exc}\n{self.log()}"
                    ) from exc
            self._listen_on(free_port())
        raise AssertionError(f"workflow-store found no free port in {PORT_TRIES} tries")

    def _play_leader_election(self) -> None:
        """No leader-election runs beside this store: have it issue the planner
        scope's tokens 1..TOKENS_ISSUED, as ten lease grants would have, so tests can
        fence writes with any of them."""
        channel = grpc.intercept_channel(
            hop_channel(None, self.address), DeadlineInterceptor(timedelta(seconds=15))
        )
        try:
            issue_tokens(api_grpc.WorkflowStoreServiceStub(channel), TOKENS_ISSUED)
        finally:
            channel.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stub(self) -> api_grpc.WorkflowStoreServiceStub:
        channel = grpc.intercept_channel(
            hop_channel(None, self.address), DeadlineInterceptor(timedelta(seconds=15))
        )
        self._channels.append(channel)
        return api_grpc.WorkflowStoreServiceStub(channel)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill9(self) -> None:
        assert self.popen is not None
        os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)

    def terminate(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait; the exit code."""
        assert self.popen is not None
        self.popen.send_signal(signal.SIGTERM)
        return self.popen.wait(timeout=timeout)

    def stop(self) -> None:
        for channel in self._channels:
            channel.close()
        self._channels.clear()
        if not self.alive():
            return
        assert self.popen is not None
        try:
            self.terminate()
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=10)


StartStore = Callable[..., StoreProcess]


@pytest.fixture
def start_store(tmp_path: Path, database_url: str) -> Iterator[StartStore]:
    """Start store processes on the test's database (``env`` on top of the harness's);
    all are stopped at the end, and none may be left."""
    table = ProcessTable("start_store's workflow-store processes")
    started: list[StoreProcess] = []

    def start(port: int | None = None, env: dict[str, str] | None = None) -> StoreProcess:
        proc = StoreProcess(tmp_path / "store", database_url, port, table, env)
        started.append(proc)
        return proc.start()

    yield start
    table.close(proc.stop for proc in started)


@pytest.fixture
def store(start_store: StartStore) -> StoreProcess:
    """One workflow-store process on the test's fresh database."""
    return start_store()


# -- request builders ----------------------------------------------------------------------

FIRE = datetime(2030, 1, 1, 2, 0, tzinfo=UTC)
#: The person the harness records manual runs for (the store records one only on
#: behalf of a person, whom the dispatcher relays).
MANUAL_BY = "user:local-admin"
#: A fire time of ``schedule_msg``'s default calendar (02:00 in Berlin) that has passed:
#: the store records a slot MISSED only when it is one of its schedule's, and due.
PAST_FIRE = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)


def register_job_type(
    stub: api_grpc.WorkflowStoreServiceStub,
    name: str | None = None,
    heartbeat_timeout: timedelta = timedelta(seconds=10),
    queue: str = "",
) -> str:
    name = name or fresh("job")
    stub.RegisterJobType(
        api.RegisterJobTypeRequest(
            job_type=pb.JobType(
                name=name,
                duration_limit=td_to_duration(timedelta(minutes=5)),
                heartbeat_timeout=td_to_duration(heartbeat_timeout),
                queue=queue,
            )
        )
    )
    return name


def schedule_msg(schedule_id: str, job_type: str, **spec: object) -> pb.Schedule:
    spec.setdefault("cron", ["0 2 * * *"])
    spec.setdefault("time_zone", "Europe/Berlin")
    return pb.Schedule(
        schedule_id=schedule_id,
        spec=pb.ScheduleSpec(**spec),  # type: ignore[arg-type]
        job_type=job_type,
        payload_json='{"customers": 100000}',
    )


def create_schedule(
    stub: api_grpc.WorkflowStoreServiceStub, job_type: str | None = None, **spec: object
) -> pb.Schedule:
    """A new schedule of ``job_type`` (a new one when None), with ``schedule_msg``'s
    spec where ``spec`` gives no other field."""
    job_type = job_type or register_job_type(stub)
    resp = stub.CreateSchedule(
        api.CreateScheduleRequest(schedule=schedule_msg(fresh("sched"), job_type, **spec))
    )
    return resp.schedule


def record_run(
    stub: api_grpc.WorkflowStoreServiceStub,
    schedule_id: str,
    fire: datetime = FIRE,
    token: int = 1,
    trigger: pb.TriggerKind = pb.TRIGGER_KIND_SCHEDULED,
) -> api.RecordRunResponse:
    """``RecordRuns`` of one run, answered with the run as the store has it (a batch's
    answer leaves payloads out). Recorded as the dispatcher records one: to be queued
    (``enqueue``, so a worker of its queue may claim it); a manual run on behalf of
    the operator it relays, ``MANUAL_BY``."""
    relayed = [(ON_BEHALF_OF, MANUAL_BY)] if trigger == pb.TRIGGER_KIND_MANUAL else []
    recorded = record_one(
        stub,
        api.RecordRunRequest(
            schedule_id=schedule_id,
            fire_time=dt_to_ts(fire),
            trigger=trigger,
            fencing_token=token,
            enqueue=True,
        ),
        metadata=relayed,
    )
    return api.RecordRunResponse(run=get_one(stub, recorded.run.run_id), created=recorded.created)


def claimed_run(
    stub: api_grpc.WorkflowStoreServiceStub, heartbeat_timeout: timedelta = timedelta(seconds=30)
) -> tuple[pb.Run, str]:
    """A run of a new schedule, claimed by worker w1, with its attempt token."""
    job = register_job_type(stub, heartbeat_timeout=heartbeat_timeout)
    run = record_run(stub, create_schedule(stub, job).schedule_id).run
    claim = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w1"))
    assert claim.claimed
    return claim.run, claim.attempt_token


def record_missed(
    stub: api_grpc.WorkflowStoreServiceStub,
    schedule_id: str,
    fire: datetime = PAST_FIRE,
    reason: str = "missed",
    token: int = 1,
) -> tuple[int, pb.Run | None]:
    """``RecordMissedSlots`` of one slot: the rows it wrote (0 or 1) and the slot's row
    as it is afterwards (None when it has none)."""
    reply = stub.RecordMissedSlots(
        api.RecordMissedSlotsRequest(
            slots=[
                api.MissedSlot(schedule_id=schedule_id, fire_time=dt_to_ts(fire), reason=reason)
            ],
            fencing_token=token,
        )
    )
    runs = stub.ListRuns(api.ListRunsRequest(schedule_id=schedule_id, limit=1000)).runs
    return reply.recorded, next((r for r in runs if r.fire_time == dt_to_ts(fire)), None)


def rpc_error(call, *args, **kwargs) -> grpc.RpcError:
    """The RpcError ``call`` raised (fails the test when it did not raise)."""
    with pytest.raises(grpc.RpcError) as info:
        call(*args, **kwargs)
    return info.value
