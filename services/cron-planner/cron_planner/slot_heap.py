"""A binary min-heap whose items know where they sit, so one can be moved or taken out
in place in O(log n): a schedule's slot changes by moving its own entry, and the heap
holds exactly one reference per pending slot -- no stale copies waiting to surface, no
key tuple beside the item. Not thread-safe: its owner locks.
"""

from __future__ import annotations

from typing import Generic, Protocol, Self, TypeVar


class Placed(Protocol):
    #: Where the item sits in the heap; -1 while it is not in it.
    position: int

    def before(self, other: Self) -> bool:
        """Whether this item comes out first (a strict order: no two items tie)."""
        ...


T = TypeVar("T", bound=Placed)


class SlotHeap(Generic[T]):
    def __init__(self) -> None:
        self._items: list[T] = []

    def __len__(self) -> int:
        return len(self._items)

    def first(self) -> T | None:
        return self._items[0] if self._items else None

    def push(self, item: T) -> None:
        item.position = len(self._items)
        self._items.append(item)
        self._up(item.position)

    def moved(self, item: T) -> None:
        """``item``'s key changed: restore the order around it."""
        if not self._up(item.position):
            self._down(item.position)

    def remove(self, item: T) -> None:
        i = item.position
        last = self._items.pop()
        item.position = -1
        if last is item:
            return
        self._items[i] = last
        last.position = i
        self.moved(last)

    def rebuild(self, items: list[T]) -> None:
        """Hold ``items`` alone (a load): heapify them in O(n)."""
        for item in self._items:
            item.position = -1
        self._items = items
        for i, item in enumerate(items):
            item.position = i
        for i in reversed(range(len(items) // 2)):
            self._down(i)

    def _up(self, i: int, top: int = 0) -> bool:
        """Move the item at ``i`` up, no higher than ``top``; whether it moved."""
        items = self._items
        item = items[i]
        start = i
        while i > top:
            parent = (i - 1) >> 1
            above = items[parent]
            if not item.before(above):
                break
            items[i] = above
            above.position = i
            i = parent
        items[i] = item
        item.position = i
        return i != start

    def _down(self, i: int) -> None:
        # As heapq does: move the hole down to a leaf along the earlier child (one
        # comparison a level), then back up to where the item belongs. An item that
        # moved down usually belongs near the bottom, so this compares about half as
        # often as stopping on the way down.
        items = self._items
        count = len(items)
        top = i
        item = items[i]
        child = 2 * i + 1
        while child < count:
            right = child + 1
            if right < count and not items[child].before(items[right]):
                child = right
            below = items[child]
            items[i] = below
            below.position = i
            i = child
            child = 2 * i + 1
        items[i] = item
        item.position = i
        self._up(i, top)
