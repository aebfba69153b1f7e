"""SlotHeap: items moved and taken out in place still come out in order."""

from __future__ import annotations

import random

from cron_planner.slot_heap import SlotHeap


class Item:
    def __init__(self, name: str, key: int) -> None:
        self.name = name
        self.key = key
        self.position = -1

    def before(self, other: Item) -> bool:
        return (self.key, self.name) < (other.key, other.name)


def drained(heap: SlotHeap[Item]) -> list[str]:
    out = []
    while (first := heap.first()) is not None:
        out.append(first.name)
        heap.remove(first)
    return out


def test_pushes_moves_and_removals_keep_the_order() -> None:
    # Given 300 items pushed, then 1,000 random moves and removals
    rng = random.Random(7)
    heap: SlotHeap[Item] = SlotHeap()
    items = {f"i{n}": Item(f"i{n}", rng.randrange(50)) for n in range(300)}
    for item in items.values():
        heap.push(item)
    for _ in range(1_000):
        item = items[rng.choice(sorted(items))]
        if rng.random() < 0.2:
            heap.remove(item)
            del items[item.name]
            assert item.position == -1
        else:
            item.key = rng.randrange(50)
            heap.moved(item)

    # Then they come out by key, then name, each once
    assert len(heap) == len(items)
    expected = [i.name for i in sorted(items.values(), key=lambda i: (i.key, i.name))]
    assert drained(heap) == expected


def test_a_rebuild_holds_the_new_items_alone() -> None:
    heap: SlotHeap[Item] = SlotHeap()
    old = Item("old", 1)
    heap.push(old)

    heap.rebuild([Item(f"n{k}", k % 7) for k in range(40, 0, -1)])

    assert old.position == -1
    expected = sorted((f"n{k}" for k in range(1, 41)), key=lambda n: (int(n[1:]) % 7, n))
    assert drained(heap) == expected
