"""How far a run got, as its page shows it: the progress its job reported
(``JobContext.progress``: done of total units, a bar when the total is known) and
every field of its checkpoint (what the job saved to resume from, which says where,
not how far: the console reads no meaning into its fields)."""

from __future__ import annotations

import json


def checkpoint_fields(checkpoint_json: str) -> tuple[tuple[str, str], ...]:
    """Each field of the checkpoint, its value as JSON text (a string as itself);
    none when the run saved no checkpoint, or one that is not a JSON object."""
    try:
        data = json.loads(checkpoint_json) if checkpoint_json else None
    except ValueError:
        return ()
    if not isinstance(data, dict):
        return ()
    return tuple((str(k), v if isinstance(v, str) else json.dumps(v)) for k, v in data.items())
