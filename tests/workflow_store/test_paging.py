"""``workflow_store.paging``: pages bounded by count and bytes, read in chunks that fit."""

from __future__ import annotations

import pytest

from cronwave_core.errors import InvalidArgument
from workflow_store.paging import FIRST_CHUNK, page

KIB = 1024


class Table:
    """Rows (id, size) in id order; counts what each fetch read."""

    def __init__(self, sizes: list[int]) -> None:
        self.rows = [(f"r{i:05d}", size) for i, size in enumerate(sizes)]
        self.reads: list[int] = []

    def fetch(self, after: str, n: int) -> tuple[list[tuple[str, int]], int]:
        rows = [r for r in self.rows if r[0] > after][:n]
        self.reads.append(len(rows))
        return rows, 7

    def page(self, after: str = "", limit: int = 2_000, budget: int = 1024 * KIB):
        items, revision = page(
            self.fetch,
            lambda row: row[0],
            lambda row: row,
            lambda row: row[1],
            after=after,
            limit=limit,
            budget=budget,
        )
        assert revision == 7
        return items


def test_a_page_of_large_rows_ends_by_bytes_and_reads_little_more_than_it_sends():
    # Given 30 rows of 250 KiB
    table = Table([250 * KIB] * 30)

    # When pages of up to 2,000 are read with a 1 MiB budget
    pages, after = [], ""
    for _ in range(30):
        got = table.page(after)
        if not got:
            break
        pages.append(got)
        after = got[-1][0]

    # Then each page holds what fits (4), every row comes once, in order, and each
    # page read at most one first chunk
    assert [len(p) for p in pages] == [4] * 7 + [2]
    assert [r for p in pages for r in p] == table.rows
    assert max(table.reads) <= FIRST_CHUNK


def test_a_page_of_small_rows_fills_its_count_in_two_reads():
    table = Table([200] * 5_000)

    got = table.page(limit=2_000)

    assert got == table.rows[:2_000]
    assert table.reads == [FIRST_CHUNK, 2_000 - FIRST_CHUNK]


def test_a_row_over_the_budget_is_a_page_of_its_own():
    table = Table([10, 3_000 * KIB, 10])

    assert table.page() == table.rows[:1]
    assert table.page(after=table.rows[0][0]) == table.rows[1:2]
    assert table.page(after=table.rows[1][0]) == table.rows[2:]
    assert table.page(after=table.rows[2][0]) == []


def test_no_count_bound_still_ends_by_bytes_and_a_count_bound_is_kept():
    table = Table([100 * KIB] * 50)

    assert len(table.page(limit=0)) == 10
    assert len(table.page(limit=3)) == 3


def test_a_negative_limit_is_refused():
    with pytest.raises(InvalidArgument) as info:
        Table([1]).page(limit=-1)
    assert str(info.value) == "limit: must not be negative (0 means all)"
