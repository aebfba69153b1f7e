"""Signing in to the console with an API key, in a real browser against a real suite:
changes are made with the signed-in person's key and allowed by their role."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from cronwave import Client
from cronwave_core.errors import Unauthenticated
from cronwave_core.suite import Suite, free_port
from tests.console.conftest import Key, api_key, csrf_of, revoke, sign_in
from tests.harness.clients import client_for
from tests.harness.suites import SuiteFactory
from tests.helpers import eventually, fresh

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def suite(shared_console_suite: Suite) -> Suite:
    """One console suite for this module: its tests change only what they made."""
    return shared_console_suite


def nightly(client: Client) -> str:
    schedule_id = fresh("console-auth")
    client.create_schedule(schedule_id, cron="0 2 * * *", job_type="cronwave.noop")
    return schedule_id


def session_cookie(context: BrowserContext) -> dict[str, object] | None:
    found = [c for c in context.cookies() if c["name"] == "cronwave_session"]
    return dict(found[0]) if found else None


def test_an_operator_signs_in_on_any_address_and_pauses_as_themselves(
    make_suite: SuiteFactory, page: Page, context: BrowserContext
) -> None:
    # Given a console listening on every address (no longer read-only there), an
    # operator's key, and a schedule
    port = free_port()
    suite = make_suite(console=True, env={"CRONWAVE_CONSOLE_ADDR": f"0.0.0.0:{port}"})
    url = f"http://127.0.0.1:{port}/"
    olivia = api_key(suite, "operator", fresh("olivia"))
    with client_for(suite) as client:
        schedule_id = nightly(client)
        # And before signing in, the page is read-only and offers to sign in
        page.goto(f"{url}schedules/{schedule_id}")
        expect(page.locator("#sign-in")).to_have_text("sign in to make changes")
        expect(page.get_by_role("button", name="Pause")).to_have_count(0)

        # When she signs in with her key and pauses the schedule
        sign_in(page, url, olivia.token)
        page.goto(f"{url}schedules/{schedule_id}")
        expect(page.locator("#signed-in")).to_have_text(f"{olivia.name} · operator")
        page.get_by_placeholder("note (optional)").fill("month end")
        page.get_by_role("button", name="Pause").click()

        # Then the store has it paused (the console's own identity may not pause)
        expect(page.locator("#schedule-state")).to_have_text("paused")
        stored = client.get_schedule(schedule_id)
        assert (stored.paused, stored.pause_note) == (True, "month end")

    # And the browser holds only a session id, HTTP-only and SameSite=Strict; the key
    # is in no cookie, no page and no line of the console's log
    cookie = session_cookie(context)
    assert cookie is not None
    assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")
    assert all(olivia.token not in str(c["value"]) for c in context.cookies())
    assert olivia.token not in page.content()
    log = suite.procs["console"].log_path.read_text()
    assert f"user {olivia.name} (operator, API key {olivia.key_id}) signed in" in log
    assert olivia.token not in log


def test_a_viewer_sees_no_buttons_and_a_crafted_change_is_refused_by_the_store(
    suite: Suite, client: Client, page: Page
) -> None:
    # Given a schedule and a viewer signed in
    schedule_id = nightly(client)
    vera = api_key(suite, "viewer", fresh("vera"))
    sign_in(page, suite.console_url, vera.token)
    # When she opens the schedule's page
    page.goto(f"{suite.console_url}schedules/{schedule_id}")
    # Then she is named, read-only, and no button changes anything
    expect(page.locator("#signed-in")).to_have_text(f"{vera.name} · viewer (read-only)")
    for button in ("Pause", "Resume", "Trigger now"):
        expect(page.get_by_role("button", name=button)).to_have_count(0)

    # When a pause is posted anyway, with the page's own token
    response = page.request.post(
        f"{suite.console_url}schedules/{schedule_id}/pause",
        form={"csrf_token": csrf_of(page), "note": "crafted"},
    )
    # Then the store refused it by her role, and the 403 page says what it needs
    assert response.status == 403, response.text()
    text = response.text()
    assert f"user {vera.name} (viewer, API key {vera.key_id})" in text
    assert "it needs role operator" in text
    assert client.get_schedule(schedule_id).paused is False


@pytest.mark.parametrize("which", ["garbage", "revoked"])
def test_a_garbage_or_revoked_key_cannot_sign_in(
    suite: Suite, page: Page, context: BrowserContext, which: str
) -> None:
    # Given a key that is not valid: made up, or revoked by an admin
    if which == "garbage":
        token = "cwk_" + "x" * 20
    else:
        key = api_key(suite, "operator")
        revoke(suite, key)
        token = key.token
    # When someone signs in with it
    page.goto(f"{suite.console_url}sign-in")
    page.get_by_label("API key").fill(token)
    with page.expect_response(f"{suite.console_url}sign-in") as answer:
        page.get_by_role("button", name="Sign in").click()
    # Then the sign-in page says the key is not valid, and nobody is signed in
    assert answer.value.status == 401
    expect(page.locator("#sign-in-error")).to_contain_text("That API key is not valid")
    expect(page.locator("#signed-in")).to_have_count(0)
    assert session_cookie(context) is None
    assert token not in page.content()


def test_signing_out_ends_the_session(
    suite: Suite, client: Client, page: Page, context: BrowserContext, operator: Key
) -> None:
    # Given an operator signed in, and the session cookie she holds
    schedule_id = nightly(client)
    sign_in(page, suite.console_url, operator.token)
    held = session_cookie(context)
    assert held is not None

    # When she signs out
    page.get_by_role("button", name="Sign out").click()

    # Then the page is read-only again and the cookie is gone
    expect(page.locator("#sign-in")).to_be_visible()
    assert session_cookie(context) is None
    # And the old session id, replayed, makes no change: the session is over
    context.add_cookies([held])  # type: ignore[list-item]
    page.goto(f"{suite.console_url}schedules/{schedule_id}")
    expect(page.locator("#sign-in")).to_be_visible()
    page.goto(f"{suite.console_url}sign-in")  # a page with a form, for its CSRF token
    response = page.request.post(
        f"{suite.console_url}schedules/{schedule_id}/pause", form={"csrf_token": csrf_of(page)}
    )
    assert response.status == 403
    assert "Sign in to make changes" in response.text()
    assert client.get_schedule(schedule_id).paused is False


def test_a_key_revoked_after_sign_in_makes_no_change_and_ends_the_session(
    make_suite: SuiteFactory, page: Page, context: BrowserContext
) -> None:
    # Given an operator signed in to a suite whose services trust a checked key for 1 s
    suite = make_suite(console=True, env={"CRONWAVE_AUTH_CACHE_TTL": "1s"})
    olivia = api_key(suite, "operator")
    with client_for(suite) as client:
        schedule_id = nightly(client)
        sign_in(page, suite.console_url, olivia.token)
        page.goto(f"{suite.console_url}schedules/{schedule_id}")
        expect(page.get_by_role("button", name="Pause")).to_be_visible()

        # When an admin revokes her key, and the store has stopped accepting it
        revoke(suite, olivia)
        with Client(
            store_addr=suite.store_addr,
            dispatcher_addr=suite.dispatcher_addr,
            planner_addr=suite.planner_addr,
            leader_addr=suite.leader_addr,
            tls=suite.tls("client", olivia.token),
        ) as as_olivia:

            def refused() -> bool:
                try:
                    as_olivia.list_schedules()
                except Unauthenticated:
                    return True
                return False

            eventually(refused, timeout=20, interval=0.2, what="the revoked key refused")
        # And she presses Pause on the page she has open
        page.get_by_role("button", name="Pause").click()

        # Then nothing changed, the page says she is signed out, and she is
        expect(page.locator("h1")).to_have_text("Signed out")
        expect(page.locator(".error-message")).to_contain_text("no longer accepts your API key")
        assert client.get_schedule(schedule_id).paused is False
    assert session_cookie(context) is None
    page.goto(suite.console_url)
    expect(page.locator("#sign-in")).to_be_visible()


def test_an_insecure_console_refuses_to_listen_off_loopback(tmp_path: Path) -> None:
    # Given a suite without authentication (CRONWAVE_INSECURE=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWAVE_")}
    env |= {
        "CRONWAVE_INSECURE": "1",
        "CRONWAVE_CONSOLE_ADDR": f"0.0.0.0:{free_port()}",
        "CRONWAVE_DATA_DIR": str(tmp_path),
        "CRONWAVE_METRICS_ADDR": "",
    }
    # When its console is started on every address
    done = subprocess.run(
        [sys.executable, "-P", "-m", "console"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Then it stops at once, saying why in one line (anyone who reached it could
    # change things), with the refusal's status 2 and no traceback
    assert done.returncode == 2
    assert done.stderr.startswith("console: cannot start: CRONWAVE_INSECURE=1")
    assert "listens on loopback only" in done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
