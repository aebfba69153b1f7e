"""Test helpers: polling with a bound, fresh names."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc

T = TypeVar("T")

#: The repository's root folder.
REPO = Path(__file__).resolve().parents[1]


def fresh(prefix: str) -> str:
    """A name no other test uses: for schedules, queues, keys, namespaces."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def fresh_namespace() -> str:
    """A Redis key namespace no other test uses (``CRONWAVE_NAMESPACE``)."""
    return f"cwt{uuid.uuid4().hex[:10]}"


def new_traceparent() -> str:
    """A W3C traceparent of a new sampled trace, as a planner's fire carries."""
    return f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"


def eventually(
    check: Callable[[], T],
    *,
    timeout: float = 20.0,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Call ``check`` until it returns a truthy value without raising AssertionError;
    return that value. Fails after ``timeout`` seconds with the last error."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = check()
            if value:
                return value
            last = AssertionError(f"{what}: got {value!r}")
        except AssertionError as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout}s: {last}") from last
        time.sleep(interval)


def stored_spans(spans_dir: Path, pattern: str = "*.jsonl") -> list[dict[str, Any]]:
    """The spans of a local span store as the lines it writes (``span_to_dict``'s
    keys), read through its reader: a batch call's spans come as one copy per run."""
    from cronwave_waterfall.local_store import read_jsonl

    return [
        {
            "trace_id": s.trace_id,
            "span_id": s.span_id,
            "parent_span_id": s.parent_span_id,
            "name": s.name,
            "service": s.service,
            "kind": s.span_kind,
            "start_ns": s.start_ns,
            "end_ns": s.end_ns,
            "status": s.status,
            "attributes": dict(s.attributes),
        }
        for path in sorted(spans_dir.glob(pattern))
        for s in read_jsonl(path)
    ]


def issue_tokens(store: Any, up_to: int, scope: str = "planner") -> None:
    """Have the workflow-store (a ``WorkflowStoreServiceStub``) issue fencing tokens of
    ``scope`` until the newest is at least ``up_to``, as leader-election does when it
    grants the lease: a test that plays the leader itself may then fence its writes
    with any token in 1..up_to, and the store accepts or refuses them as stale."""
    from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

    for _ in range(up_to + 1):
        reply = store.IssueFencingToken(
            store_pb.IssueFencingTokenRequest(fencing_scope=scope), timeout=10
        )
        if reply.fencing_token >= up_to:
            return
    raise AssertionError(f"the store did not issue {scope!r} tokens up to {up_to}")


def plant_schedule_row(
    database_url: str, schedule_id: str, *, as_change: bool = False, **columns: Any
) -> None:
    """Write ``columns`` of a schedule's row straight into the store's database, as a row
    written before a rule existed (or by hand) would be: no validation. ``as_change``:
    under a new store revision, so watches send it on; else none notices until read."""
    import sqlalchemy as sa

    engine = sa.create_engine(database_url)
    try:
        with engine.begin() as conn:
            meta = sa.MetaData()
            schedules = sa.Table("schedules", meta, autoload_with=conn)
            if as_change:
                counter = sa.Table("store_revision", meta, autoload_with=conn)
                bumped = (
                    counter.update()
                    .where(counter.c.id == 1)
                    .values(revision=counter.c.revision + 1)
                    .returning(counter.c.revision)
                )
                columns["revision"] = conn.execute(bumped).scalar_one()
            row = schedules.update().where(schedules.c.id == schedule_id).values(**columns)
            assert conn.execute(row).rowcount == 1, f"no schedule row {schedule_id!r}"
    finally:
        engine.dispose()


class ItemRefused(grpc.RpcError):
    """One item's refusal in a batch answer (``cronwave.v1.ItemError``), raised as an
    RpcError of the same code and message: a test of a one-item batch reads like a
    test of a single call (``pytest.raises(grpc.RpcError)``, ``.code()``,
    ``.details()``)."""

    def __init__(self, error: Any) -> None:
        from cronwave_core.rpc import status_code

        self._code = status_code(error.code)
        self._details = str(error.message)
        super().__init__(f"{self._code.name}: {self._details}")

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def only(results: Any, field: str) -> Any:
    """The one answer of a one-item batch call: ``field`` of its only result, or its
    refusal raised (``ItemRefused``)."""
    (result,) = results
    if result.HasField("error"):
        raise ItemRefused(result.error)
    return getattr(result, field)


# One item at a time through the store's batch calls (every call that acts on runs
# takes a list): each returns its item's answer, or raises its refusal.


def record_one(store: Any, item: Any, **kwargs: Any) -> Any:
    """``RecordRuns`` of one run: its ``RecordRunResponse`` (without the payload)."""
    from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

    reply = store.RecordRuns(store_pb.RecordRunsRequest(runs=[item]), **kwargs)
    return only(reply.results, "recorded")


def claim_one(store: Any, item: Any, *, queues: Sequence[str] = ("default",), **kwargs: Any) -> Any:
    """``ClaimRuns`` of one run, by a worker of ``queues``: its ``ClaimRunResponse``."""
    from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

    request = store_pb.ClaimRunsRequest(claims=[item], queues=queues)
    reply = store.ClaimRuns(request, **kwargs)
    return only(reply.results, "claim")


def complete_one(store: Any, item: Any, **kwargs: Any) -> Any:
    """``CompleteRuns`` of one run: its ``CompleteRunResponse``."""
    from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

    reply = store.CompleteRuns(store_pb.CompleteRunsRequest(completions=[item]), **kwargs)
    return only(reply.results, "completion")


def append_one(store: Any, item: Any, **kwargs: Any) -> Any:
    """``AppendRunEvents`` of one event: the ``RunEvent`` appended."""
    from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

    reply = store.AppendRunEvents(store_pb.AppendRunEventsRequest(events=[item]), **kwargs)
    return only(reply.results, "event")


def get_one(store: Any, run_id: str, **kwargs: Any) -> Any:
    """``GetRuns`` of one run: the ``Run`` as it is now (the test fails when the store
    does not have it)."""
    from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

    request = store_pb.GetRunsRequest(runs=[store_pb.GetRunRequest(run_id=run_id)])
    runs = list(store.GetRuns(request, **kwargs).runs)
    assert len(runs) == 1, f"the store has no run {run_id!r}"
    return runs[0]
