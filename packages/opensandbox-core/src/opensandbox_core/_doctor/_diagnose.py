"""Why a request to the server failed, and the fix, as the doctor reports it.

Each transport failure names the address tried and the one change most likely to fix it:
connection refused (start the server or point `OPEN_SANDBOX_DOMAIN` at it), an unknown host, a
server that accepts connections but never answers, and TLS spoken to a plain-HTTP server (or
the reverse).
"""

from __future__ import annotations

import ssl
from urllib.parse import urlsplit

import httpx

from opensandbox_core._defaults import ENV_DOMAIN
from opensandbox_core._failures import DNS_TEXTS, PLAIN_HTTP_TEXTS, chain, find

__all__ = ["describe_transport_error", "error_chain_text"]

DOMAIN_FIX = (
    f"start the server (opensandbox-server --config PATH) or set --domain / {ENV_DOMAIN} to "
    "where it listens (host:port, or https://host:port)"
)
_REFUSED = ("connection refused", "errno 111", "errno 61", "connect call failed")


def error_chain_text(exc: BaseException) -> str:
    """The messages of an exception and its causes, lower-cased (each exception once)."""
    return " | ".join(f"{type(e).__name__}: {e}" for e in chain(exc)).lower()


def _is_ssl(exc: BaseException) -> bool:
    return find(exc, ssl.SSLError) is not None or "ssl" in error_chain_text(exc)


def describe_transport_error(exc: httpx.HTTPError, base: str, timeout: float) -> tuple[str, str]:
    """(summary, fix) for a request to `base` that failed without an HTTP answer."""
    host = urlsplit(base).hostname or base
    https = base.lower().startswith("https://")
    text = error_chain_text(exc)
    if isinstance(exc, httpx.ConnectTimeout):
        return (
            f"could not connect to {base} within {timeout:g} s (the TCP handshake got no answer)",
            "check the host and port and any firewall in between; " + DOMAIN_FIX,
        )
    if isinstance(exc, httpx.TimeoutException):
        return (
            f"{base} accepted the connection but sent no answer within {timeout:g} s",
            "the server is hung or overloaded, or another program holds that port: read the "
            "server's log and restart it; raise --timeout only for a known slow server",
        )
    if _is_ssl(exc):
        if https and any(marker in text for marker in PLAIN_HTTP_TEXTS):
            return (
                f"the TLS handshake with {base} failed: the server answers plain HTTP on that port",
                f"drop https:// (set --domain / {ENV_DOMAIN} to {host}:{urlsplit(base).port or 443}"
                ") or put a TLS-terminating proxy in front of the server",
            )
        if "certificate" in text:
            return (
                f"the TLS certificate of {base} is not trusted ({_last_line(exc)})",
                "install the certificate's CA on this machine, or use a certificate a public "
                "CA signed",
            )
        return (
            f"the TLS handshake with {base} failed ({_last_line(exc)})",
            "check that the server speaks TLS on that port, or use http:// for a plain server",
        )
    if isinstance(exc, httpx.ConnectError):
        if any(marker in text for marker in DNS_TEXTS):
            return (f"the host {host!r} of {base} could not be resolved", DOMAIN_FIX)
        if any(marker in text for marker in _REFUSED):
            return (f"connection refused at {base}: nothing listens there", DOMAIN_FIX)
        return (f"could not connect to {base} ({_last_line(exc)})", DOMAIN_FIX)
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError) and not https:
        return (
            f"{base} closed the connection without an HTTP answer",
            f"if the server uses TLS, set --domain / {ENV_DOMAIN} to https://{urlsplit(base).netloc}"
            "; otherwise read the server's log",
        )
    return (f"the request to {base} failed ({_last_line(exc)})", "read the server's log")


def _last_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[-1][:200]
