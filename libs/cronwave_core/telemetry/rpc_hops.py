"""The hop an RPC belongs to when it is part of a run: the serialization spans of the
call are filed under it (``spans.codec_call``), while the caller's own work stays in the
caller's hop. An RPC with no hop takes the hop of the span it happens in.

The hop is not listed per RPC. Each gRPC service states a rule (``ServiceHops``), and
the rule is applied to the service's RPCs as the generated descriptors name them, so a
new RPC gets its hop from its name:

- every RPC of the leader-election service is ``leader``'s, every RPC of the
  dispatcher ``dispatch``'s;
- a store RPC that writes a run is the hop that makes the write, told by the verb its
  name starts with: ``Record…`` is ``persist``, ``Claim…`` is ``pickup``, ``Heartbeat``
  is ``execute``, ``Complete…`` is ``complete``; the store's other RPCs (reads,
  schedules, fencing, ``AppendRunEvent…``, which every hop uses for a run's history)
  have none;
- the planner and the worker serve no hop of a run, nor does an installed package's own
  server (which no rule here names: it has no hop).

A rule's ``exceptions`` name the RPCs its verbs would get wrong, and are checked
against the descriptors when the rule is made: an exception that names no RPC of the
service stops the import, naming it. ``tests/tracing/test_rpc_hops.py`` checks that
every service of ``cronwave.v1`` has a rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from cronwave_proto.v1 import (
    api_key_service_pb2,
    cron_planner_service_pb2,
    dispatcher_service_pb2,
    leader_election_service_pb2,
    worker_service_pb2,
    workflow_store_service_pb2,
)
from google.protobuf.descriptor import ServiceDescriptor

from cronwave_core.telemetry.vocabulary import Hop

_VERB = re.compile(r"[A-Z][a-z]*")


def verb(method: str) -> str:
    """The word an RPC's name starts with (``Record`` of ``RecordRuns``)."""
    found = _VERB.match(method)
    return found.group() if found else method


@dataclass(frozen=True)
class ServiceHops:
    """How the RPCs of one gRPC service map to hops: an exception first, else the hop of
    the verb the RPC's name starts with, else ``default``. ``None`` says "no hop", and
    is always said explicitly (``default`` has no default)."""

    service: ServiceDescriptor
    default: Hop | None
    verbs: Mapping[str, Hop] = field(default_factory=dict)
    exceptions: Mapping[str, Hop | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = {method.name for method in self.service.methods}
        stale = sorted(set(self.exceptions) - names)
        if stale:
            raise ValueError(
                f"hop exceptions of {self.service.full_name} name no RPC of it: "
                f"{', '.join(stale)}; remove or rename them"
            )
        unused = sorted(set(self.verbs) - {verb(name) for name in names})
        if unused:
            raise ValueError(
                f"hop verbs of {self.service.full_name} start no RPC's name: "
                f"{', '.join(unused)}; remove them"
            )

    def hop_of(self, method: str) -> Hop | None:
        """The hop of this service's RPC ``method`` (its bare name)."""
        if method in self.exceptions:
            return self.exceptions[method]
        return self.verbs.get(verb(method), self.default)

    def hops(self) -> dict[str, Hop | None]:
        """Every RPC of the service by its full path (``/package.Service/Method``)."""
        prefix = f"/{self.service.full_name}/"
        return {prefix + method.name: self.hop_of(method.name) for method in self.service.methods}


SERVICES: tuple[ServiceHops, ...] = (
    ServiceHops(
        workflow_store_service_pb2.DESCRIPTOR.services_by_name["WorkflowStoreService"],
        default=None,
        verbs={
            "Record": Hop.PERSIST,
            "Claim": Hop.PICKUP,
            "Heartbeat": Hop.EXECUTE,
            "Complete": Hop.COMPLETE,
        },
        exceptions={
            # The worker reads the runs it has just claimed.
            "GetRuns": Hop.PICKUP,
            # A run that failed its last attempt is completed as a dead letter.
            "DeadLetterRun": Hop.COMPLETE,
            # The planner records the slots it missed as part of planning (the store
            # files the call's database time under ``plan`` too).
            "RecordMissedSlots": None,
        },
    ),
    # API keys are checked for callers, not for a run.
    ServiceHops(api_key_service_pb2.DESCRIPTOR.services_by_name["ApiKeyService"], default=None),
    ServiceHops(
        dispatcher_service_pb2.DESCRIPTOR.services_by_name["DispatcherService"],
        default=Hop.DISPATCH,
    ),
    ServiceHops(
        leader_election_service_pb2.DESCRIPTOR.services_by_name["LeaderElectionService"],
        default=Hop.LEADER,
    ),
    ServiceHops(
        cron_planner_service_pb2.DESCRIPTOR.services_by_name["CronPlannerService"], default=None
    ),
    ServiceHops(worker_service_pb2.DESCRIPTOR.services_by_name["WorkerService"], default=None),
)

_RPC_HOPS: dict[str, Hop] = {
    path: hop for rule in SERVICES for path, hop in rule.hops().items() if hop is not None
}


def rpc_hop(method: str) -> Hop | None:
    """The hop of a gRPC method (``/package.Service/Method``), if it has one."""
    return _RPC_HOPS.get(method)
