"""The process-wide caches of what is learnt about a sandbox, and `forget`, which drops a
destroyed sandbox from every one of them.

What is cached is a verdict about one sandbox, learnt with a request or a command: the output
framing of its execd, its canonical working directory, where execd keeps each command's raw
output (`_reach`, the probe), whether its execd is reached at the root behind its
endpoint (`_reach.Route`), what its execd's file API offers (`_files._filesystem`), whether
its tools are GNU's (`_files._portable`). Each is the same for every session on that sandbox,
in every event loop and thread, and does not change while the sandbox lives, so it is learnt
once per process instead of once per session. A key starts with (domain, sandbox id): the
server's address and the id it gave, which it never gives to another sandbox, so an entry can
only go stale once its sandbox is gone; the session that destroys it calls `forget`. An entry
for a sandbox destroyed elsewhere stays until the process ends (a few bytes; nothing asks for
that sandbox again but to learn that it is gone) or until it is the least recently used of
`MAX_ENTRIES`: each cache is bounded, and thread-safe.

These caches and `_commands._output.WARNED_REBUILT` are the core's only process-wide mutable
state (`tests/unit/core/test_import_graph.py` keeps it so).
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

from opensandbox_core._lru import LruCache

__all__ = ["MAX_ENTRIES", "SandboxCache", "forget"]

_K = TypeVar("_K", bound=tuple[Any, ...])
_V = TypeVar("_V")

MAX_ENTRIES: Final = 4096
"""The most entries one cache keeps; the least recently used goes first (a long-lived process
that meets many sandboxes relearns a verdict with one request, it does not grow)."""


class SandboxCache(LruCache[_K, _V]):
    """A process-wide cache of one verdict per sandbox, keyed by a tuple that starts with
    (domain, sandbox id) (see the module docstring); `what` says what it holds. Thread-safe
    and bounded as every `LruCache` is (`MAX_ENTRIES`, least recently used first out)."""

    def __init__(self, what: str, *, max_entries: int = MAX_ENTRIES) -> None:
        super().__init__(max_entries)
        self.what = what
        _CACHES.append(self)

    def __repr__(self) -> str:
        return f"SandboxCache({self.what!r}, {len(self)} entries)"

    def forget(self, domain: str, sandbox_id: str) -> None:
        """Drop every entry about the sandbox `sandbox_id` of the server at `domain`."""
        for key in [k for k in self if k[:2] == (domain, sandbox_id)]:
            self.pop(key, None)


_CACHES: list[SandboxCache[Any, Any]] = []
"""Every `SandboxCache`, made at import time by the modules that own them: what `forget` clears."""


def forget(domain: str, sandbox_id: str) -> None:
    """Drop every cached verdict about a sandbox (it was destroyed)."""
    for cache in _CACHES:
        cache.forget(domain, sandbox_id)
