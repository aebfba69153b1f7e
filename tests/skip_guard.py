"""In CI (``CRONWAVE_CI=1``, set by ``.ci/run``) a test that was skipped, or xfailed,
fails the run unless ``tests/skips_allowed.txt`` lists it with a reason: a suite that
skips in silence looks green while testing less.

The allow-list has one entry a line, ``<pattern> — <why>`` (an em dash, or ``--``,
between them); ``#`` starts a comment. The pattern is a glob (``fnmatch``, case
sensitive) matched against the test's node id and against the skip's reason, e.g.
``tests/bench/test_measure.py::* — reads /proc, which only Linux has``. An entry
without its why is refused, naming its line.

Under pytest-xdist the controller sees every worker's reports
(``pytest_runtest_logreport``, and ``pytest_collectreport`` for a module skipped at
collection), so the guard runs there and sets the exit status once, at the end. The
Makefile runs pytest twice (the parallel part, then ``-m serial``): the guard is
installed by ``tests/conftest.py``, so it applies to both.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

CI_VAR = "CRONWAVE_CI"
ALLOW_LIST = Path(__file__).with_name("skips_allowed.txt")
PLUGIN_NAME = "cronwave-skip-guard"

_SEPARATOR = re.compile(r"\s+(?:—|--)\s+")


class AllowListError(Exception):
    """The allow-list file is malformed (the message names the line)."""


@dataclass(frozen=True)
class Allowed:
    """One allow-list entry: a glob over node ids and skip reasons, and why."""

    pattern: str
    why: str

    def __post_init__(self) -> None:
        if not self.pattern.strip() or not self.why.strip():
            raise AllowListError("an allow-list entry needs a pattern and a reason")

    def matches(self, nodeid: str, reason: str) -> bool:
        return fnmatch.fnmatchcase(nodeid, self.pattern) or fnmatch.fnmatchcase(
            reason, self.pattern
        )


@dataclass(frozen=True)
class Skip:
    """A test that did not run (or ran expecting to fail), as its report said."""

    nodeid: str
    kind: str  # "skipped" or "xfailed"
    reason: str


def parse_allow_list(text: str, source: str = "skips_allowed.txt") -> list[Allowed]:
    """The entries of an allow-list; a line that is not ``<pattern> — <why>`` is
    refused with its number."""
    entries = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = _SEPARATOR.split(line, maxsplit=1)
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise AllowListError(
                f"{source}:{number}: expected '<node id or reason pattern> — <why it may "
                f"skip>', got {raw.strip()!r}"
            )
        entries.append(Allowed(parts[0].strip(), parts[1].strip()))
    return entries


def skip_of(report: pytest.TestReport | pytest.CollectReport) -> Skip | None:
    """The skip (or xfail) a report tells of, if any."""
    if not report.skipped:
        return None
    wasxfail = getattr(report, "wasxfail", None)
    if wasxfail is not None:
        return Skip(report.nodeid, "xfailed", str(wasxfail) or "(no reason given)")
    longrepr = report.longrepr
    if isinstance(longrepr, tuple | list) and len(longrepr) == 3:
        reason = str(longrepr[2])
    else:
        reason = str(longrepr)
    return Skip(report.nodeid, "skipped", reason.removeprefix("Skipped: ") or "(no reason)")


class SkipGuard:
    """The pytest plugin: collects skips, fails the session on an unlisted one."""

    def __init__(self, allowed: list[Allowed], allow_list: Path) -> None:
        self.allowed = allowed
        self.allow_list = allow_list
        self.skips: dict[str, Skip] = {}

    def _note(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        skip = skip_of(report)
        if skip is not None:
            self.skips.setdefault(skip.nodeid, skip)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._note(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._note(report)

    def unlisted(self) -> list[Skip]:
        return [
            s
            for s in self.skips.values()
            if not any(a.matches(s.nodeid, s.reason) for a in self.allowed)
        ]

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.unlisted() and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        unlisted = self.unlisted()
        if not unlisted:
            return
        terminalreporter.section("skips not in the allow-list", sep="=", red=True, bold=True)
        terminalreporter.line(
            f"{CI_VAR} is set: {len(unlisted)} test(s) did not run and are not listed in "
            f"{self.allow_list}; list each with why it may skip, or make it run."
        )
        for skip in sorted(unlisted, key=lambda s: s.nodeid):
            terminalreporter.line(f"{skip.kind.upper()} {skip.nodeid}: {skip.reason}", red=True)


def install(config: pytest.Config, allow_list: Path = ALLOW_LIST) -> None:
    """Register the guard when ``CRONWAVE_CI`` is set, on the process that sees every
    report (not on an xdist worker)."""
    if os.environ.get(CI_VAR, "") in ("", "0") or hasattr(config, "workerinput"):
        return
    try:
        text = allow_list.read_text(encoding="utf-8") if allow_list.exists() else ""
        allowed = parse_allow_list(text, str(allow_list))
    except AllowListError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(SkipGuard(allowed, allow_list), PLUGIN_NAME)
