"""Webhook deliveries of deadline breaches: a bounded queue and delivery threads, so
neither the deadline sweep nor any RPC waits for a webhook.

Each delivery is one JSON POST (the breach, or Slack's ``{"text": ...}``) with a
timeout, retried with exponential backoff until a 2xx answer or the last attempt;
every attempt's outcome is written to its delivery row (attempts, the answer's HTTP
status, the error, when the next POST is due), and the last one's status is
``delivered`` or ``failed``. Redirects are not followed: a webhook answers itself or
fails.

The rows are an outbox (``delivery_outbox``): a delivery is sent only under its claim,
renewed before each POST, so one this process lost (it stalled) is dropped here, not
sent twice; one that does not fit in the queue is left pending with its claim lapsed,
and one this process was sending when it stopped or died is resumed from its row --
attempts made, next POST due, same backoff -- by ``delivery_relay``.

The standard library's ``urllib`` is enough here: one POST per breach and notifier,
at the rate slots breach their deadlines, needs no connection pool, and the store's
install stays free of an HTTP client package.
"""

from __future__ import annotations

import itertools
import json
import logging
import queue
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_attempt

from cronwave_core.backoff import exponential, nth_wait
from cronwave_core.domain.deadlines import NotifyFormat
from workflow_store.deadline_records import BreachRecord, DeliveryRecord, DeliveryStatus

log = logging.getLogger("cronwave.store.notify")

#: Deliveries waiting for a thread at most; more are recorded failed at once.
QUEUE_SIZE = 1_000
THREADS = 2
MAX_BACKOFF = timedelta(minutes=5)
#: A delivery's claim outlasts its POST's timeout by this much (see ``delivery_outbox``).
CLAIM_MARGIN = timedelta(seconds=5)
_USER_AGENT = "cronwave-deadline-notifier"


class Outbox(Protocol):
    """The delivery rows, as ``delivery_outbox.DeliveryOutbox`` keeps them."""

    def record_delivery(
        self,
        delivery_id: int,
        token: str,
        status: DeliveryStatus,
        attempts: int,
        http_status: int,
        error: str,
        *,
        retry_in: timedelta | None = None,
        hold: timedelta = ...,
    ) -> bool: ...

    def renew_delivery(self, delivery_id: int, token: str, hold: timedelta) -> bool: ...


@dataclass(frozen=True)
class _Job:
    delivery: DeliveryRecord
    body: bytes


@dataclass(frozen=True)
class _Post:
    """One POST of a delivery: its number among the delivery's attempts, the answer's
    HTTP status (0: none) and, unless 2xx, why it failed."""

    attempt: int
    status: int
    error: str

    @property
    def delivered(self) -> bool:
        return 200 <= self.status < 300


def retry_wait(backoff: timedelta, attempts: int) -> timedelta:
    """The wait after a delivery's ``attempts``-th POST failed: ``backoff``, doubled
    for each POST before, at most ``MAX_BACKOFF``."""
    return nth_wait(exponential(backoff, MAX_BACKOFF), attempts)


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def breach_document(breach: BreachRecord) -> dict[str, Any]:
    """The JSON body of a ``json`` notifier."""
    return {
        "event": "cronwave.deadline_breached",
        "breach_id": breach.breach_id,
        "schedule_id": breach.schedule_id,
        "fire_time": _iso(breach.fire_time),
        "deadline_at": _iso(breach.deadline_at),
        "deadline_seconds": breach.deadline.total_seconds(),
        "reason": breach.reason,
        "cause": breach.cause,
        "run_id": breach.run_id or None,
        "run_state": breach.run_state.name if breach.run_state else None,
        "detected_at": _iso(breach.detected_at),
    }


def slack_text(breach: BreachRecord) -> str:
    run = f" (run {breach.run_id})" if breach.run_id else ""
    cause = f": {breach.cause}" if breach.cause else ""
    return (
        f"cronwave: schedule `{breach.schedule_id}` missed its deadline for the slot of "
        f"{_iso(breach.fire_time)} (due {_iso(breach.deadline_at)}): "
        f"{breach.reason}{cause}{run}"
    )


def body(breach: BreachRecord, fmt: NotifyFormat) -> bytes:
    doc: dict[str, Any] = (
        {"text": slack_text(breach)} if fmt is NotifyFormat.SLACK else breach_document(breach)
    )
    return json.dumps(doc).encode()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        return None


class Notifications:
    """The delivery queue and its threads. ``submit`` never blocks."""

    def __init__(
        self,
        outbox: Outbox,
        *,
        timeout: timedelta,
        attempts: int,
        backoff: timedelta,
        queue_size: int = QUEUE_SIZE,
        threads: int = THREADS,
    ) -> None:
        self._outbox = outbox
        self._hold = timeout + CLAIM_MARGIN
        self._timeout = timeout.total_seconds()
        self._attempts = attempts
        self._backoff = backoff
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=queue_size)
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._work, name=f"deadline-notify-{i}", daemon=True)
            for i in range(threads)
        ]
        self._opener = urllib.request.build_opener(_NoRedirect())

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: timedelta = timedelta(seconds=2)) -> None:
        """Stop taking deliveries; a delivery waiting for its next attempt stays
        ``pending`` with the attempts it made."""
        self._stop.set()
        for _ in self._threads:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                break
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout.total_seconds() / max(len(self._threads), 1))

    def room(self) -> int:
        """How many deliveries the queue takes now without refusing one."""
        return max(self._queue.maxsize - self._queue.qsize(), 0)

    def submit(self, breach: BreachRecord) -> None:
        """Queue the breach's deliveries, each under the claim its record bears, from
        the attempts it has made. One that does not fit is left to the outbox."""
        for delivery in breach.deliveries:
            job = _Job(delivery, body(breach, delivery.format))
            try:
                self._queue.put_nowait(job)
            except queue.Full:
                log.warning(
                    "deadline notification %d of %s@%s waits in the outbox: the delivery "
                    "queue is full (%d)",
                    delivery.delivery_id,
                    breach.schedule_id,
                    _iso(breach.fire_time),
                    self._queue.maxsize,
                )
                self._safe(self._outbox.renew_delivery, delivery, timedelta(0))

    def _work(self) -> None:
        while not self._stop.is_set():
            job = self._queue.get()
            if job is None:
                return
            try:
                self._deliver(job)
            except Exception:
                log.exception("a deadline notification failed unexpectedly")

    def _deliver(self, job: _Job) -> None:
        delivery = job.delivery
        made = delivery.attempts
        if made >= self._attempts:
            self._settle(delivery, DeliveryStatus.FAILED, made, 0, "no attempts left")
            return
        numbers = itertools.count(made + 1)

        def wait(state: RetryCallState) -> float:
            return retry_wait(self._backoff, made + state.attempt_number).total_seconds()

        posts = Retrying(
            retry=retry_if_result(lambda post: post is not None and not post.delivered),
            stop=stop_after_attempt(self._attempts - made),
            wait=wait,
            sleep=self._pause,
            before_sleep=lambda state: self._pending(delivery, state),
            retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
        )
        post: _Post | None = posts(lambda: self._try(job, next(numbers), first=made + 1))
        if post is None:  # not this process's to send, or stopping
            return
        if post.delivered:
            self._settle(delivery, DeliveryStatus.DELIVERED, post.attempt, post.status, "")
            return
        self._settle(delivery, DeliveryStatus.FAILED, post.attempt, post.status, post.error)
        log.warning(
            "deadline notification %d to %s failed after %d attempts: %s",
            delivery.delivery_id,
            delivery.url,
            post.attempt,
            post.error,
        )

    def _try(self, job: _Job, attempt: int, *, first: int) -> _Post | None:
        """POST ``job`` under its claim, renewed first; None, sending nothing, when the
        claim is another's or (after a wait) the notifier is stopping."""
        delivery = job.delivery
        if attempt > first and self._stop.is_set():
            return None  # it stays pending, with the attempts it made
        if not self._safe(self._outbox.renew_delivery, delivery, self._hold):
            log.info(
                "deadline notification %d not sent here: its claim is another's",
                delivery.delivery_id,
            )
            return None
        status, error = self._post(delivery.url, job.body)
        return _Post(attempt, status, error)

    def _pending(self, delivery: DeliveryRecord, state: RetryCallState) -> None:
        """Record a failed POST whose next one is due after the wait."""
        post = state.outcome.result() if state.outcome else None
        if isinstance(post, _Post):
            wait = retry_wait(self._backoff, post.attempt)
            self._settle(
                delivery, DeliveryStatus.PENDING, post.attempt, post.status, post.error,
                retry_in=wait,
            )  # fmt: skip

    def _pause(self, seconds: float) -> None:
        self._stop.wait(seconds)  # a stop ends the wait at once

    def _settle(
        self,
        delivery: DeliveryRecord,
        status: DeliveryStatus,
        attempts: int,
        http: int,
        error: str,
        *,
        retry_in: timedelta | None = None,
    ) -> None:
        try:
            self._outbox.record_delivery(
                delivery.delivery_id,
                delivery.claim_token,
                status,
                attempts,
                http,
                error,
                retry_in=retry_in,
                hold=self._hold,
            )
        except Exception:
            log.exception(
                "the outcome of deadline notification %d was not recorded", delivery.delivery_id
            )

    def _safe(
        self, call: Callable[[int, str, timedelta], bool], delivery: DeliveryRecord, hold: timedelta
    ) -> bool:
        """``call(id, token, hold)``; False when it failed too (the claim is unsure)."""
        try:
            return bool(call(delivery.delivery_id, delivery.claim_token, hold))
        except Exception:
            log.exception(
                "the claim of deadline notification %d was not renewed", delivery.delivery_id
            )
            return False

    def _post(self, url: str, data: bytes) -> tuple[int, str]:
        """The answer's HTTP status (0: none) and, unless 2xx, why it failed."""
        request = urllib.request.Request(
            url,
            data=data,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": _USER_AGENT},
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as answer:
                answer.read(65_536)
                return int(answer.status), ""
        except urllib.error.HTTPError as exc:
            return int(exc.code), f"HTTP {exc.code}"
        except TimeoutError:
            return 0, f"timed out after {self._timeout:g}s"
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, TimeoutError):
                return 0, f"timed out after {self._timeout:g}s"
            text = reason.strerror if isinstance(reason, OSError) and reason.strerror else reason
            return 0, f"connection failed: {text}"
        except (OSError, ValueError) as exc:
            return 0, f"connection failed: {type(exc).__name__}"
