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

`translate()` is the only function that looks at exceptions raised by the `opensandbox` SDK or by
httpx; every module that calls either routes failures through it, always with `raise ... from`.
Messages never contain the API key: they are built from ids, paths and status codes only, and the
SDK's own message text is scrubbed before it is quoted.
"""

from __future__ import annotations

import errno
import re
from typing import NoReturn

import httpx

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
_SECRETISH = re.compile(r"(?i)(api[-_ ]?key|authorization|token)([\"':= ]+)([^\s\"',}]+)")


def scrub(text: str, *secrets: str | None) -> str:
    """Remove secrets from text that is about to be shown to a user."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _SECRETISH.sub(r"\1\2***", text)


def _sdk_types() -> tuple[type[BaseException], ...]:
    from opensandbox.exceptions import SandboxException

    return (SandboxException,)


def is_not_found(exc: BaseException) -> bool:
    """Whether a foreign exception says that the sandbox (or resource) does not exist."""
    status = getattr(exc, "status_code", None)
    if status is None and isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
    if status == 404:
        return True
    code = str(getattr(getattr(exc, "error", None), "code", "") or "")
    return "NOT_FOUND" in code.upper()


def translate(exc: BaseException, *, action: str, sandbox_id: str | None = None) -> NoReturn:
    """Raise the opensandbox-core error that corresponds to a foreign exception.

    `action` is a short description of what was attempted ("create a sandbox"); it becomes the
    start of the message. This function never returns.
    """
    where = f" (sandbox {sandbox_id})" if sandbox_id else ""
    if isinstance(exc, OpenSandboxError | OSError):
        raise exc
    if isinstance(exc, httpx.TimeoutException):
        raise ServerError(
            f"Could not {action}{where}: the request timed out ({type(exc).__name__}).",
            retryable=True,
        ) from exc
    if isinstance(exc, httpx.TransportError):
        raise ServerError(
            f"Could not {action}{where}: the connection failed ({type(exc).__name__}). "
            "Check that the OpenSandbox server is running and OPEN_SANDBOX_DOMAIN is right.",
            retryable=True,
        ) from exc
    if isinstance(exc, httpx.HTTPStatusError):
        _raise_for_status(
            exc.response.status_code, _body_message(exc.response), action, where, sandbox_id, exc
        )
    if isinstance(exc, _sdk_types()):
        status = getattr(exc, "status_code", None)
        code = str(getattr(getattr(exc, "error", None), "code", "") or "")
        detail = scrub(str(getattr(getattr(exc, "error", None), "message", "") or exc))
        name = type(exc).__name__
        if name == "InvalidArgumentException":
            raise ConfigurationError(f"Could not {action}{where}: {detail}") from exc
        if status is not None:
            _raise_for_status(status, detail, action, where, sandbox_id, exc)
        if name in {"SandboxTimeoutException", "SandboxConnectionException"}:
            raise ServerError(f"Could not {action}{where}: {detail}", retryable=True) from exc
        if name in {"SandboxReadyTimeoutException", "SandboxUnhealthyException"}:
            raise SandboxUnavailableError(
                f"Could not {action}{where}: the sandbox did not become ready ({detail}).",
                sandbox_id=sandbox_id,
            ) from exc
        raise ServerError(
            f"Could not {action}{where}: {detail}" + (f" [{code}]" if code else ""),
            retryable=bool(getattr(exc, "is_retryable", False)),
        ) from exc
    raise exc


def _body_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except Exception:
        text = response.text if not response.is_stream_consumed or response.content else ""
        if text.lstrip()[:1] == "<":
            # Some other web server's page (a proxy, a dashboard): its HTML helps nobody.
            return (
                f"the answer is an HTML page ({len(text)} characters), not OpenSandbox's JSON: "
                "check that the domain is the OpenSandbox server's address and port"
            )
        return scrub(text[:300])
    if isinstance(data, dict):
        return scrub(str(data.get("message") or data.get("detail") or data)[:300])
    return scrub(str(data)[:300])


def _raise_for_status(
    status: int,
    detail: str,
    action: str,
    where: str,
    sandbox_id: str | None,
    exc: BaseException,
) -> NoReturn:
    if status in (401, 403):
        raise AuthenticationError(
            f"Could not {action}{where}: the server refused the API key (HTTP {status}). "
            "Set OPEN_SANDBOX_API_KEY (or pass api_key) to the server's [server] api_key."
        ) from exc
    if status == 404 and sandbox_id is not None:
        raise SandboxUnavailableError(
            f"Sandbox {sandbox_id} was not found: it was deleted or has expired.",
            sandbox_id=sandbox_id,
        ) from exc
    raise ServerError(
        f"Could not {action}{where}: HTTP {status}: {detail}",
        status_code=status,
        retryable=status in _RETRYABLE_STATUS,
    ) from exc


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
