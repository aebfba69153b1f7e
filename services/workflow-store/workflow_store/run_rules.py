"""Which runs RecordRuns records on whose word, beyond the rule that only the
dispatcher's certificate may call it.

- A paused schedule's fires (scheduled, catch-up, backfill) are refused: a pause
  stops firing at once, whatever a planner still believes or a stolen planner's
  certificate asks for. The planner records such a fire MISSED, reason ``paused``.
  A manual run of a paused schedule is a person's decision and is recorded.
- A manual run is recorded only on behalf of an authenticated person: the
  operator's TriggerRun, which the dispatcher relays (``cronwave-on-behalf-of``,
  taken only from a relaying service's certificate), so the audit trail names them.
  From a service's certificate alone (a StartRuns a planner's certificate dressed as
  manual, or a stolen dispatcher certificate) it is refused. What a stolen relay
  certificate still can do is name any person; docs/operations/security.md (*What each
  identity may do*) weighs it.
"""

from __future__ import annotations

from collections.abc import Sequence

from cronwave_core.domain.runs import Trigger
from cronwave_core.errors import PermissionDenied
from cronwave_core.security.identity import Identity
from workflow_store.records import RecordRequest

#: How a relayed person is named (``Identity.audit_name`` of a user).
PERSON_PREFIX = "user:"


def fires_while_paused(trigger: Trigger) -> bool:
    """Whether a run of this trigger is recorded while its schedule is paused."""
    return trigger is Trigger.MANUAL


def for_a_person(caller: Identity | None) -> bool:
    """Whether ``caller`` acts for an authenticated person: a user, a relaying
    service naming one, or anyone in an insecure suite (which authenticates nobody);
    None is a call made in this process, not over the wire."""
    if caller is None or caller.kind in ("insecure", "user"):
        return True
    return caller.on_behalf_of.startswith(PERSON_PREFIX)


def check_manual(reqs: Sequence[RecordRequest], caller: Identity | None) -> None:
    """Raise ``PermissionDenied`` naming the first manual run of ``reqs`` when
    ``caller`` records it on nobody's behalf."""
    if for_a_person(caller):
        return
    for i, req in enumerate(reqs):
        if req.trigger is Trigger.MANUAL:
            raise PermissionDenied(
                f"runs[{i}].trigger: a MANUAL run is recorded only on behalf of an "
                f"authenticated person (an operator's TriggerRun, relayed by the "
                f"dispatcher), and {caller} relays nobody"
            )
