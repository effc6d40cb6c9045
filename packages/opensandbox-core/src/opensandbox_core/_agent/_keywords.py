"""`SessionKeywords`: the keywords that connect to a server and say how commands run, shared
by an adapter's create and attach keywords (frozen, checked when built, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any, TypeVar

from opensandbox_core import _defaults, _validate
from opensandbox_core._config import Connection
from opensandbox_core._session import AsyncSandboxSession

__all__ = ["SessionKeywords"]

K = TypeVar("K", bound="SessionKeywords")


@dataclass(frozen=True, kw_only=True)
class SessionKeywords:
    """The server (`domain`, `api_key` never shown in `repr()`, `use_server_proxy`), `timeout`
    (the idle lifetime; `None` when attaching leaves the creator's), `command_timeout` (a
    command's default limit), `working_dir` and `env` (sent with every command, so they apply to
    an attached sandbox too; never shown in `repr()`)."""

    domain: str | None = None
    api_key: str | None = field(default=None, repr=False)
    use_server_proxy: bool = False
    timeout: timedelta | float | None = None
    command_timeout: timedelta | float | None = timedelta(seconds=_defaults.COMMAND_TIMEOUT)
    working_dir: str = _defaults.WORKING_DIR
    env: Mapping[str, str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _validate.idle_lifetime(self.timeout)
        _validate.idle_lifetime(self.command_timeout, "command_timeout")
        _validate.working_dir(self.working_dir)
        _validate.env(self.env)

    def connection(self) -> Connection:
        return Connection(
            domain=self.domain, api_key=self.api_key, use_server_proxy=self.use_server_proxy
        )

    def session_options(self) -> dict[str, Any]:
        """`AsyncSandboxSession`'s keywords for how commands run (`restore_snapshot` takes them)."""
        return {
            "working_dir": self.working_dir,
            "env": self.env,
            "default_timeout": _validate.idle_lifetime(self.command_timeout, "command_timeout"),
        }

    def attach(self, sandbox_id: str, connection: Connection | None = None) -> AsyncSandboxSession:
        """A session on an existing sandbox (no I/O), renewing it to `timeout` when given."""
        session = AsyncSandboxSession.attach(
            sandbox_id, connection=connection or self.connection(), **self.session_options()
        )
        session.set_lifetime(_validate.idle_lifetime(self.timeout))
        return session

    def narrowed(self, kind: type[K]) -> K:
        """These keywords as the class `kind` (a base of this one) takes them."""
        return kind(**{f.name: getattr(self, f.name) for f in fields(kind)})
