"""`LruCache`: the core's one bounded, thread-safe map, least recently used out first.

Every cache and registry the core keeps is one (`_lifecycle._caches.SandboxCache`, the page
indexes of `_files._page_index.PageCache`, `_terminal_tools.ScopedTerminalTools`), so each is
bounded and safe from any thread in the same way.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, MutableMapping
from typing import Any, TypeVar, overload

__all__ = ["LruCache"]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

_MISSING: Any = object()


class LruCache(MutableMapping[K, V]):
    """At most `max_entries` entries; reading (`cache[key]`, `get`) or writing one makes it the
    most recently used, and a write past the bound drops the least recently used. One lock:
    each operation is atomic, iterating walks a snapshot of the keys (least recently used
    first), and `in`, `peek` and iterating do not count as a use. A cache equals only itself."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[K, V] = OrderedDict()

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__

    def __getitem__(self, key: K) -> V:
        with self._lock:
            value = self._entries[key]
            self._entries.move_to_end(key)
            return value

    def __setitem__(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __delitem__(self, key: K) -> None:
        with self._lock:
            del self._entries[key]

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def __iter__(self) -> Iterator[K]:
        with self._lock:
            return iter(list(self._entries))

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def peek(self, key: K) -> V | None:
        """The entry of `key`, or None, without making it the most recently used."""
        with self._lock:
            return self._entries.get(key)

    @overload
    def pop(self, key: K, /) -> V: ...
    @overload
    def pop(self, key: K, default: V, /) -> V: ...
    @overload
    def pop(self, key: K, default: T, /) -> V | T: ...
    def pop(self, key: K, default: Any = _MISSING, /) -> Any:
        """Remove the entry of `key` and return it (in one step, unlike the mixin's)."""
        with self._lock:
            if default is _MISSING:
                return self._entries.pop(key)
            return self._entries.pop(key, default)
