"""Checks of the server itself: reachable, api-key, authentication, cors, proxy-routes."""

from __future__ import annotations

import ipaddress
from typing import Final
from urllib.parse import urlsplit

from opensandbox_core._defaults import ENV_API_KEY

from ._context import API_KEY_HEADER, DoctorContext, Outcome, Probe, looks_like_html
from ._diagnose import describe_transport_error

__all__ = [
    "FOREIGN_ORIGIN",
    "check_api_key",
    "check_authentication",
    "check_cors",
    "check_proxy_routes",
    "check_reachable",
]

FOREIGN_ORIGIN: Final = "https://opensandbox-doctor.invalid"
KEY_FIX: Final = (
    f"pass the value of [server] api_key from the server's config as --api-key or {ENV_API_KEY}"
)


def _transport_failure(ctx: DoctorContext, probe: Probe, status: str = "FAIL") -> Outcome:
    assert probe.error is not None
    summary, fix = describe_transport_error(probe.error, ctx.base, ctx.options.request_timeout)
    return Outcome("FAIL" if status == "FAIL" else "WARN", summary, fix)


def _is_loopback(base_url: str) -> bool:
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def check_reachable(ctx: DoctorContext) -> Outcome:
    probe = await ctx.health()
    if probe.response is None:
        return _transport_failure(ctx, probe)
    response = probe.response
    if looks_like_html(response):
        return Outcome(
            "FAIL",
            f"{ctx.base}/health answered HTTP {response.status_code} with an HTML page: another "
            "web server listens there, not an opensandbox-server",
            "set --domain / OPEN_SANDBOX_DOMAIN to the opensandbox-server's host:port",
        )
    if response.status_code == 400 and "https" in response.text.lower():
        return Outcome(
            "FAIL",
            f"{ctx.base}/health answered HTTP 400: the port expects TLS",
            f"give the domain as https://{urlsplit(ctx.base).netloc}",
        )
    if response.status_code != 200:
        return Outcome(
            "FAIL",
            f"{ctx.base}/health answered HTTP {response.status_code}",
            "check that --domain points at an opensandbox-server (not another service, and "
            "without a path) and read the server's log",
        )
    ms = probe.seconds * 1000
    return Outcome("PASS", f"{ctx.base}/health answered in {ms:.0f} ms", data={"ms": ms})


async def check_api_key(ctx: DoctorContext) -> Outcome:
    if not ctx.key:
        return Outcome("SKIP", f"no API key given (--api-key or {ENV_API_KEY})")
    probe = await ctx.listing(with_key=True)
    if probe.response is None:
        return _transport_failure(ctx, probe)
    status = probe.response.status_code
    if status == 200:
        return Outcome("PASS", "the server accepts the API key given")
    if status in (401, 403):
        return Outcome("FAIL", f"the server refuses the API key given (HTTP {status})", KEY_FIX)
    return Outcome("FAIL", f"GET /v1/sandboxes answered HTTP {status}", "read the server's log")


async def check_authentication(ctx: DoctorContext) -> Outcome:
    probe = await ctx.listing(with_key=False)
    if probe.response is None:
        return _transport_failure(ctx, probe)
    status = probe.response.status_code
    if status in (401, 403):
        return Outcome("PASS", f"a request without an API key is refused (HTTP {status})")
    if status == 200:
        return Outcome(
            "FAIL",
            "the API answers requests without an API key (GET /v1/sandboxes: 200): anyone "
            "who reaches the port can create sandboxes and run commands in them",
            '[server] api_key = "<a long random string>" in the server\'s config (and pass '
            f"it to clients as {ENV_API_KEY}); never set OPENSANDBOX_INSECURE_SERVER=YES "
            "outside throwaway tests",
        )
    return Outcome(
        "WARN",
        f"GET /v1/sandboxes without a key answered HTTP {status}, neither 401 nor 200",
        "read the server's log",
    )


async def check_cors(ctx: DoctorContext) -> Outcome:
    probe = await ctx.request(
        "OPTIONS",
        "/v1/sandboxes",
        headers={
            "Origin": FOREIGN_ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": API_KEY_HEADER.lower(),
        },
    )
    if probe.response is None:
        return _transport_failure(ctx, probe)
    headers = probe.response.headers
    allowed = headers.get("access-control-allow-origin", "")
    if allowed not in ("*", FOREIGN_ORIGIN):
        return Outcome("PASS", "a foreign browser origin is not allowed")
    credentials = ", with credentials" if headers.get("access-control-allow-credentials") else ""
    summary = (
        f"every browser origin is allowed (a preflight from {FOREIGN_ORIGIN} got "
        f"Access-Control-Allow-Origin: {allowed}{credentials})"
    )
    fix = (
        "opensandbox-server 1.1.1 hard-codes allow-all CORS (no config key): put it behind a "
        "reverse proxy that drops requests carrying a foreign Origin header, keep it bound to "
        "127.0.0.1, and keep [server] api_key set"
    )
    anonymous = await ctx.listing(with_key=False)
    if anonymous.status in (401, 403):
        return Outcome(
            "WARN",
            summary + "; the API key still stops a web page that does not know it",
            fix,
            {"allow_origin": allowed},
        )
    return Outcome(
        "FAIL",
        summary + "; without an API key any web page open in a browser on this machine can "
        "drive the API from JavaScript",
        fix,
        {"allow_origin": allowed},
    )


async def check_proxy_routes(ctx: DoctorContext) -> Outcome:
    probe = await ctx.request("GET", f"/v1/sandboxes/osb-doctor-{ctx.token[:12]}/proxy/44772/ping")
    if probe.response is None:
        return _transport_failure(ctx, probe, status="WARN")
    status = probe.response.status_code
    if status in (401, 403):
        return Outcome("PASS", "the sandbox proxy routes require the API key")
    summary = (
        f"the sandbox proxy routes (/v1/sandboxes/<id>/proxy/...) do not check the API key "
        f"(HTTP {status} without one): whoever reaches the server and knows a sandbox id can "
        "run commands in it"
    )
    if _is_loopback(ctx.base):
        return Outcome(
            "PASS", summary + "; the server is reached on loopback only", data={"loopback": True}
        )
    return Outcome(
        "WARN",
        summary + f"; {urlsplit(ctx.base).hostname} is not a loopback address",
        "bind the server to 127.0.0.1 ([server] host), or put it behind an authenticating "
        "reverse proxy / firewall; treat sandbox ids as secrets",
        {"loopback": False},
    )
