"""The refusal of a schedule that names a job type no worker has registered, and what
to do about it."""

from __future__ import annotations

from collections.abc import Iterable

from cronwave_core.errors import InvalidArgument

#: How a job type gets registered: a worker registers the job types it runs when it
#: starts (docs/jobs.md).
HOW_TO_REGISTER = (
    "a worker registers the job types it runs when it starts: decorate the job "
    "function with @cronwave.job(NAME, duration_limit=...) in a module and start the "
    "worker with `cronwave worker --jobs MODULE` (or CRONWAVE_JOB_MODULES=MODULE), or "
    "install a package with an entry point in the group `cronwave.jobs` naming the module"
)


def unknown_job_type(name: str, registered: Iterable[str] | None = None) -> InvalidArgument:
    """``job_type``: ``name`` is not registered (``registered``: the names that are,
    when known); the message says how to register it."""
    if not name:
        return InvalidArgument("job_type", "required; name the job type the run executes")
    known = ""
    if registered is not None:
        names = sorted(registered)
        known = f"; registered: {', '.join(names) if names else 'none'}"
    return InvalidArgument("job_type", f"unknown job type '{name}'{known}; {HOW_TO_REGISTER}")
