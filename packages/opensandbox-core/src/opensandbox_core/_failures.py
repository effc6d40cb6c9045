"""How a failed request is described: the pieces of the error boundary (`_errors`).

No exception classes of this project here (they are in `_errors`) and no I/O:

- `chain`, `find`: walk an exception's causes, each once even if they loop;
- `address_of`, `url_address`: where the request in a chain was sent (only `scheme://host:port`);
- `describe_transport`: what went wrong when no HTTP answer came (refused, unknown host, TLS to a
  plain-HTTP server, untrusted certificate, no answer in time, dropped connection), the fix, and
  whether retrying can help;
- `parse_error_body`, `body_text`, `body_message`, `html_hint`: what an error answer says, short
  and scrubbed (an HTML page is named, never pasted); `sdk_detail`, `status_detail`: what an SDK
  exception says; `key_sent_by_code`: whether the server's error code says an API key was sent;
- `path_error`, `os_error`, `new_path_error`: the builtin `OSError` (errno and filename set like
  the local one) that an error text of execd or of a file command names;
- `is_lost_response`, `is_not_found`, `status_of`, `code_of`: what a foreign failure says about
  the request (maybe served although unanswered; a missing resource; its status and code);
- `scrub`: remove secrets from text that is about to be shown.
"""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import ssl
from typing import Any

import httpx

__all__ = [
    "DNS_TEXTS",
    "DOMAIN_FIX",
    "PLAIN_HTTP_TEXTS",
    "address_of",
    "body_message",
    "body_text",
    "chain",
    "code_of",
    "describe_transport",
    "find",
    "html_hint",
    "is_connect_error",
    "is_lost_response",
    "is_not_found",
    "key_sent_by_code",
    "new_path_error",
    "os_error",
    "parse_error_body",
    "path_error",
    "scrub",
    "sdk_detail",
    "status_detail",
    "status_of",
    "url_address",
]

DOMAIN_FIX = (
    "Check that the OpenSandbox server is running there, or set OPEN_SANDBOX_DOMAIN (or "
    "domain=) to the host:port it listens on."
)
PLAIN_HTTP_TEXTS = ("wrong_version_number", "wrong version number", "record layer", "packet length")
"""Texts of an OpenSSL handshake that met a plain-HTTP answer."""
DNS_TEXTS = (
    "name or service not known",
    "nodename nor servname",
    "temporary failure in name resolution",
    "getaddrinfo failed",
    "no address associated",
)
"""Texts of a host name that could not be resolved (getaddrinfo's, on each system)."""
# getaddrinfo codes that say the name does not exist (as opposed to "try again").
_NO_SUCH_NAME = {
    getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA") if hasattr(socket, name)
}


_SECRETISH = re.compile(r"(?i)(api[-_ ]?key|authorization|token)([\"':= ]+)([^\s\"',}]+)")


def scrub(text: str, *secrets: str | None) -> str:
    """Remove secrets from text that is about to be shown to a user."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _SECRETISH.sub(r"\1\2***", text)


def chain(exc: BaseException) -> list[BaseException]:
    """`exc` and its causes (`__cause__`, else `__context__`), each once even if they loop."""
    out: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def find(exc: BaseException, kind: type[BaseException] | tuple[type[BaseException], ...]) -> Any:
    return next((e for e in chain(exc) if isinstance(e, kind)), None)


def address_of(exc: BaseException, fallback: str | None) -> str | None:
    """`scheme://host:port` of the request an httpx error in the chain was sending."""
    for item in chain(exc):
        if isinstance(item, httpx.RequestError | httpx.HTTPStatusError):
            try:
                url = item.request.url
            except RuntimeError:  # an error built without its request
                continue
            if url.host:
                return url_address(url)
    return fallback


def url_address(url: httpx.URL) -> str:
    """`scheme://host:port` of a URL: no path, query or credentials (they may hold secrets)."""
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}"


def is_connect_error(exc: BaseException) -> bool:
    """Whether the chain holds a failure to connect: the request never reached the server."""
    kinds = (httpx.ConnectError, httpx.ConnectTimeout, ConnectionRefusedError, socket.gaierror)
    return find(exc, kinds) is not None


def describe_transport(exc: BaseException, at: str | None) -> tuple[str, bool] | None:
    """(what happened and what to do, retryable) for a failure without an HTTP answer.

    `at` is the address tried (`scheme://host:port`); None when the chain holds no such failure.
    """
    there = f" at {at}" if at else ""
    ssl_error = find(exc, ssl.SSLError)
    if ssl_error is not None:
        return _describe_tls(exc, ssl_error, at), False
    if find(exc, httpx.ConnectTimeout) is not None:
        return (
            f"could not connect to the server{there} in time (no answer to the TCP "
            f"handshake). {DOMAIN_FIX}",
            True,
        )
    if find(exc, (httpx.TimeoutException, TimeoutError)) is not None:
        return (
            f"the server{there} accepted the connection but did not answer in time. "
            "It may be hung or overloaded (read its log), or another program holds the port.",
            True,
        )
    dns = find(exc, socket.gaierror)
    if dns is not None or mentions_dns(exc):
        missing = dns is None or dns.errno in _NO_SUCH_NAME
        return (
            f"the host of {at or 'the server address'} could not be resolved. Check "
            "the host name in OPEN_SANDBOX_DOMAIN (or domain=): it must be the OpenSandbox "
            "server's host:port.",
            not missing,
        )
    if is_connect_error(exc):
        return (
            f"nothing accepted the connection{there} (connection refused). {DOMAIN_FIX}",
            True,
        )
    if find(exc, (httpx.RemoteProtocolError, httpx.ReadError, ConnectionError)) is not None:
        tls = (
            " If the server uses TLS, write the domain as https://host:port."
            if at and at.startswith("http://")
            else ""
        )
        return (
            f"the server{there} closed the connection without an answer.{tls}",
            True,
        )
    if find(exc, httpx.TransportError) is not None:
        return (
            f"the connection{there} failed "
            f"({type(find(exc, httpx.TransportError)).__name__}). {DOMAIN_FIX}",
            True,
        )
    return None


def _describe_tls(exc: BaseException, ssl_error: ssl.SSLError, at: str | None) -> str:
    """What a failed TLS handshake means: plain HTTP on that port, an untrusted certificate."""
    there = f" at {at}" if at else ""
    text = " ".join(str(e) for e in chain(exc)).lower()
    reason = scrub(str(getattr(ssl_error, "reason", None) or ssl_error))[:200]
    if any(marker in text for marker in PLAIN_HTTP_TEXTS):
        plain = at.replace("https://", "", 1) if at else "host:port"
        return (
            f"the TLS handshake{there} failed ({reason}): the server probably speaks plain "
            f"http on that port. Drop https:// from OPEN_SANDBOX_DOMAIN (use {plain}), or "
            "put a TLS-terminating proxy in front of the server."
        )
    if "certificate" in text:
        return (
            f"the TLS certificate of the server{there} is not trusted ({reason}). Install "
            "its CA on this machine (SSL_CERT_FILE) or use a certificate a public CA signed."
        )
    return f"the TLS handshake{there} failed ({reason}): check that the server speaks TLS."


def mentions_dns(exc: BaseException) -> bool:
    text = " ".join(str(e) for e in chain(exc)).lower()
    return any(marker in text for marker in DNS_TEXTS)


def parse_error_body(body: bytes, *, limit: int | None = 500) -> tuple[str, str, bool]:
    """(code, message, from_execd) of an execd or proxy error body.

    execd's own error codes are upper snake case without a component prefix such as `DOCKER::`
    or `SANDBOX_`; errors of the server (or its proxy) carry one of those. The message is cut
    at `limit` characters (None: kept whole, for callers that match its end, such as the
    path-error mapping of a message that quotes a long path).
    """
    code, message, from_execd = "", body_text(body), False
    try:  # the first JSON value: execd's failed `POST /pty` sends a second one right after it
        data = json.JSONDecoder().raw_decode(body.decode("utf-8").lstrip())[0]
    except ValueError:
        data = None
    if isinstance(data, dict):
        detail = data.get("detail")
        if isinstance(detail, dict):  # FastAPI-style error from the server's proxy
            data = detail
        code = str(data.get("code") or "")
        message = scrub(str(data.get("message") or message))[:limit]
        from_execd = bool(code) and "::" not in code and not code.startswith("SANDBOX")
    return code, message, from_execd


def body_text(body: bytes) -> str:
    """What an error body says, short and scrubbed (an HTML page is named, not pasted)."""
    text = body[:4096].decode("utf-8", "replace")
    if text.lstrip()[:1] == "<":
        return html_hint(len(body))
    return scrub(text[:500])


def html_hint(size: int) -> str:
    # Some other web server's page (a proxy, a dashboard): its HTML helps nobody.
    return (
        f"the answer is an HTML page ({size} characters), not OpenSandbox's JSON: "
        "check that the domain is the OpenSandbox server's address and port"
    )


def body_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except Exception:
        text = response.text if not response.is_stream_consumed or response.content else ""
        if text.lstrip()[:1] == "<":
            return html_hint(len(text))
        return scrub(text[:300])
    if isinstance(data, dict):
        return scrub(str(data.get("message") or data.get("detail") or data)[:300])
    return scrub(str(data)[:300])


# Go's os.PathError and syscall texts, as execd reports them, mapped to builtin exceptions.
_PATH_ERRORS: tuple[tuple[str, type[OSError], int], ...] = (
    ("no such file or directory", FileNotFoundError, errno.ENOENT),
    # execd v1.0.18: "error accessing file: file not found: X", "source path not found: X".
    ("file not found", FileNotFoundError, errno.ENOENT),
    ("path not found", FileNotFoundError, errno.ENOENT),
    ("not a directory", NotADirectoryError, errno.ENOTDIR),
    # A shell redirection into a missing directory: dash "Directory nonexistent", busybox
    # ash "nonexistent directory".
    ("directory nonexistent", FileNotFoundError, errno.ENOENT),
    ("nonexistent directory", FileNotFoundError, errno.ENOENT),
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


def is_lost_response(exc: BaseException) -> bool:
    """Whether the request may have reached the server although no answer came back.

    True for timeouts after sending, dropped connections and 502/503/504 (a create may then have
    created a sandbox); False when the connection was never made.
    """
    if is_connect_error(exc):
        return False
    from opensandbox import exceptions as sdk  # late: importing the core stays cheap

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
        if status_of(item) in (502, 503, 504):
            return True
    return False


def status_of(exc: BaseException) -> int | None:
    """The HTTP status behind an httpx or SDK exception, if it has one."""
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def code_of(exc: BaseException) -> str:
    """The error code an SDK exception carries, upper case ('' when none)."""
    return str(getattr(getattr(exc, "error", None), "code", "") or "").upper()


def is_not_found(exc: BaseException) -> bool:
    """Whether a foreign exception says that the sandbox (or resource) does not exist."""
    return status_of(exc) == 404 or "NOT_FOUND" in code_of(exc)


def key_sent_by_code(code: str) -> bool | None:
    """Whether an API key was sent, as OpenSandbox's server says it: MISSING_API_KEY or
    INVALID_API_KEY (None when the code does not say)."""
    return False if "MISSING" in code else True if "INVALID" in code else None


def sdk_detail(exc: BaseException) -> str:
    """What an SDK exception says (its error's message, else its first argument), scrubbed."""
    message = getattr(getattr(exc, "error", None), "message", None)
    text = str(message) if message else (str(exc.args[0]) if exc.args else type(exc).__name__)
    return scrub(text.strip())[:300]


def status_detail(exc: BaseException) -> str:
    """What the answer behind an HTTP status exception (httpx's or the SDK's) says."""
    if isinstance(exc, httpx.HTTPStatusError):
        return body_message(exc.response)
    body = getattr(exc, "response_body", None)
    if isinstance(body, bytes) and body:
        return body_text(body)
    return sdk_detail(exc)


def path_error(text: str, path: str) -> OSError | None:
    """The builtin OSError that a daemon error text describes for `path`, or None."""
    lowered = text.lower()
    for needle, cls, code in _PATH_ERRORS:
        if needle in lowered:
            return new_path_error(cls, code, path)
    return None


def os_error(text: str, path: str, otherwise: str, *, code: int = errno.EIO) -> OSError:
    """The builtin OSError for a file command that failed with error text `text`: the path
    error the text describes, else `OSError(code, text or otherwise, path)`."""
    return path_error(text, path) or OSError(code, text or otherwise, path)


def new_path_error(cls: type[OSError], code: int, path: str) -> OSError:
    """A builtin path error with errno, message and filename set like the local one."""
    return cls(code, os.strerror(code), path)
