"""Run ids sort by creation time, so "newest first" needs no extra column."""

from __future__ import annotations

import re

from workflow_store.ids import new_run_id


def test_run_ids_are_sortable_and_unique():
    ids = [new_run_id() for _ in range(2000)]

    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"run_[0-9a-hjkmnp-tv-z]{26}", i) for i in ids)
