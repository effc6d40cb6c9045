"""The one error tree of opensandbox-core, and the one place that translates foreign exceptions.

```
OpenSandboxError
├── ConfigurationError (also ValueError)      bad settings or arguments, caught before any I/O
│   └── AuthenticationError                   the server refused the API key (401/403)
├── SandboxUnavailableError                   the sandbox is gone, unreachable or unusable
│   └── UnsupportedDaemonError                execd too old to reconstruct output (fix: newer image)
├── CommandTimeoutError (also TimeoutError)   a command outlived its timeout; carries partial output
├── OutputLimitError                          a read exceeded the size limit the caller set
└── ServerError                               any other failure the server reported (has .status_code)
```

Path failures are raised as the builtin exceptions (`FileNotFoundError`, `IsADirectoryError`,
`NotADirectoryError`, `PermissionError`, `FileExistsError`) so that callers can use the same
`except` clauses they use for local files.

The boundary: `from_foreign()` (exceptions of httpx, of the `opensandbox` SDK, matched by
`isinstance` on its exported exception classes, and of the socket and TLS layers) and
`from_execd_response()` (error answers of execd or of the server's proxy) are the only functions
that turn foreign failures into these errors; `is_lost_response()`, `is_connect_error()` and
`is_not_found()` answer the questions callers ask about a foreign failure. Connection errors name
the address tried (`scheme://host:port`) and the setting to check. `translate()` is the raising
form of `from_foreign()` kept for older call sites. The texts that describe a failed request
(refused, unknown host, TLS, error bodies) are built in `_failures`, which the doctor shares.
Messages never contain the API key: they are built from ids, paths, addresses and status codes,
and any text quoted from the SDK or a server is scrubbed first.
"""

from __future__ import annotations

import errno
import socket
import ssl
from typing import Any, NoReturn

import httpx

from ._failures import address_of, body_message, chain, describe_transport, key_was_sent

# Re-exported: callers of the boundary import these from `_errors`.
from ._failures import body_text as body_text
from ._failures import is_connect_error as is_connect_error
from ._failures import parse_error_body as parse_error_body
from ._failures import scrub as scrub

_body_message = body_message  # the name older tests import

__all__ = [
    "AuthenticationError",
    "CommandTimeoutError",
    "ConfigurationError",
    "InsecureSandboxWarning",
    "OpenSandboxError",
    "OutputLimitError",
    "SandboxUnavailableError",
    "ServerError",
    "UnsupportedDaemonError",
]


class InsecureSandboxWarning(UserWarning):
    """Emitted once per process when no API key is configured for the OpenSandbox server."""


class OpenSandboxError(Exception):
    """Base class of every error raised by opensandbox-core (besides builtin path errors)."""


class ConfigurationError(OpenSandboxError, ValueError):
    """A setting or argument is invalid. Raised before any request is sent."""


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


_RETRYABLE_STATUS = frozenset({408, 425, 429, 502, 503, 504})
# -- the boundary: foreign exceptions in, the project's errors out ------------------------------

_KEY_FIX = (
    "Set OPEN_SANDBOX_API_KEY (or pass api_key=...) to the value of the server's [server] api_key."
)


def _sdk_exceptions() -> Any:
    """The SDK's exported exception module (imported late: importing the core stays cheap)."""
    from opensandbox import exceptions

    return exceptions


def is_lost_response(exc: BaseException) -> bool:
    """Whether the request may have reached the server although no answer came back.

    True for timeouts after sending, dropped connections and 502/503/504 (a create may then have
    created a sandbox); False when the connection was never made.
    """
    if is_connect_error(exc):
        return False
    sdk = _sdk_exceptions()
    lost = (
        httpx.TimeoutException,
        httpx.RemoteProtocolError,
        httpx.ReadError,
        TimeoutError,
        sdk.SandboxTimeoutException,
        sdk.SandboxConnectionException,
    )
    for item in chain(exc):
        if isinstance(item, lost):
            return True
        if _status_of(item) in (502, 503, 504):
            return True
    return False


def _status_of(exc: BaseException) -> int | None:
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_not_found(exc: BaseException) -> bool:
    """Whether a foreign exception says that the sandbox (or resource) does not exist."""
    if _status_of(exc) == 404:
        return True
    code = str(getattr(getattr(exc, "error", None), "code", "") or "")
    return "NOT_FOUND" in code.upper()


def _with_cause(error: OpenSandboxError, cause: BaseException) -> OpenSandboxError:
    """`error` caused by `cause`, with any loop in the cause's chain cut where it closes."""
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


def from_foreign(
    exc: BaseException,
    *,
    operation: str,
    address: str | None = None,
    sandbox_id: str | None = None,
    key_sent: bool | None = None,
) -> OpenSandboxError:
    """The project's error for an exception raised by httpx, the SDK or the socket layer.

    `operation` says what was attempted ("create a sandbox"); `address` is the server's
    `Connection.display_address()` (the address of the request in the chain wins when there is
    one); `key_sent` says whether an API key went with the request, when the caller knows.
    The result's `__cause__` is `exc`: raise it as is (`raise from_foreign(...)`, no `from`),
    which keeps the chain free of loops. An error of this project is returned unchanged.
    Builtin path errors that this project raises itself are not foreign: re-raise them instead.
    """
    if isinstance(exc, OpenSandboxError):
        return exc
    where = f" (sandbox {sandbox_id})" if sandbox_id else ""
    prefix = f"Could not {operation}{where}"
    at = address_of(exc, address)
    sdk = _sdk_exceptions()
    if isinstance(exc, sdk.InvalidArgumentException):
        return _with_cause(ConfigurationError(f"{prefix}: {_sdk_detail(exc)}"), exc)
    if isinstance(exc, sdk.SandboxReadyTimeoutException | sdk.SandboxUnhealthyException):
        return _with_cause(
            SandboxUnavailableError(
                f"{prefix}: the sandbox did not become ready ({_sdk_detail(exc)}).",
                sandbox_id=sandbox_id,
            ),
            exc,
        )
    status = _status_of(exc)
    if status is not None:
        if key_sent is None:
            key_sent = key_was_sent(exc)
        if key_sent is None:
            # OpenSandbox's server says which: MISSING_API_KEY or INVALID_API_KEY.
            code = str(getattr(getattr(exc, "error", None), "code", "") or "").upper()
            key_sent = False if "MISSING" in code else True if "INVALID" in code else None
        return _with_cause(
            _for_status(status, _status_detail(exc), prefix, sandbox_id, key_sent), exc
        )
    transport = describe_transport(exc, at)
    if transport is not None:
        text, retryable = transport
        return _with_cause(ServerError(f"{prefix}: {text}", retryable=retryable), exc)
    if isinstance(exc, sdk.SandboxException):
        code = str(getattr(exc.error, "code", "") or "")
        return _with_cause(
            ServerError(
                f"{prefix}: {_sdk_detail(exc)}" + (f" [{code}]" if code else ""),
                retryable=bool(exc.is_retryable),
            ),
            exc,
        )
    detail = scrub(str(exc).strip() or type(exc).__name__)[:300]
    return _with_cause(ServerError(f"{prefix}: {detail}"), exc)


def _sdk_detail(exc: BaseException) -> str:
    message = getattr(getattr(exc, "error", None), "message", None)
    text = str(message) if message else (str(exc.args[0]) if exc.args else type(exc).__name__)
    return scrub(text.strip())[:300]


def _status_detail(exc: BaseException) -> str:
    if isinstance(exc, httpx.HTTPStatusError):
        return body_message(exc.response)
    body = getattr(exc, "response_body", None)
    if isinstance(body, bytes) and body:
        return body_text(body)
    return _sdk_detail(exc)


def from_execd_response(
    status: int,
    body: bytes,
    *,
    operation: str,
    address: str | None,
    sandbox_id: str | None,
) -> OpenSandboxError:
    """The project's error for an error answer of execd (or of the server's proxy in front of it).

    Path errors are not decided here: callers map execd's texts with `path_error` first.
    """
    _code, message, from_execd = parse_error_body(body)
    where = f" in sandbox {sandbox_id}" if sandbox_id else ""
    if status in (401, 403):
        return _for_status(status, message, f"Could not {operation}{where}", sandbox_id, None)
    if status == 404 and not from_execd and sandbox_id is not None:
        return SandboxUnavailableError(
            f"Sandbox {sandbox_id} was not found: it was deleted or has expired.",
            sandbox_id=sandbox_id,
        )
    if from_execd and status < 500:
        return ServerError(f"Could not {operation}{where}: {message}", status_code=status)
    there = f" ({address})" if address else ""
    return ServerError(
        f"Could not {operation}{where}: HTTP {status} {message}{there}".rstrip(),
        status_code=status,
        retryable=status in _RETRYABLE_STATUS,
    )


def translate(
    exc: BaseException,
    *,
    action: str,
    sandbox_id: str | None = None,
    address: str | None = None,
    key_sent: bool | None = None,
) -> NoReturn:
    """Raise the error that corresponds to a foreign exception (`from_foreign`, raising).

    Kept for the call sites written before `from_foreign`; builtin path errors (and this
    project's errors) are re-raised unchanged.
    """
    if isinstance(exc, OpenSandboxError) or (isinstance(exc, OSError) and not _is_network(exc)):
        raise exc
    raise from_foreign(
        exc, operation=action, address=address, sandbox_id=sandbox_id, key_sent=key_sent
    )


def _is_network(exc: OSError) -> bool:
    return isinstance(exc, ssl.SSLError | ConnectionError | socket.gaierror | TimeoutError)


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
        return SandboxUnavailableError(
            f"Sandbox {sandbox_id} was not found: it was deleted or has expired.",
            sandbox_id=sandbox_id,
        )
    return ServerError(
        f"{prefix}: HTTP {status}: {detail}",
        status_code=status,
        retryable=status in _RETRYABLE_STATUS,
    )


# Go's os.PathError and syscall texts, as execd reports them, mapped to builtin exceptions.
_PATH_ERRORS: tuple[tuple[str, type[OSError], int], ...] = (
    ("no such file or directory", FileNotFoundError, errno.ENOENT),
    # execd v1.0.18: "error accessing file: file not found: X", "source path not found: X".
    ("file not found", FileNotFoundError, errno.ENOENT),
    ("path not found", FileNotFoundError, errno.ENOENT),
    ("not a directory", NotADirectoryError, errno.ENOTDIR),
    ("is a directory", IsADirectoryError, errno.EISDIR),
    ("permission denied", PermissionError, errno.EACCES),
    ("operation not permitted", PermissionError, errno.EPERM),
    ("file exists", FileExistsError, errno.EEXIST),
    ("directory not empty", OSError, errno.ENOTEMPTY),
    ("too many levels of symbolic links", OSError, errno.ELOOP),
    ("file name too long", OSError, errno.ENAMETOOLONG),
    ("read-only file system", PermissionError, errno.EROFS),
    ("no space left on device", OSError, errno.ENOSPC),
    ("invalid argument", OSError, errno.EINVAL),
)


def path_error(text: str, path: str) -> OSError | None:
    """The builtin OSError that a daemon error text describes for `path`, or None."""
    lowered = text.lower()
    for needle, cls, code in _PATH_ERRORS:
        if needle in lowered:
            return cls(code, _strerror(code), path)
    return None


def _strerror(code: int) -> str:
    import os

    return os.strerror(code)


def new_path_error(cls: type[OSError], code: int, path: str) -> OSError:
    """A builtin path error with errno, message and filename set like the local one."""
    return cls(code, _strerror(code), path)
