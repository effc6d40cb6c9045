"""The tables of the Pydantic AI adapter: keywords as a `SandboxSpec` (`SPEC_FIELDS`), the core's
errors as the workspace protocol's (`_ERROR_TABLE`; unlisted ones propagate), refs and connections
as the core's, and the asyncio requirement. docs/pydantic-ai.md gives both tables in prose.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, NoReturn

from pydantic_ai.exceptions import UserError
from pydantic_ai.workspaces import (
    FileEntry,
    WorkspaceError,
    WorkspaceOutputLimitError,
    WorkspaceRef,
    WorkspaceTimeoutError,
    WorkspaceUnavailableError,
)

from opensandbox_core import (
    AuthenticationError,
    CommandTimeoutError,
    ConfigurationError,
    Connection,
    OutputLimitError,
    SandboxUnavailableError,
)
from opensandbox_core import validation as _validate
from opensandbox_core.fleet import destroy_sandbox

__all__ = [
    "PROVIDER",
    "SPEC_FIELDS",
    "check_ref",
    "core_connection",
    "destroy_by_id",
    "file_entry",
    "lifetime",
    "require_asyncio",
    "running_on_asyncio",
    "settings_checked",
    "translate",
]

PROVIDER: Final = "opensandbox"
"""`WorkspaceRef.provider` of every sandbox this package creates or attaches to."""


def lifetime(value: object) -> float | None:
    """`sandbox_timeout` as the core's `lifetime`: seconds (at least one), or None."""
    return None if value is None else _validate.seconds(value, "sandbox_timeout", minimum=1)


SPEC_FIELDS: Final[Mapping[str, str | tuple[str, Any]]] = MappingProxyType(
    {
        "image": "image",
        "entrypoint": "entrypoint",
        "resource": "resource",
        "allow_internet_access": "allow_internet_access",
        "secure_access": "secure_access",
        "sandbox_timeout": ("lifetime", lifetime),  # None: kept until destroyed
        "metadata": "metadata",
        "volumes": "volumes",
        "network_policy": "network_policy",
    }
)
"""Each keyword of `OpenSandbox` / `OpenSandboxBackend` describing a new sandbox, and its field of
the core's `SandboxSpec` (`env`, `working_dir` and, on attach, `sandbox_timeout` are the session's)."""

if TYPE_CHECKING:
    from opensandbox.config import ConnectionConfig


_sniffio: Any
try:
    import sniffio as _sniffio
except ModuleNotFoundError:  # pragma: no cover - Trio depends on sniffio: without it, no Trio
    _sniffio = None


def running_on_asyncio() -> bool:
    """Whether the caller runs in an asyncio event loop (not Trio, not outside any loop)."""
    if _sniffio is not None:
        try:
            return bool(_sniffio.current_async_library() == "asyncio")
        except _sniffio.AsyncLibraryNotFoundError:
            return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@contextlib.contextmanager
def settings_checked() -> Iterator[None]:
    """A capability's settings refused by the core's checks (`TypeError`, `ValueError`) as
    `UserError`, at construction rather than at the run's first operation."""
    try:
        yield
    except (TypeError, ValueError) as exc:
        raise UserError(str(exc)) from None


def require_asyncio() -> None:
    """Raise `UserError` unless the caller runs on asyncio (the OpenSandbox SDK needs it)."""
    if not running_on_asyncio():
        raise UserError(
            "OpenSandbox needs the asyncio event loop: the OpenSandbox SDK and its HTTP clients run "
            "on asyncio only, so it cannot be used under Trio. Run the agent with asyncio."
        )


# -- the error table (docs/pydantic-ai.md, "Errors") ---------------------------------------------


def _unavailable(exc: BaseException, *, starting: bool) -> Exception:
    return WorkspaceUnavailableError(str(exc))


def _timeout(exc: BaseException, *, starting: bool) -> Exception:
    assert isinstance(exc, CommandTimeoutError)
    return WorkspaceTimeoutError(str(exc), stdout=exc.stdout, stderr=exc.stderr)


def _output_limit(exc: BaseException, *, starting: bool) -> Exception:
    assert isinstance(exc, OutputLimitError)
    return WorkspaceOutputLimitError(str(exc), limit=exc.limit)


def _configuration(exc: BaseException, *, starting: bool) -> Exception:
    if starting:
        return WorkspaceError(str(exc))
    return ValueError(str(exc))


_ERROR_TABLE: Final[tuple[tuple[type[BaseException], Callable[..., Exception]], ...]] = (
    (SandboxUnavailableError, _unavailable),
    (AuthenticationError, _unavailable),
    (CommandTimeoutError, _timeout),
    (OutputLimitError, _output_limit),
    (ConfigurationError, _configuration),
)


def translate(exc: BaseException, *, starting: bool = False) -> NoReturn:
    """Raise the workspace error the table gives for `exc`, or `exc` itself."""
    for core_type, convert in _ERROR_TABLE:
        if isinstance(exc, core_type):
            raise convert(exc, starting=starting) from exc
    raise exc


# -- the adapter's types ----------------------------------------------------------------------


def check_ref(ref: WorkspaceRef) -> None:
    if not isinstance(ref, WorkspaceRef):
        raise TypeError(f"ref must be a WorkspaceRef, got {type(ref).__name__}.")
    if ref.provider != PROVIDER:
        raise ValueError(f"unsupported workspace provider {ref.provider!r}; expected 'opensandbox'")
    if not ref.id.strip():
        raise ValueError("OpenSandbox workspace ref id cannot be empty")


def core_connection(connection: ConnectionConfig | None) -> Connection:
    """The core's `Connection` for an SDK config used as given, or for the environment."""
    if connection is None:
        return Connection()
    from opensandbox.config import ConnectionConfig

    if not isinstance(connection, ConnectionConfig):
        raise TypeError(
            "connection must be an opensandbox.config.ConnectionConfig or None, "
            f"got {type(connection).__name__}."
        )
    return Connection.from_sdk_config(connection)


async def destroy_by_id(sandbox_id: str, connection: ConnectionConfig | None) -> None:
    """Delete a sandbox by id; quiet when it is already gone."""
    require_asyncio()
    try:
        await destroy_sandbox(sandbox_id, core_connection(connection))
    except Exception as exc:
        translate(exc, starting=True)


def file_entry(info: Any, path: str) -> FileEntry:
    return FileEntry(
        name=posixpath.basename(path.rstrip("/")) or "/",
        path=path,
        is_dir=bool(info.is_dir),
        size=None if info.is_dir else int(info.size),
    )
