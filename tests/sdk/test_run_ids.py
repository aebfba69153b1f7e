"""An empty run id gets the SDK's answer before any call: the same one every store
RPC gives (INVALID_ARGUMENT, ``run_id: required``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

import cronwave


def test_an_empty_run_id_is_refused_alike_by_every_sdk_call_before_it_is_sent():
    # Given a client whose store does not answer (nothing listens on port 1)
    with cronwave.Client(store_addr="127.0.0.1:1", timeout=timedelta(seconds=1)) as client:
        calls = {
            "get_run": client.get_run,
            "run_events": client.run_events,
            "cancel_run": client.cancel_run,
        }

        # When each is asked about an empty run id
        refusals = {}
        for name, call in calls.items():
            with pytest.raises(cronwave.CronwaveError) as caught:
                call("")
            refusals[name] = caught.value

    # Then each refuses it the same way, naming the field, without calling the store
    assert {name: type(err) for name, err in refusals.items()} == dict.fromkeys(
        calls, cronwave.InvalidArgument
    )
    assert {name: err.message for name, err in refusals.items()} == dict.fromkeys(
        calls, "run_id: required"
    )
