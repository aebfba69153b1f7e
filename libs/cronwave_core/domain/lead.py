"""How far ahead of its fire time the planner acts on a slot: the dispatch lead
(``CRONWAVE_DISPATCH_LEAD``), and more for a crowded instant, so that the runs of the
top of the hour are recorded, queued and claimed at the rate the pipeline keeps
rather than all in the lead's last seconds."""

from __future__ import annotations

from datetime import timedelta

#: The runs a second the pipeline records, queues and claims ahead on a small machine
#: (2 cores: 300-500): a crowded instant's lead is its slots over this.
CROWD_RATE = 400
#: A crowded instant's lead is at most this: a worker puts back a run message that
#: arrives more than 30 s before its fire time (``worker.runtime.EARLY_LIMIT``).
MAX_LEAD = timedelta(seconds=25)


def crowd_lead(count: int, lead: timedelta) -> timedelta:
    """The lead of an instant with ``count`` slots due: ``count / CROWD_RATE`` whole
    seconds when that is more than ``lead``, at most ``MAX_LEAD`` (never less than
    ``lead``). The planner grows an instant's lead towards it in steps, as its slots
    arrive."""
    return max(lead, min(MAX_LEAD, timedelta(seconds=count // CROWD_RATE)))
