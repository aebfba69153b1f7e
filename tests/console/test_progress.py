"""``console.progress``: a run's checkpoint, field by field, read without meaning (the
progress a page shows is the job's own report, ``Run.progress``)."""

from __future__ import annotations

import json

from console.progress import checkpoint_fields


def test_every_field_of_a_checkpoint_is_shown_as_saved() -> None:
    saved = {"phase": "charges", "charged": 50, "done": False, "ids": [1, 2]}
    assert checkpoint_fields(json.dumps(saved)) == (
        ("phase", "charges"),
        ("charged", "50"),
        ("done", "false"),
        ("ids", "[1, 2]"),
    )


def test_no_checkpoint_or_not_an_object_shows_nothing() -> None:
    assert checkpoint_fields("") == ()
    assert checkpoint_fields("[1, 2]") == ()
    assert checkpoint_fields("{}") == ()
    assert checkpoint_fields("not json") == ()
