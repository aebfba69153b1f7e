"""A run's checkpoint: how far the run got, as the job last saved it.

Delivery is at least once and a worker can die anywhere, so a job that does much work
saves where it is, and an attempt that resumes the run (after a crash, a lapsed
heartbeat or a worker that stopped) starts from there instead of from the beginning.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from cronwave_core.errors import InvalidArgument
from cronwave_core.limits import DEFAULT_LIMITS

#: How a saved checkpoint reaches the worker: the JSON object, or None for a beat
#: that changes nothing.
Report = Callable[[dict[str, Any] | None], None]


def _no_report(_data: dict[str, Any] | None) -> None:
    return None


def _json_object(data: Mapping[str, Any], field: str, limit: int | None = None) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise InvalidArgument(field, f"must be a JSON object (a dict), got {type(data).__name__}")
    copy = dict(data)
    try:
        text = json.dumps(copy, allow_nan=False)  # the store takes standard JSON only
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(field, f"must be JSON data: {exc}") from exc
    # The worker sends this very text (ASCII: one byte a character) as checkpoint_json.
    if limit is not None and len(text) > limit:
        raise InvalidArgument(
            field,
            f"at most {limit} bytes of JSON (CRONWAVE_MAX_CHECKPOINT_BYTES), got {len(text)}; "
            "save where the work is (ids, offsets), not the work itself",
        )
    return copy


class Checkpoint(Mapping[str, Any]):
    """The newest checkpoint of the run: empty on a run's first attempt, else what an
    earlier attempt (or this one) saved last.

    ``load()`` returns a copy to work from; ``save(data)`` makes ``data`` (a JSON
    object) the checkpoint and sends it to the store with the attempt's next heartbeat
    (a resumed attempt starts from the newest one the store has). The checkpoint also
    reads as a read-only mapping (``ctx.checkpoint.get("step", 0)``).

    ``save`` raises ``InvalidArgument`` for data over ``limit_bytes`` of JSON (the
    worker's ``CRONWAVE_MAX_CHECKPOINT_BYTES``, 1 MiB by default), keeping the
    checkpoint it had: a checkpoint is read back with its run by every claim, so it
    says where the work is, not what it holds. It raises ``AttemptSuperseded`` once a
    newer attempt owns the run, and
    ``WorkerStopping`` once the worker is stopping (the data given is kept and handed
    back with the run): the job lets both propagate.
    """

    def __init__(
        self,
        data: Mapping[str, Any] | None = None,
        *,
        limit_bytes: int = DEFAULT_LIMITS.checkpoint_bytes,
    ) -> None:
        self._data = _json_object(data or {}, "checkpoint")
        self._limit = limit_bytes
        self._report: Report = _no_report

    def load(self) -> dict[str, Any]:
        """A copy of the newest checkpoint (``{}`` when none was saved)."""
        return json.loads(json.dumps(self._data))  # deep: the job may change it freely

    def save(self, data: Mapping[str, Any]) -> None:
        """Make ``data`` the run's checkpoint and report it (see the class)."""
        self._data = _json_object(data, "checkpoint", self._limit)
        self._report(dict(self._data))

    def _attach(self, report: Report) -> None:
        """Where ``save`` reports to: the attempt's heartbeat (``JobContext``)."""
        self._report = report

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Checkpoint({self._data!r})"
