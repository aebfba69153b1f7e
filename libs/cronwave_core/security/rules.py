"""Who may call what: one explicit rule per RPC, and no rule means no call.

A rule names the services that may call the method (by the service name in their
certificate) and the least role a person or program needs (``viewer`` <
``operator`` < ``admin``; None: no user at all). ``docs/operations/security.md`` (*Rules*)
shows this table; ``tests/security/test_rules.py`` fails when a method of any
served service has no rule here. An installed package adds the rules of its own
servers' RPCs (``cronwave_core.extensions``): ``rule_table()`` is both.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from cronwave_core import extensions
from cronwave_core.errors import ConfigurationError, PermissionDenied
from cronwave_core.security.identity import ROLES, Identity, service_identities

STORE = "cronwave.v1.WorkflowStoreService"
DISPATCHER = "cronwave.v1.DispatcherService"
PLANNER = "cronwave.v1.CronPlannerService"
LEADER = "cronwave.v1.LeaderElectionService"
WORKER = "cronwave.v1.WorkerService"
KEYS = "cronwave.v1.ApiKeyService"
HEALTH = "grpc.health.v1.Health"
REFLECTION = "grpc.reflection.v1alpha.ServerReflection"


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


def rule(*services: str, role: str | None = None) -> Rule:
    """The rule that lets ``services`` (identities) and people of at least ``role`` call
    a method; what an installed package's rules are made with."""
    return Rule(frozenset(services), role)


_VIEW = "viewer"
_OPERATE = "operator"
_ADMIN = "admin"


def _core_rules(readers: tuple[str, ...]) -> dict[str, Rule]:
    """cronwave's own RPCs; ``readers``: every service identity (for reads any of them
    may make, and the API-key check every server makes)."""
    return {
        # workflow-store: schedules
        f"/{STORE}/CreateSchedule": rule(role=_ADMIN),
        f"/{STORE}/GetSchedule": rule(*readers, role=_VIEW),
        f"/{STORE}/UpdateSchedule": rule(role=_ADMIN),
        f"/{STORE}/ListSchedules": rule(*readers, role=_VIEW),
        f"/{STORE}/PauseSchedule": rule(role=_OPERATE),
        f"/{STORE}/ResumeSchedule": rule(role=_OPERATE),
        f"/{STORE}/DeleteSchedule": rule(role=_ADMIN),
        f"/{STORE}/WatchSchedules": rule("cron-planner", "console", role=_VIEW),
        f"/{STORE}/RegisterJobType": rule("worker", role=_ADMIN),
        f"/{STORE}/ListJobTypes": rule(*readers, role=_VIEW),
        # workflow-store: runs, written by the hop that owns each step
        f"/{STORE}/RecordRuns": rule("dispatcher"),
        f"/{STORE}/GetRuns": rule(*readers, role=_VIEW),
        f"/{STORE}/ListRuns": rule(*readers, role=_VIEW),
        f"/{STORE}/ListRecentRuns": rule("console", role=_VIEW),
        f"/{STORE}/ListRunEvents": rule(*readers, role=_VIEW),
        f"/{STORE}/AppendRunEvents": rule("worker", "dispatcher"),
        f"/{STORE}/ClaimRuns": rule("worker"),
        f"/{STORE}/Heartbeat": rule("worker"),
        f"/{STORE}/Heartbeats": rule("worker"),
        f"/{STORE}/CompleteRuns": rule("worker"),
        f"/{STORE}/ReleaseRun": rule("worker"),
        f"/{STORE}/CancelRun": rule("cron-planner", role=_OPERATE),
        f"/{STORE}/DeadLetterRun": rule("worker"),
        f"/{STORE}/ListDeadLetters": rule("console", role=_VIEW),
        f"/{STORE}/ReplayDeadLetter": rule(role=_OPERATE),
        f"/{STORE}/ListAuditEvents": rule("console", role=_VIEW),
        f"/{STORE}/ListDeadlineBreaches": rule("console", role=_VIEW),
        # workflow-store: fencing and the planner's bookkeeping
        f"/{STORE}/GetFencingToken": rule("leader-election", "cron-planner", role=_VIEW),
        f"/{STORE}/IssueFencingToken": rule("leader-election"),
        f"/{STORE}/LatestFireTimes": rule("cron-planner", "console", role=_VIEW),
        f"/{STORE}/RecordMissedSlots": rule("cron-planner"),
        f"/{STORE}/ListPendingFires": rule("cron-planner", "dispatcher"),
        f"/{STORE}/RequeueStalledRuns": rule("dispatcher"),
        f"/{STORE}/RequeueLostRuns": rule("dispatcher"),
        # workflow-store: API keys (admins), checked by every service
        f"/{KEYS}/CreateApiKey": rule(role=_ADMIN),
        f"/{KEYS}/ListApiKeys": rule(role=_ADMIN),
        f"/{KEYS}/RevokeApiKey": rule(role=_ADMIN),
        f"/{KEYS}/AuthenticateApiKey": rule(*readers),
        # dispatcher: only a planner starts scheduled fires; a person triggers
        f"/{DISPATCHER}/StartRuns": rule("cron-planner"),
        f"/{DISPATCHER}/TriggerRun": rule(role=_OPERATE),
        # cron-planner
        f"/{PLANNER}/GetPlannerStatus": rule("console", role=_VIEW),
        f"/{PLANNER}/PreviewFireTimes": rule("console", role=_VIEW),
        f"/{PLANNER}/Backfill": rule(role=_OPERATE),
        # leader-election: only planners campaign; who leads is a read (`cronwave leader`)
        f"/{LEADER}/Campaign": rule("cron-planner"),
        f"/{LEADER}/Renew": rule("cron-planner"),
        f"/{LEADER}/Resign": rule("cron-planner"),
        f"/{LEADER}/SyncShards": rule("cron-planner"),
        f"/{LEADER}/Observe": rule("cron-planner", "console", role=_VIEW),
        # a worker's status
        f"/{WORKER}/GetWorkerStatus": rule("console", role=_VIEW),
        # every server's health (probes, `cronwave up` waiting) and reflection
        f"/{HEALTH}/Check": Rule(anyone=True),
        f"/{HEALTH}/Watch": Rule(anyone=True),
        f"/{HEALTH}/List": Rule(anyone=True),
        f"/{REFLECTION}/ServerReflectionInfo": rule(*readers, role=_VIEW),
    }


@functools.cache
def rule_table() -> Mapping[str, Rule]:
    """Every rule: cronwave's, then the installed packages' (``extensions``). Refused
    at start-up, naming it, when a package's rule is no ``Rule``, names an unknown
    service or takes a method that already has one."""
    identities = service_identities()
    table = _core_rules(tuple(sorted(identities)))
    for extension in extensions.installed():
        for method, given in extension.rules.items():
            if not isinstance(given, Rule) or method in table:
                raise ConfigurationError(
                    f"the rule of {method} from an installed package is "
                    f"{'a second one' if method in table else type(given).__name__}: "
                    "give each of its RPCs one cronwave_core.security.rules.Rule"
                )
            table[method] = given
    for method, given in table.items():
        unknown = given.services - set(identities)
        if unknown:
            raise ConfigurationError(f"the rule of {method} names unknown services: {unknown}")
    return table


def check(method: str, identity: Identity, rules: Mapping[str, Rule] | None = None) -> None:
    """Raise ``PermissionDenied`` unless ``rules`` (``rule_table()`` unless given) let
    ``identity`` call ``method`` (a method with no rule: nobody may)."""
    found = (rule_table() if rules is None else rules).get(method)
    if found is None:
        raise PermissionDenied(
            f"{method} has no authorisation rule, so it is refused to everyone "
            f"(called by {identity})"
        )
    if not found.allows(identity):
        raise PermissionDenied(f"{identity} may not call {method}: it needs {found.describe()}")
