"""The reference pages stay short enough to read as reference (issue 27, item 6).

An operations page over 400 lines, or benchmarks.md over 300, is a page that has begun
to keep history or to say a thing twice: split it by task, or let git keep the past.
"""

from __future__ import annotations

from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
OPERATIONS_PAGES = sorted((DOCS / "operations").glob("*.md"))


def lines(page: Path) -> int:
    return len(page.read_text(encoding="utf-8").splitlines())


def test_the_operations_index_has_its_pages() -> None:
    index = (DOCS / "operations.md").read_text(encoding="utf-8")
    assert OPERATIONS_PAGES, "docs/operations/ has no pages"
    for page in OPERATIONS_PAGES:
        link = f"](operations/{page.name})"
        assert link in index, f"docs/operations.md does not link {page.name}"


@pytest.mark.parametrize("page", [DOCS / "operations.md", *OPERATIONS_PAGES], ids=lambda p: p.name)
def test_no_operations_page_exceeds_400_lines(page: Path) -> None:
    assert lines(page) <= 400, f"{page.relative_to(DOCS)} has {lines(page)} lines: split it by task"


def test_benchmarks_keeps_at_most_300_lines() -> None:
    page = DOCS / "benchmarks.md"
    assert lines(page) <= 300, f"benchmarks.md has {lines(page)} lines: history belongs in git"
