"""Test helpers: polling with a bound, fresh names."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def fresh(prefix: str) -> str:
    """A name no other test uses: for schedules, queues, keys, namespaces."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


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
