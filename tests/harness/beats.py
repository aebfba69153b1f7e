"""A stand-in for whoever receives a job's heartbeats, recording what was sent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from typing import Any

from worker.supervisor import BeatResult


class Beats:
    """Receives heartbeats either way a job sends them: as the supervisor's beat
    (checkpoint JSON, ``""`` for a beat without one, answered with ``answer``, which a
    test may change mid-run) or as a ``JobContext``'s ``on_heartbeat`` (a checkpoint,
    or ``None``).

    ``sent``: the supervisor's beats as sent; ``checkpoints``: every checkpoint, either
    way, parsed; ``times``: when each heartbeat came (monotonic seconds)."""

    def __init__(self, answer: BeatResult = BeatResult.OK) -> None:
        self.answer = answer
        self.sent: list[str] = []
        self.checkpoints: list[dict[str, Any]] = []
        self.times: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, checkpoint: str | Mapping[str, Any] | None) -> BeatResult:
        with self._lock:
            self.times.append(time.monotonic())
            if isinstance(checkpoint, str):
                self.sent.append(checkpoint)
                if checkpoint:
                    self.checkpoints.append(json.loads(checkpoint))
            elif checkpoint is not None:
                self.checkpoints.append(dict(checkpoint))
        return self.answer
