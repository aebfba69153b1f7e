"""The console's browser tests: a suite with its console (real processes on loopback)
and Debian's chromium driven by playwright (``/usr/bin/chromium``; ``make setup``
installs it when it is missing -- playwright's own browser downloads are not used).

When a test fails, every page it had open is kept as a screenshot in
``.ci-artifacts/screenshots/<test>-<n>.png`` (``.ci/run`` keeps that folder).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from cronwave import Client
from cronwave_core.suite import Suite
from tests.harness.clients import client_for
from tests.harness.suites import SuiteFactory
from tests.helpers import REPO

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


@pytest.fixture
def client(suite: Suite) -> Iterator[Client]:
    with client_for(suite) as c:
        yield c
