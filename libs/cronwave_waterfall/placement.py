"""Where each span belongs: its run, its hop and its kind of time.

The rules, applied per trace with parents before children:

Run. A span's run is its ``cronwave.run_id``; a span without one takes its nearest
ancestor's run, else the run of its trace when the trace's spans name exactly one
run. A span with no run (a trace naming several runs, none above it) is left out.

Hop. A span's hop is its ``cronwave.hop``. Without one:
- a ``SERVER`` span (an auto-instrumented RPC handler) takes the hop of its
  closest descendants that carry one (breadth first; the earliest-starting one
  on the first level that has any);
- a ``CLIENT`` span with a matching ``SERVER`` child takes that server's hop, so
  an RPC's network time belongs to the hop it calls into (reaching the store is
  part of ``persist``);
- otherwise, and when the above finds nothing, the hop of its parent.
A span with no hop at all still counts for its run's extent but for no hop; so does a
span whose hop is the run's (``cronwave.hop=run``: the run span, an attempt, and a
run held until its fire time, waiting on purpose, before the instant, so not latency
of any hop), and one marked ``cronwave.hold`` (older spans of a hold say only that).

Kind. A span's kind of time is its ``cronwave.kind``. Without one, a span with
``db.system`` (SQL instrumentation) is ``database``. A ``CLIENT`` span with a
matching ``SERVER`` child (same ``rpc.service`` and ``rpc.method`` when both
spans say), whose kind is ``network`` or unsaid, is an RPC whose ``network`` time is
derived: the client's duration minus the server's, never negative. A client span
directly inside an explicit ``network`` span of the same hop is not derived: that call
is already measured.
Any other span has no kind: it is wall time of its hop, which ends up as ``app``.

Nesting. A span is nested in its parent when it lies within the parent's
interval (a synchronous call); a span that outlives its parent is a follow-up (a
queued message's consumer), nested in nothing. ``outer_hops`` is the set of hops
of the spans a span is nested in, transitively; a hop's own time excludes the
time of other hops' spans nested in it (see ``runs``), and nothing else: time a
follow-up overlaps is concurrent, and belongs to both.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from cronwave_core.telemetry.vocabulary import (
    ATTR_HOLD,
    ATTR_HOP,
    ATTR_KIND,
    ATTR_RUN_ID,
    RUN_HOP,
)
from cronwave_waterfall.span import Span

NETWORK = "network"
DATABASE = "database"


@dataclass(frozen=True, slots=True)
class Placed:
    """A span with its run, hop and kind resolved.

    ``derived_network_ns`` is set on an RPC client span whose network time was
    derived (client minus server duration); its ``kind`` is then ``network``.
    """

    span: Span
    run_id: str
    hop: str | None
    kind: str | None
    derived_network_ns: int | None
    outer_hops: frozenset[str]


_NO_HOPS: frozenset[str] = frozenset()


def place(spans: Iterable[Span]) -> list[Placed]:
    """Every span that belongs to a run, placed (see the module rules)."""
    by_trace: dict[str, list[Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    placed: list[Placed] = []
    for members in by_trace.values():
        placed.extend(_place_trace(members))
    return placed


def _text(value: object) -> str | None:
    if value is None or value == "":
        return None
    return str(value)


def _rpc_matches(client: Span, server: Span) -> bool:
    for key in ("rpc.service", "rpc.method"):
        a, b = client.attributes.get(key), server.attributes.get(key)
        if a is not None and b is not None and a != b:
            return False
    return True


def _place_trace(spans: list[Span]) -> list[Placed]:
    by_id = {s.span_id: s for s in spans}
    members = list(by_id.values())  # a span read twice (two sources) counts once
    children: dict[str, list[Span]] = {}
    roots: list[Span] = []
    explicit_run: dict[str, str | None] = {}
    explicit_hop: dict[str, str | None] = {}
    runs_own: set[str] = set()
    for s in members:
        attrs = s.attributes
        explicit_run[s.span_id] = _text(attrs.get(ATTR_RUN_ID))
        hop = _text(attrs.get(ATTR_HOP))
        if hop == RUN_HOP or (hop is None and attrs.get(ATTR_HOLD)):
            runs_own.add(s.span_id)  # the run's own (its span, an attempt, a hold)
            hop = None
        explicit_hop[s.span_id] = hop
        if s.parent_span_id and s.parent_span_id in by_id and s.parent_span_id != s.span_id:
            children.setdefault(s.parent_span_id, []).append(s)
        else:
            roots.append(s)
    order = _parents_first(roots, children, members)

    run_ids = {r for r in explicit_run.values() if r}
    trace_run = next(iter(run_ids)) if len(run_ids) == 1 else None

    server_child: dict[str, Span] = {}
    for s in members:
        if s.span_kind == "CLIENT":
            for c in children.get(s.span_id, ()):
                if c.span_kind == "SERVER" and _rpc_matches(s, c):
                    server_child[s.span_id] = c
                    break
    below: dict[str, str | None] = {}

    def hop_below(server: Span) -> str | None:
        if server.span_id not in below:
            below[server.span_id] = _hop_below(server, children, explicit_hop)
        return below[server.span_id]

    run_of: dict[str, str | None] = {}
    hop_of: dict[str, str | None] = {}
    outer_of: dict[str, frozenset[str]] = {}
    kind_of: dict[str, str | None] = {}
    out: list[Placed] = []
    for s in order:
        sid = s.span_id
        pid = s.parent_span_id
        parent = by_id[pid] if pid in run_of else None

        run = explicit_run[sid]
        if run is None:
            run = (run_of[pid] if parent is not None else None) or trace_run
        run_of[sid] = run

        hop = explicit_hop[sid]
        if sid in runs_own:
            pass  # no hop's time: the run's span, an attempt, a hold before the instant
        elif hop is None:
            if s.span_kind == "SERVER":
                hop = hop_below(s)
            elif sid in server_child:
                callee = server_child[sid]
                hop = explicit_hop[callee.span_id] or hop_below(callee)
            if hop is None and parent is not None:
                hop = hop_of[pid]
        hop_of[sid] = hop

        if parent is None or s.start_ns < parent.start_ns or s.end_ns > parent.end_ns:
            outer = _NO_HOPS  # a root, or a follow-up that outlives its parent
        else:
            outer = outer_of[pid]
            parent_hop = hop_of[pid]
            if parent_hop is not None and parent_hop not in outer:
                outer = outer | {parent_hop}
        outer_of[sid] = outer

        kind = _text(s.attributes.get(ATTR_KIND))
        network: int | None = None
        if kind is None and "db.system" in s.attributes:
            kind = DATABASE
        elif (
            (kind is None or kind == NETWORK)
            and sid in server_child
            and not (parent is not None and kind_of[pid] == NETWORK and hop_of[pid] == hop)
        ):
            kind = NETWORK
            network = max(0, s.duration_ns - server_child[sid].duration_ns)
        kind_of[sid] = kind

        if run is not None:
            out.append(Placed(s, run, hop, kind, network, outer))
    return out


def _parents_first(
    roots: list[Span], children: dict[str, list[Span]], members: list[Span]
) -> list[Span]:
    order: list[Span] = []
    seen: set[str] = set()
    queue = deque(roots)
    while True:
        while queue:
            s = queue.popleft()
            if s.span_id in seen:
                continue
            seen.add(s.span_id)
            order.append(s)
            queue.extend(children.get(s.span_id, ()))
        if len(seen) >= len(members):
            return order
        # A parent cycle (malformed input): start again from an unvisited span.
        queue.extend(s for s in members if s.span_id not in seen)


def _hop_below(
    span: Span, children: dict[str, list[Span]], explicit_hop: dict[str, str | None]
) -> str | None:
    """The hop of the closest descendants that carry one, breadth first; on the
    first level that has any, the earliest-starting span's."""
    level = children.get(span.span_id, [])
    seen = {span.span_id}
    while level:
        named = [s for s in level if explicit_hop[s.span_id]]
        if named:
            first = min(named, key=lambda s: (s.start_ns, s.span_id))
            return explicit_hop[first.span_id]
        next_level: list[Span] = []
        for s in level:
            if s.span_id not in seen:
                seen.add(s.span_id)
                next_level.extend(children.get(s.span_id, ()))
        level = next_level
    return None
