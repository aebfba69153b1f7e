"""A listing page bounded by bytes as well as by count.

A page of ``limit`` schedules can be any size: 2,000 schedules of 250 KiB each are
500 MB, far over what one gRPC message may carry (4 MiB by default). So a page also
ends before the item that would take its encoding past a byte budget; it always holds
one item, so it is never empty while items remain, and a caller pages on after the last
id it got until a page comes back empty. A page shorter than ``limit`` is therefore not
the last one.

The rows are read in chunks sized to what the budget has room for, so a page of large
rows reads little more than it sends, and a page of small rows takes two reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from cronwave_core.errors import InvalidArgument

R = TypeVar("R")
M = TypeVar("M")

#: Rows read first, before their sizes tell how many more fit.
FIRST_CHUNK = 8
#: The most rows one read takes.
MAX_CHUNK = 2_000

Fetch = Callable[[str, int], tuple[list[R], int]]


def page(
    fetch: Fetch[R],
    key: Callable[[R], str],
    encode: Callable[[R], M],
    size: Callable[[M], int],
    *,
    after: str,
    limit: int,
    budget: int,
) -> tuple[list[M], int]:
    """The encoded items after ``after``: at most ``limit`` (0: no count bound), ending
    before the one that would take the page's ``size`` past ``budget`` (the first is
    taken whatever its size). And the revision of the first read.

    ``fetch(after, n)`` returns up to ``n`` rows in key order after ``after``, and the
    revision it read first: with several reads, the page may hold changes newer than
    that revision (a watch from it sends them again), never older ones.
    """
    if limit < 0:
        raise InvalidArgument("limit", "must not be negative (0 means all)")
    if budget <= 0:
        raise ValueError("the page budget must be positive")
    items: list[M] = []
    used = 0
    revision: int | None = None
    want = min(limit or MAX_CHUNK, FIRST_CHUNK)
    # Every round takes at least one row or ends, so rounds <= rows of the page.
    for _ in range(limit or MAX_CHUNK * 1_000):
        rows, read_at = fetch(after, want)
        if revision is None:
            revision = read_at
        for row in rows:
            item = encode(row)
            n = size(item)
            if items and used + n > budget:
                return items, revision
            items.append(item)
            used += n
            if limit and len(items) >= limit:
                return items, revision
        if len(rows) < want:
            return items, revision  # the table ends here
        after = key(rows[-1])
        room = (budget - used) // max(1, used // len(items)) + 1
        left = limit - len(items) if limit else MAX_CHUNK
        want = max(1, min(room, left, MAX_CHUNK))
    return items, revision or 0
