"""tests.skip_guard: in CI a skip that the allow-list does not name fails the run, a
listed one does not; under pytest-xdist too, and for a module skipped at collection."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.skip_guard import CI_VAR, AllowListError, parse_allow_list

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]

CONFTEST = """
from pathlib import Path
from tests import skip_guard

def pytest_configure(config):
    skip_guard.install(config, Path(__file__).with_name("allowed.txt"))
"""

TESTS = """
import sys
import pytest

def test_runs():
    pass

def test_skips():
    pytest.skip("no frobnicator here")

@pytest.mark.skipif(sys.maxsize > 0, reason="always, by a marker")
def test_marked():
    pass

@pytest.mark.xfail(reason="known to be broken")
def test_broken():
    assert False
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A tiny test directory whose conftest installs the guard, run as CI runs it."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv(CI_VAR, "1")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_tiny=TESTS)
    return pytester


def allow(pytester: pytest.Pytester, *lines: str) -> None:
    (pytester.path / "allowed.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_an_unlisted_skip_fails_the_run_and_is_named(suite: pytest.Pytester) -> None:
    allow(suite, "# nothing is allowed")

    result = suite.runpytest_subprocess("-p", "no:cacheprovider")

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    result.stdout.fnmatch_lines(
        [
            "*skips not in the allow-list*",
            "*CRONWAVE_CI is set: 3 test(s) did not run*",
            "XFAILED test_tiny.py::test_broken: known to be broken",
            "SKIPPED test_tiny.py::test_marked: always, by a marker",
            "SKIPPED test_tiny.py::test_skips: no frobnicator here",
        ]
    )


def test_skips_listed_by_node_id_or_by_reason_pass(suite: pytest.Pytester) -> None:
    allow(
        suite,
        "test_tiny.py::test_skips — the frobnicator is optional",
        "always, by a* -- a marker that says why",
        "*::test_broken — fixed upstream in the next release",
    )

    result = suite.runpytest_subprocess("-p", "no:cacheprovider")

    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    assert "skips not in the allow-list" not in result.stdout.str()


def test_one_unlisted_skip_among_listed_ones_still_fails(suite: pytest.Pytester) -> None:
    allow(suite, "*test_skips — optional", "*test_broken — upstream")

    result = suite.runpytest_subprocess("-p", "no:cacheprovider")

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 test(s) did not run*", "SKIPPED *test_marked: always*"])
    assert "SKIPPED test_tiny.py::test_skips" not in result.stdout.str()


def test_under_xdist_the_controller_fails_the_run(suite: pytest.Pytester) -> None:
    allow(suite, "*test_broken — upstream")
    suite.makepyfile(
        test_module_skip="""
import pytest
pytest.skip("the whole module", allow_module_level=True)
"""
    )

    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*CRONWAVE_CI is set: 3 test(s) did not run*",
            "SKIPPED test_module_skip.py: the whole module",
            "SKIPPED test_tiny.py::test_marked: always, by a marker",
            "SKIPPED test_tiny.py::test_skips: no frobnicator here",
        ]
    )


def test_a_failing_run_keeps_its_own_exit_status(suite: pytest.Pytester) -> None:
    allow(suite)
    suite.makepyfile(test_fails="def test_fails():\n    assert False\n")

    result = suite.runpytest_subprocess("-p", "no:cacheprovider")

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=1, skipped=2, xfailed=1)


def test_outside_ci_skips_are_reported_as_usual(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CI_VAR)
    allow(suite)

    result = suite.runpytest_subprocess("-p", "no:cacheprovider")

    assert result.ret == pytest.ExitCode.OK
    assert "skips not in the allow-list" not in result.stdout.str()


def test_an_entry_without_its_reason_is_refused_naming_the_line(suite: pytest.Pytester) -> None:
    allow(suite, "# header", "*test_skips — optional", "*test_marked")

    result = suite.runpytest_subprocess("-p", "no:cacheprovider")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*allowed.txt:3: expected '<node id or reason pattern> — *"])


def test_the_allow_list_parses_to_its_entries() -> None:
    text = "# comment\n\n  a::b — why a\nreason * -- why b\n"
    entries = parse_allow_list(text)
    assert [(e.pattern, e.why) for e in entries] == [("a::b", "why a"), ("reason *", "why b")]
    assert entries[1].matches("x::y", "reason given")
    assert not entries[0].matches("a::c", "a::b is not the reason")
    with pytest.raises(AllowListError, match=r"f:2: expected"):
        parse_allow_list("ok — fine\n— no pattern\n", "f")


def test_the_repository_allow_list_is_well_formed() -> None:
    entries = parse_allow_list((REPO / "tests" / "skips_allowed.txt").read_text())
    assert all(e.why for e in entries)
