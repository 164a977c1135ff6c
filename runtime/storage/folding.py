"""Copy-on-write maps and sets for the folds over the internal topics.

Why: the folds hand out immutable snapshots (``MappingProxyType``, ``frozenset``) that callers may keep
across threads. Building a new immutable map for every record costs a copy of the map per record, so
reading N records of one connector cost O(N²): 20,000 offset records took 24 s, long enough for a
worker to give up reading its topics at start-up. These builders let a fold mutate plain dicts it owns
and copy only when a snapshot is taken (:meth:`freeze`) and then written again: a batch of N records
costs O(N) plus one copy of each map it touched, however many records touched it.

A builder starts from a frozen map (or set), which it never mutates: the first write copies it into a
dict of the builder's own. ``freeze`` wraps that dict read-only and hands it out; the builder then forgets
it, so the next write copies again and no snapshot ever changes under its holder.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

__all__ = ["MapBuilder", "NestedMapBuilder", "SetBuilder"]

K = TypeVar("K")
K2 = TypeVar("K2")
V = TypeVar("V")

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


class MapBuilder(Generic[K, V]):
    """A mapping written in place between snapshots; ``freeze`` gives the read-only snapshot."""

    __slots__ = ("_base", "_own")

    def __init__(self, base: Mapping[K, V] = _EMPTY) -> None:
        self._base = base
        self._own: dict[K, V] | None = None

    def _current(self) -> Mapping[K, V]:
        return self._base if self._own is None else self._own

    def _writable(self) -> dict[K, V]:
        if self._own is None:
            self._own = dict(self._base)
        return self._own

    def get(self, key: K) -> V | None:
        """The value under ``key``, None when absent."""
        return self._current().get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._current()

    def __iter__(self) -> Iterator[K]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def set(self, key: K, value: V) -> None:
        """Put ``value`` under ``key`` (copies the map once after each freeze)."""
        self._writable()[key] = value

    def pop(self, key: K) -> None:
        """Remove ``key`` if present; an absent key costs no copy."""
        if key in self._current():
            del self._writable()[key]

    def freeze(self) -> Mapping[K, V]:
        """The current content, read-only; the same object until the next write."""
        if self._own is not None:
            self._base = MappingProxyType(self._own)
            self._own = None
        return self._base


class NestedMapBuilder(Generic[K, K2, V]):
    """``outer key -> inner key -> value`` where each inner map is copied on its own first write.

    A record that touches one connector's inner map therefore costs a copy of that connector's map once
    per snapshot, not a copy of every connector's. ``keep_empty`` says whether an inner map emptied by
    removals stays in the outer map (the config fold's deferred task configs need that) or goes.
    """

    __slots__ = ("_keep_empty", "_outer", "_own")

    def __init__(self, base: Mapping[K, Mapping[K2, V]] = _EMPTY, *, keep_empty: bool = False) -> None:
        self._outer: MapBuilder[K, Mapping[K2, V]] = MapBuilder(base)
        self._own: dict[K, dict[K2, V]] = {}
        self._keep_empty = keep_empty

    def inner(self, key: K) -> Mapping[K2, V] | None:
        """The inner map under ``key`` as it is now, None when there is none."""
        own = self._own.get(key)
        return own if own is not None else self._outer.get(key)

    def get(self, key: K, inner_key: K2) -> V | None:
        """One value, None when absent."""
        inner = self.inner(key)
        return None if inner is None else inner.get(inner_key)

    def _writable(self, key: K) -> dict[K2, V]:
        own = self._own.get(key)
        if own is None:
            own = self._own[key] = dict(self._outer.get(key) or _EMPTY)
        return own

    def set(self, key: K, inner_key: K2, value: V) -> None:
        """Put one value, creating the inner map if needed."""
        self._writable(key)[inner_key] = value

    def pop(self, key: K, inner_key: K2) -> None:
        """Remove one value if present."""
        inner = self.inner(key)
        if inner is not None and inner_key in inner:
            del self._writable(key)[inner_key]

    def replace(self, key: K, inner: Mapping[K2, V]) -> None:
        """Make ``inner`` (copied) the whole inner map under ``key``."""
        self._own[key] = dict(inner)

    def drop(self, key: K) -> None:
        """Remove the whole inner map under ``key``."""
        self._own.pop(key, None)
        self._outer.pop(key)

    def freeze(self) -> Mapping[K, Mapping[K2, V]]:
        """Read-only outer and inner maps; inner maps untouched since the last freeze are shared with it."""
        for key, own in self._own.items():
            if own or self._keep_empty:
                self._outer.set(key, MappingProxyType(own))
            else:
                self._outer.pop(key)
        self._own = {}
        return self._outer.freeze()


class SetBuilder(Generic[K]):
    """A set written in place between snapshots; ``freeze`` gives a frozenset."""

    __slots__ = ("_base", "_own")

    def __init__(self, base: frozenset[K] = frozenset()) -> None:
        self._base = base
        self._own: set[K] | None = None

    def __contains__(self, item: object) -> bool:
        return item in (self._base if self._own is None else self._own)

    def _writable(self) -> set[K]:
        if self._own is None:
            self._own = set(self._base)
        return self._own

    def add(self, item: K) -> None:
        """Add ``item`` (no copy when it is already there)."""
        if item not in self:
            self._writable().add(item)

    def discard(self, item: K) -> None:
        """Remove ``item`` if present (no copy when it is not)."""
        if item in self:
            self._writable().discard(item)

    def freeze(self) -> frozenset[K]:
        """The current content as a frozenset; the same object until the next write."""
        if self._own is not None:
            self._base = frozenset(self._own)
            self._own = None
        return self._base
