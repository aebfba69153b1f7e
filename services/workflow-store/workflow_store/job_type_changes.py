"""Who may change a registered job type.

A job type's policy decides where its runs go and how they are treated: its queue
(the pool whose workers take them), its limits, its retry policy, and ``financial``
(no retry of an effect that moves money). RegisterJobType is a worker's call, so a
worker's certificate, which a compromised pod leaks, could otherwise move
``billing.nightly`` to a queue nobody reads with ``financial`` off. So a worker
registers new job types and re-registers identical ones (every worker start), and a
change to an existing one's policy needs an admin: RegisterJobType called with an
admin's key or certificate (an insecure suite authenticates nobody, so anyone). A
worker started with a changed definition refuses to start, naming the field, until
an admin has registered the change.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

from cronwave_core.errors import PermissionDenied
from cronwave_core.security.identity import Identity
from workflow_store.records import JobTypeRecord


def changed_fields(old: JobTypeRecord, new: JobTypeRecord) -> list[tuple[str, Any, Any]]:
    """The policy fields that differ, as RegisterJobType names them
    (``job_type.queue``, ``job_type.retry.maximum_attempts``), with both values."""
    changed: list[tuple[str, Any, Any]] = []
    for f in fields(JobTypeRecord):
        before, after = getattr(old, f.name), getattr(new, f.name)
        if is_dataclass(before):
            changed += [
                (f"job_type.{f.name}.{g.name}", getattr(before, g.name), getattr(after, g.name))
                for g in fields(before)
                if getattr(before, g.name) != getattr(after, g.name)
            ]
        elif before != after:
            changed.append((f"job_type.{f.name}", before, after))
    return changed


def may_change(caller: Identity | None) -> bool:
    """Whether ``caller`` may change a registered job type's policy: anyone but a
    service (the rules let only admins and workers call RegisterJobType); None is a
    call made in this process, not over the wire."""
    return caller is None or caller.kind != "service"


def check_change(old: JobTypeRecord, new: JobTypeRecord, caller: Identity | None) -> None:
    """Raise ``PermissionDenied``, naming the first field changed, when ``new`` would
    change ``old``'s policy and ``caller`` may not."""
    changed = changed_fields(old, new)
    if not changed or may_change(caller):
        return
    field, before, after = changed[0]
    others = [name for name, _, _ in changed[1:]]
    also = f" (and {', '.join(others)})" if others else ""
    raise PermissionDenied(
        f"{field}: job type '{old.name}' is registered with {_shown(before)}, not "
        f"{_shown(after)}{also}; {caller} registers new job types and re-registers "
        "identical ones, but a change to an existing one's queue, limits, retry, "
        "priority or financial flag needs an admin: register it with an admin's key or "
        "certificate (RegisterJobType), then start the workers that carry it"
    )


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)
