"""The order in which Stripe lists objects of one kind, kept as an index so that a page costs
O(log n + page) however many objects there are: oldest to newest by `created`, ties in the order
the objects were made (a list answers it backwards, newest first)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

# (created, sequence, id): the sequence is unique within a timeline, so ids are never compared.
Key = tuple[int, int, str]


class Timeline:
    def __init__(self) -> None:
        self._keys: list[Key] = []
        self._by_id: dict[str, Key] = {}
        self._next = 0
        # Objects usually arrive in order (the clock only moves forward); one made with an earlier
        # `created` (a seed spreading objects over days) marks the list for one sort on next read.
        self._sorted = True

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, object_id: str, created: int) -> None:
        self._append((created, self._next, object_id))
        self._next += 1

    def _append(self, key: Key) -> None:
        if self._keys and key < self._keys[-1]:
            self._sorted = False
        self._keys.append(key)
        self._by_id[key[2]] = key

    def remove(self, object_id: str) -> None:
        key = self._by_id.pop(object_id, None)
        if key is not None:
            keys = self.keys()
            del keys[bisect_left(keys, key)]

    def move(self, object_id: str, created: int) -> None:
        """A new `created` for an object (tampering): its place among its ties is kept."""
        key = self._by_id.get(object_id)
        if key is not None:
            self.remove(object_id)
            self._append((created, key[1], object_id))

    def key(self, object_id: str) -> Key | None:
        return self._by_id.get(object_id)

    def keys(self) -> list[Key]:
        """Every key, oldest first (the list itself: callers only read it)."""
        if not self._sorted:
            self._keys.sort()
            self._sorted = True
        return self._keys

    def keys_of(self, object_ids: Iterable[str]) -> list[Key]:
        """The keys of some of this timeline's objects (one charge's refunds), oldest first."""
        by_id = self._by_id
        return sorted(by_id[oid] for oid in object_ids if oid in by_id)
