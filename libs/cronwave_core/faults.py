"""Latency faults: a known delay added to one hop and kind of time, for a known share of runs.

For tests and drills only: a process gets an injector (``Faults``) only when it was
started with ``CRONWAVE_TEST_HOOKS=1`` and ``CRONWAVE_FAULT`` names a fault
(``fault_hooks``); every other process has ``NO_FAULTS``, whose hooks do nothing, so
nothing on the hot path knows of faults. ``CRONWAVE_FAULT`` without the switch stops start-up
(``cronwave_core.settings``).

``CRONWAVE_FAULT`` is a comma-separated list of ``name=value`` items (other items, such
as the planner's ``planner.hold_start=...``, are left to the code that reads them);
each ``delay=<hop>:<kind>:<delay>:<fraction>`` item adds ``delay`` (``50ms``, ``0.05s``
or seconds) of ``kind`` time to ``hop`` in a ``fraction`` (0 to 1) of the runs, e.g.
``CRONWAVE_FAULT=delay=persist:database:50ms:0.05``.

Which runs: those whose run key ``<schedule_id>@<fire time in epoch microseconds>``
(``run_key``) hashes below the fraction (``selected``). The choice is deterministic and
the same in every process, and known before the run id exists (the dispatcher's
look-ups come before the store names the run), so a test can tell from the spans
which runs were slowed. The delay is slept inside the span of that hop and kind, which
is marked with ``cronwave.fault``; it holds no lock (a database delay is added after
the store's transaction, inside its span), so runs without the fault are not slowed.

Where each point is applied (``POINTS``); no service's own code does it: the
interceptors of ``cronwave_core.fault_interceptors`` and the worker's test-hook
middleware (``worker.middleware.faults``) do, installed in a process started for tests:

- ``dispatch:cache``  the dispatcher, before it records a start (its look-ups)
- ``dispatch:app``    the dispatcher, before it records a start (its handling)
- ``persist:database`` the store's answer to RecordRuns, after the transaction
- ``pickup:queue``    before the worker takes the message (the run waits longer in
  its queue)
- ``execute:app``     the worker, before the job body starts
- ``complete:database`` the store's answer to CompleteRuns, after the transaction
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from opentelemetry.trace import Span

from cronwave_core.errors import ConfigurationError
from cronwave_core.settings import TestHooks
from cronwave_core.telemetry.vocabulary import ATTR_FAULT

log = logging.getLogger("cronwave.faults")

VARIABLE = "CRONWAVE_FAULT"
_NONE = timedelta(0)
ITEM = "delay"
POINTS = frozenset(
    {
        ("dispatch", "cache"),
        ("dispatch", "app"),
        ("persist", "database"),
        ("pickup", "queue"),
        ("execute", "app"),
        ("complete", "database"),
    }
)
MAX_DELAY = timedelta(seconds=60)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def run_key(schedule_id: str, fire_time: datetime) -> str:
    """A run's identity before it has an id: its schedule and nominal fire time."""
    delta = fire_time.astimezone(UTC) - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return f"{schedule_id}@{micros}"


def _unit(key: str) -> float:
    """A number in [0, 1) that depends on ``key`` alone, the same in every process."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(frozen=True)
class LatencyFault:
    """``delay`` more ``kind`` time in ``hop`` for ``fraction`` of the runs."""

    hop: str
    kind: str
    delay: timedelta
    fraction: float

    @property
    def label(self) -> str:
        return f"{self.hop}:{self.kind}:+{self.delay.total_seconds() * 1000:g}ms"

    def selected(self, key: str) -> bool:
        """Whether the run with this ``run_key`` gets the delay."""
        return _unit(f"{self.hop}:{self.kind}:{key}") < self.fraction


def _delay(raw: str, item: str) -> timedelta:
    text = raw.strip().lower()
    try:
        if text.endswith("ms"):
            value = timedelta(milliseconds=float(text[:-2]))
        else:
            value = timedelta(seconds=float(text.removesuffix("s")))
    except ValueError as exc:
        raise ConfigurationError(
            f"{VARIABLE}: {item!r}: the delay must look like 50ms or 0.05s, got {raw!r}"
        ) from exc
    if not timedelta(0) < value <= MAX_DELAY:
        raise ConfigurationError(
            f"{VARIABLE}: {item!r}: the delay must be above 0 and at most "
            f"{MAX_DELAY.total_seconds():g}s, got {raw!r}"
        )
    return value


def _fraction(raw: str, item: str) -> float:
    try:
        value = float(raw.strip().removesuffix("%")) / (100 if raw.strip().endswith("%") else 1)
    except ValueError as exc:
        raise ConfigurationError(
            f"{VARIABLE}: {item!r}: the fraction must be a number from 0 to 1 (or 0% to "
            f"100%), got {raw!r}"
        ) from exc
    if not 0 <= value <= 1:
        raise ConfigurationError(
            f"{VARIABLE}: {item!r}: the fraction must be from 0 to 1, got {raw!r}"
        )
    return value


def named_items(raw: str, example: str) -> dict[str, str]:
    """The ``name=value`` items of a ``CRONWAVE_FAULT`` value, for the drills a service
    reads by name; a malformed item stops start-up (``ConfigurationError``), with
    ``example`` of a well-formed one."""
    items: dict[str, str] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigurationError(
                f"CRONWAVE_FAULT: expected name=value items, e.g. {example}, got {item!r}"
            )
        items[name.strip()] = value.strip()
    return items


def parse(raw: str) -> list[LatencyFault]:
    """The latency faults in a ``CRONWAVE_FAULT`` value; other items are skipped. A
    malformed latency item stops start-up with a ``ConfigurationError`` naming it."""
    faults: list[LatencyFault] = []
    seen: set[tuple[str, str]] = set()
    for item in (part.strip() for part in raw.split(",")):
        name, sep, value = item.partition("=")
        if not sep or name.strip() != ITEM:
            continue
        parts = value.split(":")
        if len(parts) != 4:
            raise ConfigurationError(
                f"{VARIABLE}: {item!r}: expected delay=<hop>:<kind>:<delay>:<fraction>, "
                "e.g. delay=persist:database:50ms:0.05"
            )
        hop, kind = parts[0].strip(), parts[1].strip()
        if (hop, kind) not in POINTS:
            points = ", ".join(f"{h}:{k}" for h, k in sorted(POINTS))
            raise ConfigurationError(
                f"{VARIABLE}: {item!r}: no fault point {hop}:{kind}; the points are {points}"
            )
        if (hop, kind) in seen:
            raise ConfigurationError(f"{VARIABLE}: {item!r}: {hop}:{kind} is named twice")
        seen.add((hop, kind))
        faults.append(LatencyFault(hop, kind, _delay(parts[2], item), _fraction(parts[3], item)))
    return faults


class FaultHooks:
    """The latency fault points of one process, called on every run's hot path. Every
    hook does nothing: what a process not started for tests has (``NO_FAULTS``)."""

    def __bool__(self) -> bool:
        return False

    def get(self, hop: str, kind: str) -> LatencyFault | None:
        """The fault of ``hop``/``kind``, if one is configured."""
        return None

    def inject(self, hop: str, kind: str, key: str, span: Span | None = None) -> timedelta:
        """Sleep the delay of the fault of ``hop``/``kind`` if it selects the run ``key``
        (a ``run_key``) and mark ``span``; return the delay slept (0 if none)."""
        return _NONE


NO_FAULTS = FaultHooks()


class Faults(FaultHooks):
    """The latency fault injector of a process started for tests; installed only by
    ``fault_hooks`` (or a test)."""

    def __init__(self, faults: Iterable[LatencyFault] = ()) -> None:
        self._by_point = {(f.hop, f.kind): f for f in faults}
        for fault in self._by_point.values():
            log.warning(
                "fault injection on: %s for %.1f%% of runs", fault.label, fault.fraction * 100
            )

    @classmethod
    def from_env_value(cls, raw: str) -> Faults:
        """From a ``CRONWAVE_FAULT`` value (``TestHooks.fault``)."""
        return cls(parse(raw))

    def __bool__(self) -> bool:
        return bool(self._by_point)

    def get(self, hop: str, kind: str) -> LatencyFault | None:
        return self._by_point.get((hop, kind))

    def inject(self, hop: str, kind: str, key: str, span: Span | None = None) -> timedelta:
        fault = self._by_point.get((hop, kind))
        if fault is None or not fault.selected(key):
            return _NONE
        if span is not None:
            span.set_attribute(ATTR_FAULT, fault.label)
        time.sleep(fault.delay.total_seconds())
        return fault.delay


def fault_hooks(hooks: TestHooks) -> FaultHooks:
    """The injector of the latency faults ``CRONWAVE_FAULT`` names, in a process started
    for tests (``hooks.enabled``); ``NO_FAULTS`` in every other process and when
    none is named. A malformed item stops start-up (``ConfigurationError``)."""
    if not hooks.enabled:
        return NO_FAULTS
    faults = Faults.from_env_value(hooks.fault)
    return faults if faults else NO_FAULTS
