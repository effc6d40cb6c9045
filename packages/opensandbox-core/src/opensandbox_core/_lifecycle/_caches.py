"""The process-wide caches of what is learnt about a sandbox, and `forget`, which drops a
destroyed sandbox from every one of them.

What is cached is a verdict about one sandbox, learnt with a request or a command: the output
framing of its execd, its canonical working directory, where execd keeps each command's raw
output (`_reach`, the probe), what its execd's file API offers (`_files._filesystem`), whether
its tools are GNU's (`_files._portable`). Each is the same for every session on that sandbox,
in every event loop and thread, and does not change while the sandbox lives, so it is learnt
once per process instead of once per session. A key starts with (domain, sandbox id): the
server's address and the id it gave, which it never gives to another sandbox, so an entry can
only go stale once its sandbox is gone; the session that destroys it calls `forget`. An entry
for a sandbox destroyed elsewhere stays until the process ends (a few bytes; nothing asks for
that sandbox again but to learn that it is gone).

These caches and `_commands._output.WARNED_REBUILT` are the core's only process-wide mutable
state (`tests/unit/core/test_import_graph.py` keeps it so).
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["SandboxCache", "forget"]

_K = TypeVar("_K", bound=tuple[Any, ...])
_V = TypeVar("_V")


class SandboxCache(dict[_K, _V]):
    """A process-wide cache of one verdict per sandbox, keyed by a tuple that starts with
    (domain, sandbox id) (see the module docstring); `what` says what it holds."""

    def __init__(self, what: str) -> None:
        super().__init__()
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
