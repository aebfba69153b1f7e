"""What a cancel asks for: which run, why, and how long its running body may take to
stop on its own. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from cronwave_core.errors import InvalidArgument
from cronwave_core.fields import require_run_id

#: The longest grace a cancel may give a running body. A longer wait is no cancel: let
#: the job's duration limit end it.
MAX_CANCEL_GRACE = timedelta(hours=1)
#: The reason recorded when a cancel gives none.
DEFAULT_CANCEL_REASON = "cancelled"
#: A reason is recorded as the run's error: at most this many characters.
MAX_CANCEL_REASON = 1000


@dataclass(frozen=True)
class CancelRequest:
    """Cancel run ``run_id`` for ``reason``. With ``grace`` zero the run is CANCELLED
    at once (its attempt is refused at its next heartbeat or completion); otherwise a
    running body is told and stopped once ``grace`` has passed. Raises
    ``InvalidArgument`` naming the field for a grace outside 0 .. ``MAX_CANCEL_GRACE``
    or a reason too long."""

    run_id: str
    reason: str = DEFAULT_CANCEL_REASON
    grace: timedelta = timedelta(0)

    def __post_init__(self) -> None:
        require_run_id(self.run_id)
        if self.grace < timedelta(0):
            raise InvalidArgument(
                "grace", "must not be negative; use 0 to cancel at once, or e.g. 30s"
            )
        if self.grace > MAX_CANCEL_GRACE:
            raise InvalidArgument(
                "grace",
                f"must be at most {_fmt(MAX_CANCEL_GRACE)}; a job that needs longer to "
                "stop is ended by its duration limit",
            )
        if len(self.reason) > MAX_CANCEL_REASON:
            raise InvalidArgument("reason", f"must be at most {MAX_CANCEL_REASON} characters")
        if not self.reason:
            object.__setattr__(self, "reason", DEFAULT_CANCEL_REASON)


def _fmt(d: timedelta) -> str:
    seconds = d.total_seconds()
    return f"{seconds / 3600:g}h" if seconds >= 3600 else f"{seconds:g}s"
