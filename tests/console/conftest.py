"""The console's browser tests: a suite with its console (real processes on loopback)
and Debian's chromium driven by playwright (``/usr/bin/chromium``; ``make setup``
installs it when it is missing -- playwright's own browser downloads are not used).

When a test fails, every page it had open is kept as a screenshot in
``.ci-artifacts/screenshots/<test>-<n>.png`` (``.ci/run`` keeps that folder).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cronwave_proto.v1 import api_key_service_pb2 as keys_pb
from cronwave_proto.v1 import api_key_service_pb2_grpc as keys_grpc
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, expect, sync_playwright

from cronwave import Client
from cronwave_core.suite import Suite
from tests.harness.clients import client_for
from tests.harness.suites import SuiteFactory
from tests.helpers import REPO, fresh

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = REPO / ".ci-artifacts" / "screenshots"
LEASE_ENV = {
    "CRONWAVE_LEASE_TTL": "3",
    "CRONWAVE_LEASE_RENEW_INTERVAL": "0.5",
    "CRONWAVE_LEASE_RETRY_INTERVAL": "0.2",
}
#: A Jaeger UI's address for the run pages' trace links (never reached: the services
#: write spans to files here, which the waterfalls read).
JAEGER_URL = "http://jaeger.example:16686"
#: Every wait of a page (navigation, a locator) ends within this.
PAGE_TIMEOUT_MS = 20_000


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    if report.when == "call":  # type: ignore[attr-defined]
        item.stash[_FAILED] = report.failed  # type: ignore[attr-defined]
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium")
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    # --no-sandbox: the tests may run as root (CI containers), where chromium's
    # sandbox refuses to start.
    chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
    yield chromium
    chromium.close()


@pytest.fixture
def context(browser: Browser, request: pytest.FixtureRequest) -> Iterator[BrowserContext]:
    """A fresh browser profile; its pages are screenshotted if the test fails."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    ctx.set_default_timeout(PAGE_TIMEOUT_MS)
    yield ctx
    if request.node.stash.get(_FAILED, False):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
        for i, page in enumerate(ctx.pages):
            page.screenshot(path=str(SCREENSHOTS / f"{name}-{i}.png"), full_page=True)
    ctx.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


@pytest.fixture
def suite(make_suite: SuiteFactory) -> Suite:
    """Store, leader-election, dispatcher, a worker, a planner and the console."""
    return make_suite(console=True, env={**LEASE_ENV, "CRONWAVE_JAEGER_URL": JAEGER_URL})


@pytest.fixture(scope="module")
def shared_console_suite(shared_suite: SuiteFactory) -> Suite:
    """The same suite, shared by a module's tests that change only what they made
    (a module overrides ``suite`` with it)."""
    return shared_suite(console=True, env={**LEASE_ENV, "CRONWAVE_JAEGER_URL": JAEGER_URL})


@pytest.fixture
def client(suite: Suite) -> Iterator[Client]:
    with client_for(suite) as c:
        yield c


@dataclass(frozen=True)
class Key:
    """An API key made for a test: its id, its holder's name and role, its token."""

    key_id: str
    name: str
    role: str
    token: str


def api_key(suite: Suite, role: str, name: str | None = None) -> Key:
    """A new API key of ``role`` in ``suite``'s store, made by its local administrator
    (as `cronwave auth create-key` does)."""
    name = name or fresh(role)
    with suite.channel("workflow-store") as admin:
        reply = keys_grpc.ApiKeyServiceStub(admin).CreateApiKey(
            keys_pb.CreateApiKeyRequest(name=name, role=role), timeout=10
        )
    return Key(reply.key.key_id, name, role, reply.token)


def revoke(suite: Suite, key: Key) -> None:
    with suite.channel("workflow-store") as admin:
        keys_grpc.ApiKeyServiceStub(admin).RevokeApiKey(
            keys_pb.RevokeApiKeyRequest(key_id=key.key_id), timeout=10
        )


def sign_in(page: Page, console_url: str, token: str) -> None:
    """Sign in on ``page`` the way a person does: the sign-in link, the key pasted."""
    page.goto(console_url)
    page.locator("#sign-in").click()
    page.get_by_label("API key").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#signed-in")).to_be_visible()


def csrf_of(page: Page) -> str:
    """The CSRF token of the page open in ``page`` (every page has one)."""
    return page.locator("input[name=csrf_token]").first.get_attribute("value") or ""


@pytest.fixture
def operator(suite: Suite) -> Key:
    return api_key(suite, "operator")
