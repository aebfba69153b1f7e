"""Messages the broker itself rejects go to the store's dead-letter list too."""

from __future__ import annotations

import json
import logging
from typing import Any

import dramatiq
import grpc
from dramatiq.common import q_name

from worker.middleware.dead_lettering import DeadLettering
from worker.store_port import TRANSIENT
from worker.supervisor import describe

log = logging.getLogger("cronwave.worker")


class DeadLetterRejected(dramatiq.Middleware):
    """Reports every message this worker rejects (nacks) as a dead letter with reason
    "rejected": a message for an actor this worker does not have, or one whose
    processing raised past our own handling. The message is listed as it arrived,
    naming its run; the run itself is left as it is (only the attempt holding a run
    dead-letters it), so a PENDING one is sent again by the sweeper. dramatiq keeps its
    own copy on the queue's ``.XQ`` list."""

    def __init__(self, dead_letters: DeadLettering) -> None:
        self.dead_letters = dead_letters

    def before_nack(self, broker: dramatiq.Broker, message: Any) -> None:
        kwargs = message.kwargs if isinstance(message.kwargs, dict) else {}
        run_id = kwargs.get("run_id")
        exc = getattr(message, "_exception", None)
        if isinstance(exc, grpc.RpcError) and exc.code() in TRANSIENT:
            # The store was unreachable: nothing is wrong with the message. The run
            # stays PENDING (or WAITING, RUNNING) and the sweeper sends it again.
            log.warning("run %r: message dropped while the store is unreachable", run_id)
            return
        error = describe(exc) if exc is not None else "rejected by the broker"
        text = json.dumps(
            {"actor_name": message.actor_name, "args": list(message.args), "kwargs": kwargs},
            default=repr,
        )[:10_000]
        self.dead_letters.dead_letter(
            run_id if isinstance(run_id, str) else "",
            "",
            "rejected",
            error,
            queue=q_name(message.queue_name),
            message_json=text,
        )
