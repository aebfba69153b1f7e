"""A run's progress, from its checkpoint (what the job last saved, ``Checkpoint``).

The checkpoint is the job's own JSON object; the console shows every field, and a
bar where it can tell done from total. The billing job saves ``customers``,
``invoices`` and ``charged`` (and its ``phase``): the bar is charges over invoices
(customers while invoicing), so the page shows customers charged so far.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Progress:
    fields: tuple[tuple[str, str], ...]
    done: int | None = None
    total: int | None = None
    what: str = ""

    @property
    def percent(self) -> int | None:
        if self.done is None or not self.total:
            return None
        return max(0, min(100, round(100 * self.done / self.total)))


def _count(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def progress_of(checkpoint_json: str) -> Progress | None:
    """``None`` when the run saved no checkpoint (or one that is not a JSON object)."""
    try:
        data = json.loads(checkpoint_json) if checkpoint_json else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not data:
        return None
    fields = tuple(
        (str(k), json.dumps(v) if not isinstance(v, str) else v) for k, v in data.items()
    )
    charged, invoices = _count(data, "charged"), _count(data, "invoices")
    customers = _count(data, "customers")
    if charged is not None and data.get("phase") != "invoices" and invoices:
        return Progress(fields, charged, invoices, "customers charged")
    if customers is not None and invoices is not None:
        return Progress(fields, invoices, customers or None, "customers invoiced")
    return Progress(fields)
