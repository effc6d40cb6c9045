"""What every doctor check gets: the options, the server's address, and memoized probes.

A check never reads what another check left behind. It asks the context, which makes each probe
(the `/health` answer, a listing with and without the key, the test sandbox) at most once per run
and hands every check the same answer, whatever order the checks run in.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, Literal, TypeVar

import httpx

from opensandbox_core import _errors
from opensandbox_core._config import Connection
from opensandbox_core._metadata import DOCTOR_KEY
from opensandbox_core._session import AsyncSandboxSession
from opensandbox_core._wire._framing import Framing

__all__ = [
    "API_KEY_HEADER",
    "DEFAULT_IMAGE",
    "DEFAULT_STALE_AFTER",
    "DOCTOR_KEY",
    "CheckResult",
    "DoctorContext",
    "DoctorOptions",
    "Outcome",
    "Probe",
    "SandboxOutcome",
    "Status",
    "format_age",
    "parse_duration",
]

Status = Literal["PASS", "WARN", "FAIL", "SKIP"]

API_KEY_HEADER: Final = "OPEN-SANDBOX-API-KEY"
DEFAULT_IMAGE: Final = "python:3.13-slim"
DEFAULT_STALE_AFTER: Final = timedelta(hours=1)

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_T = TypeVar("_T")


def parse_duration(text: str) -> timedelta:
    """`"90s"`, `"30m"`, `"2h"`, `"1d"`, `"1w"` or combinations such as `"1h30m"`."""
    compact = text.strip().lower().replace(" ", "")
    if not compact or _DURATION_PART.sub("", compact):
        raise ValueError(
            f"invalid duration {text!r}: use a number with a unit s, m, h, d or w (e.g. 2h, 1d)"
        )
    seconds = sum(float(n) * _UNITS[u] for n, u in _DURATION_PART.findall(compact))
    return timedelta(seconds=seconds)


def format_age(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check. `fix` says what to change when the status is WARN or FAIL."""

    name: str
    status: Status
    summary: str
    fix: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass(frozen=True)
class Outcome:
    """What a check function returns; the registry adds the name and the time it took."""

    status: Status
    summary: str
    fix: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DoctorOptions:
    """The doctor's settings. `remove_idle_for` removes sandboxes idle that long (see
    `opensandbox_core._admin` for the idle rule); `owner` narrows leftovers to one owner token."""

    domain: str | None = None
    api_key: str | None = field(default=None, repr=False)
    image: str = DEFAULT_IMAGE
    skip_sandbox: bool = False
    remove_idle_for: timedelta | None = None
    stale_after: timedelta = DEFAULT_STALE_AFTER
    match: dict[str, str] = field(default_factory=dict)
    owner: str | None = None
    include_no_expiry: bool = False
    request_timeout: float = 30.0
    transport: httpx.AsyncBaseTransport | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Probe:
    """One HTTP request's answer, or the transport error that stopped it."""

    response: httpx.Response | None
    error: httpx.HTTPError | None
    seconds: float

    @property
    def status(self) -> int | None:
        return self.response.status_code if self.response is not None else None


@dataclass(frozen=True)
class SandboxOutcome:
    """The doctor's test sandbox, or why it could not be created."""

    session: AsyncSandboxSession | None
    error: _errors.OpenSandboxError | None = None
    framing: Framing | None = None
    exact: bool = False


class DoctorContext:
    """Built once per run; see the module docstring. Construction does no I/O."""

    def __init__(self, options: DoctorOptions) -> None:
        self.options = options
        self.connection = Connection(
            domain=options.domain,
            api_key=options.api_key,
            request_timeout=options.request_timeout,
            transport=options.transport,
        )
        self.domain = self.connection.resolved_domain()
        self.key = self.connection.resolved_api_key()
        self.base = base_url(self.domain)
        self.token = uuid.uuid4().hex
        self._client: httpx.AsyncClient | None = None
        self._memo: dict[str, asyncio.Task[Any]] = {}
        self.created_sandboxes = False

    # -- plumbing ------------------------------------------------------------------------------
    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.base,
                timeout=self.options.request_timeout,
                transport=self.options.transport,
            )
        return self._client

    def headers(self, *, with_key: bool = True) -> dict[str, str]:
        return {API_KEY_HEADER: self.key} if with_key and self.key else {}

    def hide_key(self, text: str) -> str:
        """The text with the API key replaced (its prose, such as "the API key", is kept)."""
        return text.replace(self.key, "***") if self.key else text

    async def _once(self, name: str, make: Callable[[], Awaitable[_T]]) -> _T:
        task = self._memo.get(name)
        if task is None:
            task = asyncio.ensure_future(make())
            self._memo[name] = task
        result: _T = await asyncio.shield(task)
        return result

    async def request(self, method: str, path: str, **kwargs: Any) -> Probe:
        client = self.client  # made outside the timing: loading the CA bundle is slow
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            response = await client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            return Probe(None, exc, loop.time() - started)
        return Probe(response, None, loop.time() - started)

    # -- memoized probes -----------------------------------------------------------------------
    async def health(self) -> Probe:
        return await self._once("health", lambda: self.request("GET", "/health"))

    async def reachable(self) -> bool:
        probe = await self.health()
        return probe.status == 200 and not looks_like_html(probe.response)

    async def listing(self, *, with_key: bool) -> Probe:
        """`GET /v1/sandboxes` with the key given (if any), or without a key."""
        return await self._once(
            f"listing-{with_key}",
            lambda: self.request("GET", "/v1/sandboxes", headers=self.headers(with_key=with_key)),
        )

    async def api_access(self) -> str | None:
        """None when the API can be used as configured, else why not (a sentence)."""
        if self.key:
            probe = await self.listing(with_key=True)
            if probe.status in (401, 403):
                return "the API key given is refused (see the api-key check)"
            return None
        probe = await self.listing(with_key=False)
        if probe.status in (401, 403):
            return (
                "the server needs an API key and none was given: pass --api-key or set "
                "OPEN_SANDBOX_API_KEY"
            )
        return None

    async def sandbox(self) -> SandboxOutcome:
        from ._sandbox import create_test_sandbox

        self.created_sandboxes = True
        return await self._once("sandbox", lambda: create_test_sandbox(self))

    async def aclose(self) -> None:
        """Remove everything this run created (its sandbox, any probe sandbox) and disconnect."""
        task = self._memo.get("sandbox")
        if task is not None and not task.done():  # interrupted while creating it
            task.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task
        if task is not None and task.done() and not task.cancelled() and not task.exception():
            outcome: SandboxOutcome = task.result()
            if outcome.session is not None:
                with contextlib.suppress(Exception):
                    await outcome.session.destroy()
        if self.created_sandboxes:
            await self.remove_own_sandboxes()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()

    async def remove_own_sandboxes(self) -> None:
        from opensandbox_core._fleet._admin import destroy_sandbox, list_sandboxes

        with contextlib.suppress(Exception):
            for summary in await list_sandboxes(self.connection, metadata={DOCTOR_KEY: self.token}):
                with contextlib.suppress(Exception):
                    await destroy_sandbox(summary.id, self.connection)


def base_url(domain: str) -> str:
    if domain.lower().startswith(("http://", "https://")):
        return domain.rstrip("/")
    return f"http://{domain}".rstrip("/")


def looks_like_html(response: httpx.Response | None) -> bool:
    if response is None:
        return False
    return "html" in response.headers.get("content-type", "").lower()
