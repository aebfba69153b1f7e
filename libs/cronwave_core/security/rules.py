"""Who may call what: one explicit rule per RPC, and no rule means no call.

A rule names the services that may call the method (by the service name in their
certificate) and the least role a person or program needs (``viewer`` <
``operator`` < ``admin``; None: no user at all). ``docs/operations/security.md`` (*Rules*)
shows this table; ``tests/security/test_rules.py`` fails when a method of any
served service has no rule here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cronwave_core.errors import PermissionDenied
from cronwave_core.security.identity import ROLES, SERVICE_IDENTITIES, Identity

STORE = "cronwave.v1.WorkflowStoreService"
DISPATCHER = "cronwave.v1.DispatcherService"
PLANNER = "cronwave.v1.CronPlannerService"
LEADER = "cronwave.v1.LeaderElectionService"
WORKER = "cronwave.v1.WorkerService"
GATEWAY = "cronwave.v1.PaymentGatewayService"
KEYS = "cronwave.v1.ApiKeyService"
HEALTH = "grpc.health.v1.Health"
REFLECTION = "grpc.reflection.v1alpha.ServerReflection"

#: Every cronwave service (for reads any of them may make).
ALL_SERVICES = frozenset(SERVICE_IDENTITIES)


@dataclass(frozen=True)
class Rule:
    """``services``: the service identities allowed; ``role``: the least user role
    allowed (None: no user); ``anyone``: any authenticated caller (health)."""

    services: frozenset[str] = frozenset()
    role: str | None = None
    anyone: bool = False

    def allows(self, identity: Identity) -> bool:
        if identity.kind == "insecure" or self.anyone:
            return True
        if identity.kind == "service":
            return identity.name in self.services
        if identity.kind == "user" and self.role is not None and identity.role in ROLES:
            return ROLES.index(identity.role) >= ROLES.index(self.role)
        return False

    def describe(self) -> str:
        """``role operator, or service cron-planner`` (what a refusal says is missing)."""
        if self.anyone:
            return "any authenticated caller"
        parts = [f"role {self.role}"] if self.role else []
        if self.services:
            names = ", ".join(sorted(self.services))
            parts.append(f"service {names}" if len(self.services) == 1 else f"one of {names}")
        return " or ".join(parts) or "nobody"


def _rule(*services: str, role: str | None = None) -> Rule:
    unknown = set(services) - ALL_SERVICES
    assert not unknown, f"unknown services in a rule: {unknown}"
    return Rule(frozenset(services), role)


_VIEW = "viewer"
_OPERATE = "operator"
_ADMIN = "admin"
_READERS = tuple(sorted(ALL_SERVICES))

RULES: Mapping[str, Rule] = {
    # workflow-store: schedules
    f"/{STORE}/CreateSchedule": _rule(role=_ADMIN),
    f"/{STORE}/GetSchedule": _rule(*_READERS, role=_VIEW),
    f"/{STORE}/UpdateSchedule": _rule(role=_ADMIN),
    f"/{STORE}/ListSchedules": _rule(*_READERS, role=_VIEW),
    f"/{STORE}/PauseSchedule": _rule(role=_OPERATE),
    f"/{STORE}/ResumeSchedule": _rule(role=_OPERATE),
    f"/{STORE}/DeleteSchedule": _rule(role=_ADMIN),
    f"/{STORE}/WatchSchedules": _rule("cron-planner", "console", role=_VIEW),
    f"/{STORE}/RegisterJobType": _rule("worker", role=_ADMIN),
    f"/{STORE}/ListJobTypes": _rule(*_READERS, role=_VIEW),
    # workflow-store: runs, written by the hop that owns each step
    f"/{STORE}/RecordRuns": _rule("dispatcher"),
    f"/{STORE}/GetRuns": _rule(*_READERS, role=_VIEW),
    f"/{STORE}/ListRuns": _rule(*_READERS, role=_VIEW),
    f"/{STORE}/ListRecentRuns": _rule("console", role=_VIEW),
    f"/{STORE}/ListRunEvents": _rule(*_READERS, role=_VIEW),
    f"/{STORE}/AppendRunEvents": _rule("worker", "dispatcher"),
    f"/{STORE}/ClaimRuns": _rule("worker"),
    f"/{STORE}/Heartbeat": _rule("worker"),
    f"/{STORE}/Heartbeats": _rule("worker"),
    f"/{STORE}/CompleteRuns": _rule("worker"),
    f"/{STORE}/ReleaseRun": _rule("worker"),
    f"/{STORE}/CancelRun": _rule("cron-planner", role=_OPERATE),
    f"/{STORE}/DeadLetterRun": _rule("worker"),
    f"/{STORE}/ListDeadLetters": _rule("console", role=_VIEW),
    f"/{STORE}/ReplayDeadLetter": _rule(role=_OPERATE),
    f"/{STORE}/ListAuditEvents": _rule("console", role=_VIEW),
    f"/{STORE}/ListDeadlineBreaches": _rule("console", role=_VIEW),
    # workflow-store: fencing and the planner's bookkeeping
    f"/{STORE}/GetFencingToken": _rule("leader-election", "cron-planner", role=_VIEW),
    f"/{STORE}/IssueFencingToken": _rule("leader-election"),
    f"/{STORE}/LatestFireTimes": _rule("cron-planner", "console", role=_VIEW),
    f"/{STORE}/RecordMissedSlots": _rule("cron-planner"),
    f"/{STORE}/ListPendingFires": _rule("cron-planner", "dispatcher"),
    f"/{STORE}/RequeueStalledRuns": _rule("dispatcher"),
    f"/{STORE}/RequeueLostRuns": _rule("dispatcher"),
    # workflow-store: API keys (admins), checked by every service
    f"/{KEYS}/CreateApiKey": _rule(role=_ADMIN),
    f"/{KEYS}/ListApiKeys": _rule(role=_ADMIN),
    f"/{KEYS}/RevokeApiKey": _rule(role=_ADMIN),
    f"/{KEYS}/AuthenticateApiKey": _rule(*_READERS),
    # dispatcher: only a planner starts scheduled fires; a person triggers
    f"/{DISPATCHER}/StartRuns": _rule("cron-planner"),
    f"/{DISPATCHER}/TriggerRun": _rule(role=_OPERATE),
    # cron-planner
    f"/{PLANNER}/GetPlannerStatus": _rule("console", role=_VIEW),
    f"/{PLANNER}/PreviewFireTimes": _rule("console", role=_VIEW),
    f"/{PLANNER}/Backfill": _rule(role=_OPERATE),
    # leader-election: only planners campaign; who leads is a read (`cronwave leader`)
    f"/{LEADER}/Campaign": _rule("cron-planner"),
    f"/{LEADER}/Renew": _rule("cron-planner"),
    f"/{LEADER}/Resign": _rule("cron-planner"),
    f"/{LEADER}/SyncShards": _rule("cron-planner"),
    f"/{LEADER}/Observe": _rule("cron-planner", "console", role=_VIEW),
    # a worker's status
    f"/{WORKER}/GetWorkerStatus": _rule("console", role=_VIEW),
    # the billing example's payment gateway: only the worker's jobs charge
    f"/{GATEWAY}/Charge": _rule("worker"),
    f"/{GATEWAY}/ChargeMany": _rule("worker"),
    f"/{GATEWAY}/ListCharges": _rule(role=_VIEW),
    f"/{GATEWAY}/CountCharges": _rule(role=_VIEW),
    f"/{GATEWAY}/SetFaults": _rule(role=_ADMIN),
    # every server's health (probes, `cronwave up` waiting) and reflection
    f"/{HEALTH}/Check": Rule(anyone=True),
    f"/{HEALTH}/Watch": Rule(anyone=True),
    f"/{HEALTH}/List": Rule(anyone=True),
    f"/{REFLECTION}/ServerReflectionInfo": _rule(*_READERS, role=_VIEW),
}


def check(method: str, identity: Identity, rules: Mapping[str, Rule] = RULES) -> None:
    """Raise ``PermissionDenied`` unless ``rules`` let ``identity`` call ``method``
    (a method with no rule: nobody may)."""
    rule = rules.get(method)
    if rule is None:
        raise PermissionDenied(
            f"{method} has no authorisation rule, so it is refused to everyone "
            f"(called by {identity})"
        )
    if not rule.allows(identity):
        raise PermissionDenied(f"{identity} may not call {method}: it needs {rule.describe()}")
