"""`SessionInfo`: the read-only properties `AsyncSandboxSession` and its blocking twin share.

Both classes hold the same two objects, the session's lifecycle facet (`_life`) and its
validated environment (`_env`): the async session builds them and the blocking façade keeps
references to its async session's. So each property (and `repr()`) is written once, here, and
reads the same state whichever class it is reached from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, cast

from ._config import Connection, SandboxSpec
from ._lifecycle._sandbox import SandboxLifecycle

__all__ = ["SessionInfo"]


class SessionInfo:
    """Identity and settings of a session, read from `_life` and `_env` (set by the class)."""

    _life: SandboxLifecycle
    _env: dict[str, str]

    @property
    def id(self) -> str | None:
        """The sandbox id, or None before a created sandbox exists."""
        return self._life.sandbox_id

    @property
    def owned(self) -> bool:
        """True when this session created the sandbox (and so may destroy it on exit)."""
        return self._life.owned

    @property
    def owner_token(self) -> str:
        """The value of the ownership tag (`OWNER_KEY`) this session puts on a sandbox it creates."""
        return self._life.owner_token

    @property
    def spec(self) -> SandboxSpec | None:
        return self._life.spec

    @property
    def connection(self) -> Connection:
        return self._life.connection

    @property
    def env(self) -> Mapping[str, str]:
        return dict(self._env)

    @property
    def framing(self) -> Literal["modern", "legacy"] | None:
        """execd's output framing once the sandbox was reached, else None: `"modern"` (the 1.1
        generation: events keep their line endings) or `"legacy"` (v1.0.17 to v1.0.19: one event
        per line; the exact output is read from execd's files). Older daemons are refused."""
        ready = self._life.ready
        return cast('Literal["modern", "legacy"]', ready.framing.value) if ready else None

    def __repr__(self) -> str:
        life = self._life
        state = "destroyed" if life.destroyed else ("ready" if life.ready else "not started")
        return (
            f"{type(self).__name__}(id={life.sandbox_id!r}, owned={life.owned}, "
            f"state={state!r}, connection={life.connection!r})"
        )
