"""The one error tree of opensandbox-core, and the one place that translates foreign failures.

```
OpenSandboxError
├── ConfigurationError (also ValueError)      a setting or argument is invalid
│   ├── validation.ArgumentTypeError          ... of the wrong type (also TypeError)
│   └── AuthenticationError                   the server refused the API key (401/403)
├── SandboxUnavailableError                   the sandbox is gone, unreachable or unusable
│   └── UnsupportedDaemonError                execd too old to reconstruct output (fix: newer image)
├── CommandTimeoutError (also TimeoutError)   a command outlived its timeout; carries partial output
├── OutputLimitError                          a read exceeded the size limit the caller set
├── NotTextError (also ValueError)            a file read as text (`read_lines`) is not UTF-8
├── EditError (also ValueError)               `files.edit` found no match, or several
├── TerminalError                             an interactive terminal cannot do what was asked
│   ├── TerminalNotFoundError (also LookupError)  no terminal of that id (never made, or closed)
│   ├── TerminalTimeoutError (also TimeoutError)  a terminal's expect/wait ran out; has .output
│   ├── TerminalClosedError (also EOFError)   its process ended, or the handle let go
│   ├── TerminalTakenOverError                another client took the terminal over
│   └── TerminalBusyError                     another client holds it and execd cannot take over
└── ServerError                               any other failure the server reported (has .status_code)
    └── SnapshotsUnsupportedError             the runtime cannot take or restore snapshots
```

A terminal whose connection is lost for good (not reached again within the reconnect budget)
raises `ServerError` (retryable): the cause is the network or the server, not the terminal.

Most `ConfigurationError`s are raised before any request; a few only when the server or the
sandbox tells (a refused API key, a working directory that cannot be made, a value the SDK
rejects). Path failures are the builtin `OSError` subclasses, errno set, so that callers can use
the `except` clauses they use for local files.

The boundary is `from_foreign()`, the one translator: exceptions of httpx, of the `opensandbox`
SDK (matched by `isinstance` on its exported exception classes), of the socket and TLS layers,
and `ExecdError`, the error answer of execd or of the server's proxy in front of it (raised by
`_wire._execd`), become these errors. SDK calls are wrapped in `translated()`, the context
manager that raises its result (as httpx maps httpcore's exceptions); calls on execd go through
the lifecycle's `fail`, which first asks the server whether the sandbox is gone when
`needs_gone_probe()` says the failure alone cannot tell. `is_lost_response()`,
`is_connect_error()` and `is_not_found()` answer the questions callers ask about a foreign
failure; `sandbox_not_found()` is the one text of a sandbox the server does not know, and
`GONE_STATES` the one set of its gone states. The texts (refused, unknown host, TLS, error
bodies, path errors: each names the address tried and the fix) are built in `_failures`.
Messages never contain the API key: they are built from ids, paths, addresses and status codes,
and any text quoted from the SDK or a server is scrubbed first.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import ssl
from collections.abc import Iterator
from typing import Any, Final, TypeVar

from ._failures import (
    address_of,
    code_of,
    describe_transport,
    key_sent_by_code,
    sdk_detail,
    status_detail,
    status_of,
)

# Re-exported: callers of the boundary import these from `_errors`.
from ._failures import body_text as body_text
from ._failures import is_connect_error as is_connect_error
from ._failures import is_lost_response as is_lost_response
from ._failures import is_not_found as is_not_found
from ._failures import new_path_error as new_path_error
from ._failures import os_error as os_error
from ._failures import parse_error_body as parse_error_body
from ._failures import path_error as path_error
from ._failures import scrub as scrub

# No `__all__`: the error tree is listed once, in the package's `__all__`.


class InsecureSandboxWarning(UserWarning):
    """Emitted once per process when no API key is configured for the OpenSandbox server."""


class OpenSandboxError(Exception):
    """Base class of every error raised by opensandbox-core (besides builtin path errors)."""


class ConfigurationError(OpenSandboxError, ValueError):
    """A setting or argument is invalid: most are raised before any request, a few only when the
    server or the sandbox tells (a refused API key, a working directory that cannot be made)."""


class AuthenticationError(ConfigurationError):
    """The server refused the API key (HTTP 401/403): a setting to fix, not a transient failure."""


class SandboxUnavailableError(OpenSandboxError):
    """The sandbox no longer exists, cannot be reached, or cannot be used.

    `sandbox_id` names the sandbox when it is known.
    """

    def __init__(self, message: str, *, sandbox_id: str | None = None) -> None:
        super().__init__(message)
        self.sandbox_id = sandbox_id


class UnsupportedDaemonError(SandboxUnavailableError):
    """The sandbox's execd is too old: its command output cannot be reconstructed."""


class CommandTimeoutError(OpenSandboxError, TimeoutError):
    """A command ran past its timeout and was stopped. The output it printed until then is kept
    (`truncated`: the output cap cut `stdout` or `stderr`)."""

    def __init__(
        self,
        message: str,
        *,
        timeout: float,
        stdout: str = "",
        stderr: str = "",
        truncated: bool = False,
    ) -> None:
        super().__init__(message)
        self.timeout = timeout
        self.stdout = stdout
        self.stderr = stderr
        self.truncated = truncated


class OutputLimitError(OpenSandboxError):
    """Data to be returned exceeds the limit the caller set."""

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class NotTextError(OpenSandboxError, ValueError):
    """A file read as text is not UTF-8: `binary` when its first 8 KiB are not (a binary file),
    else the bytes of the page asked for are not. `path` names the file."""

    def __init__(self, message: str, *, path: str, binary: bool) -> None:
        super().__init__(message)
        self.path, self.binary = path, binary


class EditError(OpenSandboxError, ValueError):
    """`files.edit` found nothing to replace (`reason` "not_found") or `occurrences` matches
    where one was expected (`reason` "ambiguous"). `path` names the file; it is unchanged."""

    def __init__(self, message: str, *, path: str, reason: str, occurrences: int) -> None:
        super().__init__(message)
        self.path, self.reason, self.occurrences = path, reason, occurrences


class TerminalError(OpenSandboxError):
    """Base class of the interactive terminals' errors (`session.terminals`): the terminal
    cannot do what was asked (unknown id, its process ended, held elsewhere, out of time)."""


class TerminalNotFoundError(TerminalError, LookupError):
    """No terminal of this id in the sandbox: never made there, or closed (deleted)."""

    def __init__(self, message: str, *, terminal_id: str) -> None:
        super().__init__(message)
        self.terminal_id = terminal_id


class TerminalTimeoutError(TerminalError, TimeoutError):
    """A terminal's `expect` (or `wait`) ran out of time; `output` is what the terminal printed
    since the last match, which stays unread."""

    def __init__(self, message: str, *, output: bytes) -> None:
        super().__init__(message)
        self.output = output


class TerminalTakenOverError(TerminalError):
    """Another client took the terminal over (`terminals.attach` elsewhere): this handle has
    lost it for good; the terminal itself runs on."""


class TerminalClosedError(TerminalError, EOFError):
    """The terminal's process has ended (`exit_code`: its code, None when unknown), or this
    handle was closed or detached. `output` is what was printed since the last match and not
    read (for `expect`)."""

    def __init__(self, message: str, *, exit_code: int | None, output: bytes = b"") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.output = output


class TerminalBusyError(TerminalError):
    """Another client holds the terminal, and this execd cannot take a terminal over (v1.0.18
    and older): the other handle must detach or close first. `status_code` is execd's 409.
    Not a `ServerError`: nothing failed, the terminal is in use (a later try may succeed)."""

    def __init__(self, message: str, *, status_code: int = 409) -> None:
        super().__init__(message)
        self.status_code = status_code


class ServerError(OpenSandboxError):
    """The server or the daemon reported a failure that is not one of the cases above.

    `status_code` is the HTTP status (None for transport failures); `retryable` says whether
    repeating the same call may succeed (rate limits, 502/503/504, dropped connections).
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, retryable: bool = False
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retryable = retryable


class ExecdError(Exception):
    """An error answer of execd, or of the server's proxy in front of it (raised by `_wire`).

    Not one of this project's errors: the facets read it to decide what a refusal means for
    them (`status`, execd's `code`, the scrubbed `message`, whether the answer is `from_execd`
    or from a proxy), and `from_foreign` translates what they do not handle. `address` is
    `scheme://host:port` of the request that got the answer.
    """

    def __init__(self, status: int, code: str, message: str, *, from_execd: bool, address: str):
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.from_execd = from_execd
        self.address = address


GONE_STATES: Final = frozenset({"terminated", "failed", "stopping", "deleted", "deleting", "error"})
"""The states (lower case) in which the server reports a sandbox gone: it will not run again."""


def is_gone_state(state: object) -> bool:
    """Whether a state the server reports (`Running`, `SandboxState.TERMINATED`, ...) is gone."""
    return str(state or "").rsplit(".", 1)[-1].lower() in GONE_STATES


def sandbox_not_found(sandbox_id: str, hint: str = "") -> SandboxUnavailableError:
    """The error for a sandbox the server does not know (any more): the one text of it."""
    text = f"Sandbox {sandbox_id} was not found: it was deleted or has expired. {hint}"
    return SandboxUnavailableError(text.rstrip(), sandbox_id=sandbox_id)


_RETRYABLE_STATUS = frozenset({408, 425, 429, 502, 503, 504})
# -- the boundary: foreign exceptions in, the project's errors out ------------------------------

_KEY_FIX = (
    "Set OPEN_SANDBOX_API_KEY (or pass api_key=...) to the value of the server's [server] api_key."
)


def _sdk_exceptions() -> Any:
    """The SDK's exported exception module (imported late: importing the core stays cheap)."""
    from opensandbox import exceptions

    return exceptions


_E = TypeVar("_E", bound=BaseException)


def _with_cause(error: _E, cause: BaseException | None) -> _E:
    """`error` caused by `cause` (None: by nothing, as `raise ... from None`), with any loop in
    the cause's chain cut where it closes."""
    seen = {id(error)}
    current: BaseException | None = cause
    while current is not None:
        seen.add(id(current))
        following = current.__cause__ or current.__context__
        if following is not None and id(following) in seen:
            current.__cause__ = current.__context__ = None
            break
        current = following
    error.__cause__ = cause
    error.__suppress_context__ = True
    return error


def needs_gone_probe(exc: BaseException, *, path: str | None = None) -> bool:
    """Whether the error for `exc` depends on whether the sandbox still exists: False when the
    failure says what happened by itself (an error of ours, a path error, execd refusing the
    request, a refused API key), True when it may mean the sandbox is gone (no answer, a server
    error, a proxy's answer). The caller then asks and passes `gone=` to `from_foreign`."""
    return _settled(exc, operation="", sandbox_id=None, path=path) is None


def from_foreign(
    exc: BaseException,
    *,
    operation: str,
    address: str | None = None,
    sandbox_id: str | None = None,
    path: str | None = None,
    gone: bool = False,
    detail: str | None = None,
) -> OpenSandboxError | OSError:
    """The project's error for a failure of httpx, the SDK, the socket layer or execd.

    `operation` says what was attempted ("create a sandbox"); `address` is the server's
    `Connection.display_address()` (the address of the request in the chain wins when there is
    one). For calls on a sandbox's execd: `path` maps execd's path errors to builtin ones;
    `gone` (the lifecycle asked, see `needs_gone_probe`) makes a failure that does not speak for
    itself a `SandboxUnavailableError`; `detail` says what is known of a call that failed half
    way (a cut command stream) and replaces the transport's own description.
    The result's `__cause__` is `exc`: raise it as is (`raise from_foreign(...)`, no `from`),
    which keeps the chain free of loops. An error of this project, and a builtin path error
    (an `OSError` that is not a network failure), is returned unchanged.
    """
    settled = _settled(exc, operation=operation, sandbox_id=sandbox_id, path=path)
    if settled is not None:
        return settled
    inside = f"Could not {operation} in sandbox {sandbox_id}"
    if gone:
        return _with_cause(
            SandboxUnavailableError(
                f"Sandbox {sandbox_id} is gone (deleted, expired or its daemon died): "
                f"could not {operation}.",
                sandbox_id=sandbox_id,
            ),
            exc,
        )
    if detail is not None:
        return _with_cause(ServerError(f"{inside}: {detail}", retryable=False), exc)
    if isinstance(exc, ExecdError):
        there = f" ({exc.address})" if exc.address and not exc.from_execd else ""
        return _with_cause(
            ServerError(
                f"{inside}: HTTP {exc.status} {exc.message}{there}".rstrip(),
                status_code=exc.status,
                retryable=exc.status in _RETRYABLE_STATUS,
            ),
            exc,
        )
    return _from_library(exc, operation=operation, address=address, sandbox_id=sandbox_id)


@contextlib.contextmanager
def translated(
    operation: str, *, sandbox_id: str | None = None, address: str | None = None
) -> Iterator[None]:
    """Raise what fails inside as the project's error (`from_foreign`), the way httpx maps
    httpcore's exceptions: `with translated("list sandboxes"): await sdk_call()`. In an
    `except` clause, `with translated(...): raise` raises the exception being handled so."""
    try:
        yield
    except Exception as exc:
        error = from_foreign(exc, operation=operation, sandbox_id=sandbox_id, address=address)
        if error is exc:
            raise
        raise error from error.__cause__


def _settled(
    exc: BaseException, *, operation: str, sandbox_id: str | None, path: str | None
) -> OpenSandboxError | OSError | None:
    """The error a failure decides by itself, whatever the sandbox's state; None otherwise."""
    if isinstance(exc, OpenSandboxError) or (isinstance(exc, OSError) and not _is_network(exc)):
        return exc
    if not isinstance(exc, ExecdError):
        return None
    if exc.status in (401, 403) and "API_KEY" in exc.code.upper():  # the proxy refused the key
        where = f" in sandbox {sandbox_id}" if sandbox_id else ""
        key_sent = key_sent_by_code(exc.code.upper())
        return _with_cause(
            _for_status(exc.status, exc.message, f"Could not {operation}{where}", None, key_sent),
            None,
        )
    if not exc.from_execd:
        return None
    if path is not None:
        mapped = path_error(exc.message, path)
        if mapped is None and exc.status == 404:
            mapped = new_path_error(FileNotFoundError, errno.ENOENT, path)
        if mapped is not None:
            return _with_cause(mapped, None)
    if exc.status < 500 and exc.status != 404:  # execd refused the request itself
        return _with_cause(
            ServerError(
                f"Could not {operation} in sandbox {sandbox_id}: {exc.message}",
                status_code=exc.status,
            ),
            None,
        )
    return None


def _is_network(exc: OSError) -> bool:
    return isinstance(exc, ssl.SSLError | ConnectionError | socket.gaierror | TimeoutError) and (
        exc.filename is None  # a TimeoutError that names a path is a path error of ours
    )


def _from_library(
    exc: BaseException, *, operation: str, address: str | None, sandbox_id: str | None
) -> OpenSandboxError:
    """The error for an exception of the SDK, httpx or the socket and TLS layers."""
    where = f" (sandbox {sandbox_id})" if sandbox_id else ""
    prefix = f"Could not {operation}{where}"
    sdk = _sdk_exceptions()
    if isinstance(exc, sdk.InvalidArgumentException):  # the SDK refused a value (ValueError)
        return _with_cause(ConfigurationError(f"{prefix}: {sdk_detail(exc)}"), exc)
    status = status_of(exc)
    if status is not None:
        key_sent = key_sent_by_code(code_of(exc))
        return _with_cause(
            _for_status(status, status_detail(exc), prefix, sandbox_id, key_sent), exc
        )
    transport = describe_transport(exc, address_of(exc, address))
    if transport is not None:
        text, retryable = transport
        return _with_cause(ServerError(f"{prefix}: {text}", retryable=retryable), exc)
    if isinstance(exc, sdk.SandboxException):
        code = str(getattr(exc.error, "code", "") or "")
        return _with_cause(
            ServerError(
                f"{prefix}: {sdk_detail(exc)}" + (f" [{code}]" if code else ""),
                retryable=bool(exc.is_retryable),
            ),
            exc,
        )
    detail = scrub(str(exc).strip() or type(exc).__name__)[:300]
    return _with_cause(ServerError(f"{prefix}: {detail}"), exc)


def _for_status(
    status: int, detail: str, prefix: str, sandbox_id: str | None, key_sent: bool | None
) -> OpenSandboxError:
    if status in (401, 403):
        if key_sent is False:
            return AuthenticationError(
                f"{prefix}: the server requires an API key and none was sent (HTTP {status}). "
                f"{_KEY_FIX}"
            )
        if key_sent is None:
            return AuthenticationError(
                f"{prefix}: the server refused the request as not authenticated (HTTP {status}): "
                f"no API key was sent, or it is not the server's. {_KEY_FIX}"
            )
        return AuthenticationError(
            f"{prefix}: the server refused the API key (HTTP {status}). {_KEY_FIX}"
        )
    if status == 404 and sandbox_id is not None:
        return sandbox_not_found(sandbox_id)
    return ServerError(
        f"{prefix}: HTTP {status}: {detail}",
        status_code=status,
        retryable=status in _RETRYABLE_STATUS,
    )
