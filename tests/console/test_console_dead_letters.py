"""Dead letters in the console: listed with their reason, replayed by an operator."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc
from playwright.sync_api import Page, expect

from cronwave import Client
from cronwave_core.convert import td_to_duration
from cronwave_core.rpc import open_channel
from cronwave_core.suite import Suite
from tests.console.conftest import Key, csrf_of, sign_in
from tests.helpers import eventually, fresh

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def suite(shared_console_suite: Suite) -> Suite:
    """One console suite for this module: its tests change only what they made."""
    return shared_console_suite


def ghost_job_type(suite: Suite) -> str:
    """A job type the store knows and no worker runs: its runs are dead-lettered."""
    name = fresh("drill.ghost")
    with open_channel(suite.store_addr, timedelta(seconds=10), traced=False) as channel:
        store_grpc.WorkflowStoreServiceStub(channel).RegisterJobType(
            store_pb.RegisterJobTypeRequest(
                job_type=common_pb2.JobType(
                    name=name, duration_limit=td_to_duration(timedelta(minutes=1)), queue="default"
                )
            ),
            timeout=10,
        )
    return name


def test_a_dead_letter_is_listed_and_replayed_from_the_console(
    suite: Suite, client: Client, page: Page, operator: Key
) -> None:
    # Given a run that was dead-lettered: no worker runs its job type
    schedule_id = fresh("console-dlq")
    client.create_schedule(schedule_id, cron="0 2 * * *", job_type=ghost_job_type(suite))
    run_id = client.trigger(schedule_id).run_id
    eventually(
        lambda: client.get_run(run_id).state == "DEAD_LETTERED", timeout=30, what="dead-lettered"
    )

    # When an operator signs in, opens the dead letters and replays it
    sign_in(page, suite.console_url, operator.token)
    page.goto(f"{suite.console_url}dead-letters")
    row = page.locator("#dead-letters tr", has_text=run_id)
    expect(row).to_contain_text("unknown_job_type")
    row.get_by_role("button", name="Replay").click()

    # Then they land on the run's page, and the store has the run replayed
    expect(page.locator("h1")).to_have_text(f"Run {run_id}")
    assert "replayed" in [e.kind for e in client.run_events(run_id)]
    expect(page.locator("#events")).to_contain_text("replayed")


def test_replaying_a_run_that_is_not_dead_lettered_says_why(
    suite: Suite, client: Client, page: Page, operator: Key
) -> None:
    # Given a run that succeeded, and the page token of a signed-in operator's browser
    schedule_id = fresh("console-ok")
    client.create_schedule(schedule_id, cron="0 2 * * *", job_type="cronwave.noop")
    run = client.wait_run(client.trigger(schedule_id).run_id, timeout=timedelta(seconds=30))
    sign_in(page, suite.console_url, operator.token)
    page.goto(f"{suite.console_url}schedules/{schedule_id}")
    token = csrf_of(page)
    # When a replay of it is posted
    response = page.request.post(
        f"{suite.console_url}dead-letters/{run.run_id}/replay", form={"csrf_token": token}
    )
    # Then the console answers with the store's reason, and the run is unchanged
    assert response.status == 409, response.text()
    assert "Not done" in response.text()
    assert client.get_run(run.run_id).state == "SUCCEEDED"
