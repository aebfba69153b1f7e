"""Test hooks of the worker as middleware, installed only in a worker started for tests
or drills (``CRONWAVE_TEST_HOOKS=1``) and only when ``CRONWAVE_FAULT`` names one
(``test_hooks``); a production worker's chain does not have them.

``LatencyFaults`` applies the worker's latency fault points (``cronwave_core.faults``):
``pickup:queue`` before the message is taken (the run waits longer in its queue, and
the pickup span says which fault), ``execute:app`` inside the execute span, before
the body starts. The drills are in ``worker.drills``.
"""

from __future__ import annotations

from cronwave_core.faults import FaultHooks, fault_hooks, run_key
from cronwave_core.settings import TestHooks
from cronwave_core.telemetry.vocabulary import ATTR_FAULT
from worker.chain import Delivery, RunMiddleware
from worker.drills import drill_hooks


class LatencyFaults(RunMiddleware):
    def __init__(self, faults: FaultHooks) -> None:
        self.faults = faults

    def before_pickup(self, delivery: Delivery) -> None:
        message = delivery.message
        if self.faults.inject("pickup", "queue", run_key(message.schedule_id, message.fire_time)):
            fault = self.faults.get("pickup", "queue")
            delivery.pickup_marks[ATTR_FAULT] = fault.label if fault else "pickup:queue"

    def before_execute(self, delivery: Delivery) -> None:
        key = run_key(delivery.run.schedule_id, delivery.fire_time)
        self.faults.inject("execute", "app", key, delivery.span)


def test_hooks(settings: TestHooks) -> list[RunMiddleware]:
    """The test-hook middleware ``CRONWAVE_FAULT`` names, in a worker started for tests
    (``settings.enabled``); none otherwise. A malformed value stops start-up
    (``ConfigurationError``)."""
    hooks: list[RunMiddleware] = []
    faults = fault_hooks(settings)
    if faults:
        hooks.append(LatencyFaults(faults))
    drill = drill_hooks(settings)
    if drill is not None:
        hooks.append(drill)
    return hooks
