"""The cyclic garbage collector of a long-running service process.

CPython looks for reference cycles among its youngest objects every 700 net
allocations of container objects, and now and then walks the whole heap. A service's
heap is mostly what it imported and built while starting (gRPC, protobuf descriptors,
OpenTelemetry, SQLAlchemy): objects that live as long as the process and that every
full collection walks again. At a crowded instant a worker also holds thousands of runs,
each with its attempt, spans, lease and thread; a collection triggered every 700
allocations then walks them over and over: ``perf`` put 35% of a worker's CPU in
``gc_collect_main`` while it set up a 10,000-run instant.

``settle()``, called once a service has started: one collection, then every object
alive moves to the permanent generation (``gc.freeze``), never walked again, and the
youngest generation is collected every ``YOUNG_THRESHOLD`` allocations. Cycles are still
collected, later; the objects of a run are freed by reference counting the moment it
ends, as before.
"""

from __future__ import annotations

import gc

#: Net allocations of container objects between collections of the youngest generation
#: (CPython's default: 700).
YOUNG_THRESHOLD = 50_000
#: Collections of a generation between collections of the next (default: 10).
OLDER_THRESHOLD = 10


def freeze_alive() -> None:
    """Collect once, then move every object alive to the permanent generation."""
    gc.collect()
    gc.freeze()


def settle() -> None:
    """After start-up: freeze what is alive, and collect less often."""
    freeze_alive()
    gc.set_threshold(YOUNG_THRESHOLD, OLDER_THRESHOLD, OLDER_THRESHOLD)
