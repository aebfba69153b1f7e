"""Batch calls in per-run traces (``cronwave_core.telemetry.fanout``) and group commit
(``cronwave_core.batching``), with OpenTelemetry's own SDK and in-memory exporter, and
the local span store's writer and reader."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
import pytest
from cronwave_proto.v1 import dispatcher_service_pb2 as pb
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cronwave_core.batching import Coalescer, ItemRefused
from cronwave_core.telemetry import fanout
from cronwave_core.telemetry.export import JsonLinesSpanExporter
from cronwave_core.telemetry.vocabulary import ATTR_RUN_ID, ATTR_SCHEDULE_ID, Hop
from cronwave_waterfall.local_store import read_jsonl


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter, fanout.Registry]]:
    exporter = InMemorySpanExporter()
    registry = fanout.Registry()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(fanout.FanOutExporter(exporter, registry)))
    yield provider, exporter, registry
    provider.shutdown()


def by_trace(spans: Sequence[ReadableSpan]) -> dict[int, list[ReadableSpan]]:
    out: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        assert span.context is not None
        out.setdefault(span.context.trace_id, []).append(span)
    return out


def test_batch_spans_are_copied_into_each_items_trace_with_the_same_tree(
    traced: tuple[TracerProvider, InMemorySpanExporter, fanout.Registry],
) -> None:
    provider, exporter, registry = traced
    tracer = provider.get_tracer("test")
    roots = [tracer.start_span(f"fire {i}") for i in range(3)]
    items = [
        fanout.Item(
            r.get_span_context().trace_id, r.get_span_context().span_id, {ATTR_SCHEDULE_ID: f"s{i}"}
        )
        for i, r in enumerate(roots)
    ]
    with tracer.start_as_current_span("batch", context=fanout.otel_context.Context()) as batch:
        registry.add(batch.get_span_context().trace_id, items)
        with tracer.start_as_current_span("store call"):
            items[1].attributes[ATTR_RUN_ID] = "run-1"  # known only during the batch
    for r in roots:
        r.end()

    traces = by_trace(exporter.get_finished_spans())
    batch_trace = batch.get_span_context().trace_id
    assert batch_trace not in traces  # only the copies are exported
    for i, r in enumerate(roots):
        spans = {s.name: s for s in traces[r.get_span_context().trace_id]}
        assert set(spans) == {f"fire {i}", "batch", "store call"}
        copy, child = spans["batch"], spans["store call"]
        assert copy.parent is not None and child.parent is not None and copy.context is not None
        assert copy.parent.span_id == r.get_span_context().span_id  # under the item's span
        assert child.parent.span_id == copy.context.span_id  # the batch's tree, kept
        assert copy.start_time == batch.start_time and copy.end_time == batch.end_time  # type: ignore[attr-defined]
        assert child.attributes is not None
        assert child.attributes[ATTR_SCHEDULE_ID] == f"s{i}"
        assert child.attributes[fanout.ATTR_BATCH_SIZE] == 3
    one = {s.name: s for s in traces[roots[1].get_span_context().trace_id]}
    assert one["store call"].attributes is not None
    assert one["store call"].attributes[ATTR_RUN_ID] == "run-1"


def test_copied_ids_agree_across_processes() -> None:
    # A server's copy names as parent the id the client's copy of its span got.
    assert fanout.copy_span_id(0x1234, 0xABC) == fanout.copy_span_id(0x1234, 0xABC)
    assert fanout.copy_span_id(0x1234, 0xABC) != fanout.copy_span_id(0x1234, 0xABD)


def test_items_of_a_batch_request_come_from_their_traceparents() -> None:
    request = pb.StartRunsRequest(
        starts=[
            pb.StartRunRequest(schedule_id="a", traceparent=f"00-{1:032x}-{2:016x}-01"),
            pb.StartRunRequest(schedule_id="b", traceparent="not a traceparent"),
            pb.StartRunRequest(schedule_id="c"),
        ]
    )
    items = fanout.items_of(request)
    assert [(i.trace_id, i.span_id) for i in items] == [(1, 2)]
    assert items[0].attributes == {ATTR_SCHEDULE_ID: "a"}
    assert fanout.parse_traceparent(items[0].traceparent()) == (1, 2)


def test_the_registry_forgets_the_oldest_batches_first() -> None:
    registry = fanout.Registry(limit=2)
    for trace_id in (1, 2, 3):
        registry.add(trace_id, [fanout.Item(trace_id + 10, 1)])
    assert registry.get(1) is None
    assert registry.get(2) is not None and registry.get(3) is not None


def test_coalescer_answers_each_caller_and_batches_what_queues_up() -> None:
    release = threading.Event()
    batches: list[list[int]] = []

    def send(requests: list[int]) -> list[int | BaseException]:
        batches.append(list(requests))
        if len(batches) == 1:
            assert release.wait(10)  # the first call is slow: the others queue up
        return [
            ItemRefused(grpc.StatusCode.NOT_FOUND, f"no {r}") if r == 7 else r * 10
            for r in requests
        ]

    coalescer: Coalescer[int, int] = Coalescer("test", send, lambda r, _tp: r, hop=Hop.PICKUP)
    answers: dict[int, object] = {}

    def caller(n: int) -> None:
        try:
            answers[n] = coalescer.call(n, timeout=20)
        except ItemRefused as exc:
            answers[n] = exc.code()

    first = threading.Thread(target=caller, args=(0,))
    first.start()
    for _ in range(1000):  # until the first batch is on its way
        if batches:
            break
        threading.Event().wait(0.01)
    others = [threading.Thread(target=caller, args=(n,)) for n in range(1, 10)]
    for t in others:
        t.start()
    for _ in range(1000):  # until all nine are queued behind the first
        if len(coalescer._queue) == 9:
            break
        threading.Event().wait(0.01)
    release.set()
    for t in [first, *others]:
        t.join(20)
    coalescer.close()
    assert answers == {n: (grpc.StatusCode.NOT_FOUND if n == 7 else n * 10) for n in range(10)}
    assert batches[0] == [0]
    assert sorted(batches[1]) == list(range(1, 10))  # one call for the nine


def test_coalescer_failure_reaches_every_caller_of_the_batch() -> None:
    def send(requests: list[int]) -> list[int | BaseException]:
        raise ItemRefused(grpc.StatusCode.UNAVAILABLE, "store away")

    coalescer: Coalescer[int, int] = Coalescer("test", send, lambda r, _tp: r, hop=Hop.PICKUP)
    with pytest.raises(ItemRefused) as caught:
        coalescer.call(1, timeout=10)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    coalescer.close()
    with pytest.raises(ItemRefused):
        coalescer.call(2, timeout=10)


def test_a_second_registration_replaces_the_first() -> None:
    # A server registers a batch when it decodes the request, and its handler again
    # with the items it completes (run ids): each span must be copied once per item.
    registry = fanout.Registry()
    registry.add(9, [fanout.Item(1, 1), fanout.Item(2, 1)])
    registry.add(9, [fanout.Item(1, 1), fanout.Item(2, 1)])
    assert len(registry.get(9) or []) == 2


def test_the_local_store_keeps_a_batch_once_and_reads_the_same_copies(
    tmp_path: Path,
    traced: tuple[TracerProvider, InMemorySpanExporter, fanout.Registry],
) -> None:
    provider, exporter, registry = traced
    local = JsonLinesSpanExporter(tmp_path, "svc", registry)
    provider.add_span_processor(SimpleSpanProcessor(local))
    tracer = provider.get_tracer("test")
    roots = [tracer.start_span(f"fire {i}") for i in range(4)]
    items = [
        fanout.Item(r.get_span_context().trace_id, r.get_span_context().span_id, {}) for r in roots
    ]
    with tracer.start_as_current_span("batch", context=fanout.otel_context.Context()) as batch:
        registry.add(batch.get_span_context().trace_id, items)
        with tracer.start_as_current_span("store call"):
            items[2].attributes[ATTR_RUN_ID] = "run-2"
    for r in roots:
        r.end()
    local.shutdown()

    lines = (tmp_path / local.path.name).read_text().splitlines()
    assert len(lines) == 4 + 2 + 2  # roots, the batch's two spans once, a batch line each
    expected = {
        (
            f"{s.context.trace_id:032x}",
            f"{s.context.span_id:016x}",
            f"{s.parent.span_id:016x}" if s.parent else "",
            s.name,
        )
        for s in exporter.get_finished_spans()
        if s.context is not None
    }
    read = list(read_jsonl(local.path))
    assert {(s.trace_id, s.span_id, s.parent_span_id, s.name) for s in read} == expected
    runs = {s.attributes.get(ATTR_RUN_ID) for s in read if s.name == "store call"}
    assert runs == {None, "run-2"}
