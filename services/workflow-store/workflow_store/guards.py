"""What the store checks of a caller's word beyond the RPC rules, so that a service's
stolen certificate does its hop's work and nothing more.

The rules (``cronwave_core.security.rules``) say which service may call a method; they
cannot say whether what it asks for is what its hop would ask. A planner's certificate
may record MISSED slots, but only slots its schedule's calendar has and that are due:
were a future slot accepted, a caller could mark the next fire times missed and none
would run. ``missed_slot_ahead`` is how far past the store's clock a slot may lie: a
planner records a slot only once it is due on its own clock, so this covers the skew
between their clocks and nothing more. A placeholder (reason ``pending:``, work a
planner decided and will start) does not stop its slot's run, since starting the slot
turns it into the run; it may lie ``placeholder_ahead`` past the clock, so that a fire
decided ahead of its instant and then put off stands in the store at once.

Fencing tokens exist for a closed, configured set of lease scopes
(``CRONWAVE_LEASE_SCOPES``): were any scope issued a token on request, leader-election's
certificate could have one issued for a scope of its own making, and a planner's
certificate could start runs under it, outside the planners' fence.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from cronwave_core.domain.runs import CLOCK_SKEW, PLACEHOLDER_AHEAD
from cronwave_core.settings import PLANNER_SCOPE


@dataclass(frozen=True)
class Guards:
    """``missed_slot_ahead``: a slot recorded MISSED may lie at most this far past the
    store's clock (``CLOCK_SKEW``; tests whose planner runs on a simulated
    calendar raise it with ``CRONWAVE_MISSED_SLOTS_AHEAD``). ``lease_scopes``: the
    scopes fencing tokens are issued for and accepted in. ``placeholder_ahead``: how
    far past the store's clock a placeholder may lie (``PLACEHOLDER_AHEAD`` and the
    skew)."""

    missed_slot_ahead: timedelta = CLOCK_SKEW
    placeholder_ahead: timedelta = PLACEHOLDER_AHEAD + CLOCK_SKEW
    lease_scopes: frozenset[str] = frozenset({PLANNER_SCOPE})

    def __post_init__(self) -> None:
        if self.missed_slot_ahead < timedelta(0) or self.placeholder_ahead < timedelta(0):
            raise ValueError(f"Guards' slot bounds must not be negative, got {self}")


GUARDS = Guards()
