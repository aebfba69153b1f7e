"""The run recorded in ``data/``: one trace across the five services, as Jaeger's
``/api/traces`` (Jaeger JSON) and Jaeger v2's ``/api/v3/traces`` (OTLP JSON under
``result``) answer it, and the figures its spans must give (worked out by hand
from the span times, in microseconds from the fire time 2025-03-01T02:00:00Z)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
LEGACY = DATA / "jaeger_legacy_traces.json"
V3 = DATA / "jaeger_v3_traces.json"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
RUN_ID = "run-fixture-1"
SPANS = 15

US = 1000
# dispatch: client StartRun [0, 3900] minus the nested CreateRun call [800, 3300];
# network = 3900 - 3500 (server); cache 500, queue 300, app what is left.
HOP_NS = {
    "plan": 600 * US,
    "dispatch": 1400 * US,
    "persist": 2500 * US,
    "pickup": 6000 * US,
    "execute": 10000 * US,
    "complete": 2000 * US,
}
KIND_NS = {
    ("plan", "app"): 600 * US,
    ("dispatch", "network"): 400 * US,
    ("dispatch", "cache"): 500 * US,
    ("dispatch", "queue"): 300 * US,
    ("dispatch", "app"): 200 * US,
    ("persist", "network"): 400 * US,
    ("persist", "database"): 1800 * US,
    ("persist", "app"): 300 * US,
    ("pickup", "queue"): 6000 * US,
    ("pickup", "app"): 0,
    ("execute", "database"): 3000 * US,
    ("execute", "app"): 7000 * US,
    ("complete", "network"): 400 * US,
    ("complete", "database"): 1400 * US,
    ("complete", "app"): 200 * US,
}
END_TO_END_NS = 21800 * US
LATENESS_NS = 9700 * US


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
