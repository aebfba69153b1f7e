"""Group commit for store calls: many threads each make one call, one batch call is
sent.

A worker runs many jobs at once, and each claims and completes its run in the store.
Sent one by one, those calls cost a round trip and a transaction each; the store's
batch calls (``ClaimRuns``, ``CompleteRuns``, ...) take many in one transaction. A
``Coalescer`` sits between: ``call(request)`` blocks its thread until the answer for
that request is there, while one sender thread sends whatever has queued up since its
last call as one batch. A lone call goes at once (no added wait); calls that arrive
while a batch is on its way go together in the next, so the batch grows with the load
and the caller's latency stays one store call.

Each request keeps its own trace: the batch call is made in a trace of its own, with
the callers' spans registered as its items (``cronwave_core.telemetry.fanout``), so
every run's waterfall shows the batch call it was part of.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import grpc

from cronwave_core.rpc import status_code
from cronwave_core.telemetry import fanout
from cronwave_core.telemetry.vocabulary import ATTR_HOP, ATTR_KIND, Hop, Kind

log = logging.getLogger("cronwave.batching")

Req = TypeVar("Req")
Ans = TypeVar("Ans")

#: At most this many requests go in one batch call.
DEFAULT_MAX_BATCH = 500


class ItemRefused(grpc.RpcError):
    """One request of a batch call was refused: what the single call would have
    raised, with its status code and message (``code()``, ``details()``)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def refusal(code: int, message: str) -> ItemRefused:
    """The ``ItemRefused`` for a batch answer's ``ItemError``."""
    return ItemRefused(status_code(code), message)


@dataclass
class _Pending(Generic[Req, Ans]):
    request: Req
    future: Future[Ans]
    item: fanout.Item | None


class Coalescer(Generic[Req, Ans]):
    """``call(request)`` answered by ``send(requests)``, batched across threads.

    ``send`` makes one batch call and returns, per request, its answer or the
    exception its single call would have raised; an exception ``send`` raises is
    every request's. ``with_context(request, traceparent)`` returns the request with
    its trace context set, for the batch's item."""

    def __init__(
        self,
        name: str,
        send: Callable[[list[Req]], Sequence[Ans | BaseException]],
        with_context: Callable[[Req, str], Req],
        *,
        hop: Hop,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_bytes: int = 0,
        size: Callable[[Req], int] | None = None,
    ) -> None:
        """``max_bytes`` (with ``size``, a request's encoded size): a batch also ends
        before the request that would take its requests' sizes past it, so requests
        that each fit one call never make a batch too large to send; a batch always
        holds one request. 0: no byte bound."""
        if max_bytes and size is None:
            raise ValueError("Coalescer: max_bytes needs size, a request's encoded size")
        self._max_bytes = max_bytes
        self._size = size
        self._name = name
        self._send = send
        self._with_context = with_context
        self._hop = hop
        self._max_batch = max_batch
        self._queue: list[_Pending[Req, Ans]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=f"batch-{name}", daemon=True)
        self._thread.start()

    def call(
        self,
        request: Req,
        timeout: float | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> Ans:
        """The answer to ``request``; raises what its single call would have. The
        batch's spans name the run of the current span, or as ``attributes`` say."""
        future: Future[Ans] = Future()
        item = fanout.item_for_current(attributes)
        if item is not None:
            request = self._with_context(request, item.traceparent())
        with self._cond:
            if self._closed:
                raise ItemRefused(grpc.StatusCode.UNAVAILABLE, f"{self._name}: shutting down")
            self._queue.append(_Pending(request, future, item))
            self._cond.notify()
        return future.result(timeout=timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued, then refuse new calls."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return  # closed and drained
                count = self._batch_count()
                batch = self._queue[:count]
                del self._queue[:count]
            self._flush(batch)

    def _batch_count(self) -> int:
        """How many queued requests the next batch takes."""
        count = min(len(self._queue), self._max_batch)
        if not self._max_bytes or self._size is None:
            return count
        total = 0
        for i, pending in enumerate(self._queue[:count]):
            total += self._size(pending.request)
            if total > self._max_bytes and i > 0:
                return i
        return count

    def _flush(self, batch: list[_Pending[Req, Ans]]) -> None:
        items = [p.item for p in batch if p.item is not None]
        try:
            if items:
                attrs = {ATTR_HOP: self._hop, ATTR_KIND: Kind.APP}
                with fanout.batch_span(f"batch {self._name}", items, attrs):
                    answers = self._send([p.request for p in batch])
            else:
                answers = self._send([p.request for p in batch])
            if len(answers) != len(batch):
                raise ItemRefused(
                    grpc.StatusCode.INTERNAL,
                    f"{self._name}: {len(answers)} answers for {len(batch)} requests",
                )
        except BaseException as exc:  # every caller learns why its call failed
            for p in batch:
                p.future.set_exception(exc)
            return
        for p, answer in zip(batch, answers, strict=True):
            if isinstance(answer, BaseException):
                p.future.set_exception(answer)
            else:
                p.future.set_result(answer)


def results_of(results: Sequence[Any], answer_field: str) -> list[Any | BaseException]:
    """Per item of a batch reply, its answer (``answer_field``) or its refusal."""
    out: list[Any | BaseException] = []
    for result in results:
        if result.HasField("error"):
            out.append(refusal(result.error.code, result.error.message))
        else:
            out.append(getattr(result, answer_field))
    return out
