"""`opensandbox-doctor`: check an OpenSandbox server, check by check, and say how to fix it.

```
opensandbox-doctor --domain 127.0.0.1:8080 --image python:3.13-slim
opensandbox-doctor --json --skip-sandbox
opensandbox-doctor --remove-older-than 2h
```

The domain and key fall back to `OPEN_SANDBOX_DOMAIN` and `OPEN_SANDBOX_API_KEY`; the key is never
printed. The exit status is 1 when any check fails, 0 otherwise (warnings included), 2 on bad usage.

Checks (in order): `reachable` (/health), `api-key` (the key given is accepted), `authentication`
(the API refuses a request without a key), `cors` (a foreign browser origin is not allowed),
`proxy-routes` (the server's sandbox proxy, which checks no key in single-tenant mode, is not
exposed beyond loopback), `docker-socket-mount` and `host-path-mount` (whether the server lets a
sandbox bind-mount the Docker socket's directory or an arbitrary host directory: probed with a
read-only mount request that is deleted at once if the server accepts it), `leftovers` (sandboxes
these packages created and left behind; `--remove-older-than` removes them), `execd-framing`,
`latency` and `throughput` (in one small sandbox). Everything the doctor creates is removed on
every path, including failures and Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import os
import re
import statistics
import sys
import time
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import httpx

from . import _errors
from ._config import ENV_API_KEY, ENV_DOMAIN, Connection, SandboxSpec
from ._errors import InsecureSandboxWarning, OpenSandboxError, UnsupportedDaemonError
from ._framing import SUPPORTED_EXECD_IMAGE, Framing, describe
from ._session import LIBRARY_KEY, LIBRARY_VALUE, AsyncSandboxSession

__all__ = ["CheckResult", "DoctorOptions", "main", "parse_duration", "run_doctor"]

Status = Literal["PASS", "WARN", "FAIL", "SKIP"]

API_KEY_HEADER: Final = "OPEN-SANDBOX-API-KEY"
DOCTOR_KEY: Final = "opensandbox-agents.doctor"
"""Metadata key on every sandbox the doctor creates (its value is unique per run)."""
DEFAULT_IMAGE: Final = "python:3.13-slim"
FOREIGN_ORIGIN: Final = "https://opensandbox-doctor.invalid"
DOCKER_SOCKET_DIR: Final = "/var/run"
"""The directory of /var/run/docker.sock. It exists as a directory on every Linux host, so the
server's habit of creating missing host paths never fires; mounting it exposes the socket."""
HOST_PATH_PROBE: Final = "/etc"
PROBE_MOUNT: Final = "/mnt/opensandbox-doctor-probe"
EXECD_FIX: Final = (
    f'set execd_image = "{SUPPORTED_EXECD_IMAGE}" (or any v1.0.17 or newer; upstream tags are '
    "vX.Y.Z) under [runtime] in the server's config, restart the server and create new sandboxes"
)
GENERATIONS: Final = {
    Framing.MODERN: "1.1",
    Framing.LEGACY: "v1.0.17-v1.0.19",
    Framing.ANCIENT: "v1.0.16 or older",
}
"""The execd generation each output framing stands for, as the doctor names it."""
LATENCY_RUNS: Final = 10
LATENCY_WARN_SECONDS: Final = 1.0
THROUGHPUT_BYTES: Final = 8 * 1024 * 1024
THROUGHPUT_WARN_MIB_S: Final = 1.0
DEFAULT_STALE_AFTER: Final = timedelta(hours=1)

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """`"90s"`, `"30m"`, `"2h"`, `"1d"`, `"1w"` or combinations such as `"1h30m"`."""
    compact = text.strip().lower().replace(" ", "")
    if not compact or _DURATION_PART.sub("", compact):
        raise ValueError(
            f"invalid duration {text!r}: use a number with a unit s, m, h, d or w (e.g. 2h, 1d)"
        )
    seconds = sum(float(n) * _UNITS[u] for n, u in _DURATION_PART.findall(compact))
    return timedelta(seconds=seconds)


def _format_age(age: timedelta) -> str:
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


@dataclass(frozen=True)
class DoctorOptions:
    domain: str | None = None
    api_key: str | None = field(default=None, repr=False)
    image: str = DEFAULT_IMAGE
    skip_sandbox: bool = False
    remove_older_than: timedelta | None = None
    stale_after: timedelta = DEFAULT_STALE_AFTER
    match: dict[str, str] = field(default_factory=dict)
    request_timeout: float = 30.0
    transport: httpx.AsyncBaseTransport | None = field(default=None, repr=False)


def _base_url(domain: str) -> str:
    if domain.lower().startswith(("http://", "https://")):
        return domain.rstrip("/")
    return f"http://{domain}".rstrip("/")


def _is_loopback(base_url: str) -> bool:
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _error_code(response: httpx.Response) -> str:
    with contextlib.suppress(Exception):
        data = response.json()
        if isinstance(data, dict):
            return str(data.get("code") or (data.get("detail") or {}).get("code") or "")
    return ""


class _Doctor:
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
        self.base = _base_url(self.domain)
        self.token = uuid.uuid4().hex
        self.results: list[CheckResult] = []
        self.auth_enforced: bool | None = None
        self.key_works = False

    # -- helpers ------------------------------------------------------------------------------
    def add(
        self,
        name: str,
        status: Status,
        summary: str,
        fix: str | None = None,
        **data: Any,
    ) -> CheckResult:
        result = CheckResult(
            name=name,
            status=status,
            summary=self._hide_key(summary),
            fix=self._hide_key(fix) if fix else None,
            data=data,
        )
        self.results.append(result)
        return result

    def _hide_key(self, text: str) -> str:
        return text.replace(self.key, "***") if self.key else text

    def headers(self, *, with_key: bool = True) -> dict[str, str]:
        return {API_KEY_HEADER: self.key} if with_key and self.key else {}

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base,
            timeout=self.options.request_timeout,
            transport=self.options.transport,
        )

    def _describe(self, exc: BaseException, action: str) -> str:
        try:
            _errors.translate(exc, action=action)
        except Exception as translated:
            return _errors.scrub(str(translated), self.key)

    # -- checks --------------------------------------------------------------------------------
    async def run(self) -> list[CheckResult]:
        async with self.http() as client:
            if not await self.check_reachable(client):
                for name in (
                    "api-key",
                    "authentication",
                    "cors",
                    "proxy-routes",
                    "docker-socket-mount",
                    "host-path-mount",
                    "leftovers",
                    "execd-framing",
                    "latency",
                    "throughput",
                ):
                    self.add(name, "SKIP", "the server is not reachable")
                return self.results
            await self.check_api_key(client)
            await self.check_authentication(client)
            await self.check_cors(client)
            await self.check_proxy_routes(client)
            await self.check_leftovers()
            if self.options.skip_sandbox:
                for name in ("docker-socket-mount", "host-path-mount"):
                    self.add(
                        name,
                        "SKIP",
                        "skipped (--skip-sandbox): probing a mount may create a sandbox",
                    )
            else:
                await self.check_mount(
                    client,
                    "docker-socket-mount",
                    DOCKER_SOCKET_DIR,
                    "the directory holding /var/run/docker.sock",
                )
                await self.check_mount(client, "host-path-mount", HOST_PATH_PROBE, "a host path")
        if self.options.skip_sandbox:
            for name in ("execd-framing", "latency", "throughput"):
                self.add(name, "SKIP", "skipped (--skip-sandbox)")
        else:
            await self.check_sandbox()
        return self.results

    async def check_reachable(self, client: httpx.AsyncClient) -> bool:
        started = time.monotonic()
        try:
            response = await client.get("/health")
        except httpx.HTTPError as exc:
            self.add(
                "reachable",
                "FAIL",
                self._describe(exc, f"reach {self.base}/health"),
                f"start the server (opensandbox-server --config PATH) or set --domain / "
                f"{ENV_DOMAIN} to where it listens (host:port, or https://host:port)",
            )
            return False
        ms = (time.monotonic() - started) * 1000
        if response.status_code != 200:
            self.add(
                "reachable",
                "FAIL",
                f"{self.base}/health answered HTTP {response.status_code}",
                "check that --domain points at an opensandbox-server (not another service) "
                "and read the server's log",
            )
            return False
        self.add("reachable", "PASS", f"{self.base}/health answered in {ms:.0f} ms", ms=ms)
        return True

    async def check_api_key(self, client: httpx.AsyncClient) -> None:
        if not self.key:
            self.add(
                "api-key",
                "SKIP",
                f"no API key given (--api-key or {ENV_API_KEY})",
            )
            return
        try:
            response = await client.get("/v1/sandboxes", headers=self.headers())
        except httpx.HTTPError as exc:
            self.add("api-key", "FAIL", self._describe(exc, "list sandboxes"))
            return
        if response.status_code == 200:
            self.key_works = True
            self.add("api-key", "PASS", "the server accepts the API key given")
        elif response.status_code in (401, 403):
            self.add(
                "api-key",
                "FAIL",
                f"the server refuses the API key given (HTTP {response.status_code})",
                f"pass the value of [server] api_key from the server's config as --api-key or "
                f"{ENV_API_KEY}",
            )
        else:
            self.add(
                "api-key",
                "FAIL",
                f"GET /v1/sandboxes answered HTTP {response.status_code}",
                "read the server's log",
            )

    async def check_authentication(self, client: httpx.AsyncClient) -> None:
        try:
            response = await client.get("/v1/sandboxes", headers=self.headers(with_key=False))
        except httpx.HTTPError as exc:
            self.add("authentication", "FAIL", self._describe(exc, "list sandboxes"))
            return
        status = response.status_code
        if status in (401, 403):
            self.auth_enforced = True
            self.add(
                "authentication",
                "PASS",
                f"a request without an API key is refused (HTTP {status})",
            )
        elif status == 200:
            self.auth_enforced = False
            self.add(
                "authentication",
                "FAIL",
                "the API answers requests without an API key (GET /v1/sandboxes: 200): anyone "
                "who reaches the port can create sandboxes and run commands in them",
                '[server] api_key = "<a long random string>" in the server\'s config (and pass '
                f"it to clients as {ENV_API_KEY}); never set OPENSANDBOX_INSECURE_SERVER=YES "
                "outside throwaway tests",
            )
        else:
            self.add(
                "authentication",
                "WARN",
                f"GET /v1/sandboxes without a key answered HTTP {status}, neither 401 nor 200",
                "read the server's log",
            )

    async def check_cors(self, client: httpx.AsyncClient) -> None:
        try:
            response = await client.request(
                "OPTIONS",
                "/v1/sandboxes",
                headers={
                    "Origin": FOREIGN_ORIGIN,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": API_KEY_HEADER.lower(),
                },
            )
        except httpx.HTTPError as exc:
            self.add("cors", "FAIL", self._describe(exc, "send a CORS preflight"))
            return
        allowed = response.headers.get("access-control-allow-origin", "")
        if allowed not in ("*", FOREIGN_ORIGIN):
            self.add("cors", "PASS", "a foreign browser origin is not allowed")
            return
        summary = (
            f"every browser origin is allowed (a preflight from {FOREIGN_ORIGIN} got "
            f"Access-Control-Allow-Origin: {allowed}"
            + (
                ", with credentials"
                if response.headers.get("access-control-allow-credentials")
                else ""
            )
            + ")"
        )
        fix = (
            "opensandbox-server 1.1.1 hard-codes allow-all CORS (no config key): put it behind a "
            "reverse proxy that drops requests carrying a foreign Origin header, keep it bound to "
            "127.0.0.1, and keep [server] api_key set"
        )
        if self.auth_enforced:
            self.add(
                "cors",
                "WARN",
                summary + "; the API key still stops a web page that does not know it",
                fix,
                allow_origin=allowed,
            )
        else:
            self.add(
                "cors",
                "FAIL",
                summary + "; without an API key any web page open in a browser on this machine "
                "can drive the API from JavaScript",
                fix,
                allow_origin=allowed,
            )

    async def check_proxy_routes(self, client: httpx.AsyncClient) -> None:
        probe = f"/v1/sandboxes/osb-doctor-{self.token[:12]}/proxy/44772/ping"
        try:
            response = await client.get(probe)
        except httpx.HTTPError as exc:
            self.add("proxy-routes", "WARN", self._describe(exc, "probe the proxy route"))
            return
        if response.status_code in (401, 403):
            self.add("proxy-routes", "PASS", "the sandbox proxy routes require the API key")
            return
        loopback = _is_loopback(self.base)
        summary = (
            f"the sandbox proxy routes (/v1/sandboxes/<id>/proxy/...) do not check the API key "
            f"(HTTP {response.status_code} without one): whoever reaches the server and knows a "
            "sandbox id can run commands in it"
        )
        if loopback:
            self.add(
                "proxy-routes",
                "PASS",
                summary + "; the server is reached on loopback only",
                loopback=True,
            )
        else:
            self.add(
                "proxy-routes",
                "WARN",
                summary + f"; {urlsplit(self.base).hostname} is not a loopback address",
                "bind the server to 127.0.0.1 ([server] host), or put it behind an authenticating "
                "reverse proxy / firewall; treat sandbox ids as secrets",
                loopback=False,
            )

    async def check_mount(self, client: httpx.AsyncClient, name: str, path: str, what: str) -> None:
        if self.key and not self.key_works:
            self.add(name, "SKIP", "cannot probe: the API key given is refused")
            return
        if self.key is None and self.auth_enforced:
            self.add(name, "SKIP", f"cannot probe: the server needs an API key ({ENV_API_KEY})")
            return
        body = {
            "image": {"uri": self.options.image},
            "entrypoint": ["tail", "-f", "/dev/null"],
            "timeout": 120,
            "resourceLimits": {"cpu": "1", "memory": "256Mi"},
            "env": {},
            "metadata": {LIBRARY_KEY: LIBRARY_VALUE, DOCTOR_KEY: self.token},
            "volumes": [
                {
                    "name": "opensandbox-doctor-probe",
                    "host": {"path": path},
                    "mountPath": PROBE_MOUNT,
                    "readOnly": True,
                }
            ],
        }
        fix = (
            "set [storage] allowed_host_paths to the folders sandboxes really need, e.g. "
            '["/srv/opensandbox-data"], never "/" nor a parent of /var/run; (in '
            "opensandbox-server 1.1.1 an empty list refuses every host path) — and keep "
            "[server] api_key set (alibaba/OpenSandbox#750)"
        )
        created: str | None = None
        try:
            try:
                response = await client.post(
                    "/v1/sandboxes", json=body, headers=self.headers(), timeout=120
                )
            except httpx.HTTPError as exc:
                self.add(
                    name,
                    "WARN",
                    f"inconclusive: {self._describe(exc, 'send the mount probe')}",
                    "run the doctor again; any sandbox the probe created is removed",
                )
                return
            status = response.status_code
            code = _error_code(response)
            if 200 <= status < 300:
                with contextlib.suppress(Exception):
                    created = str(response.json().get("id") or "") or None
                self.add(
                    name,
                    "FAIL",
                    f"the server accepted a sandbox with a read-only bind mount of {path} "
                    f"({what}); the probe sandbox was deleted at once",
                    fix,
                    http_status=status,
                )
            elif status in (400, 403, 422) and ("HOST_PATH" in code or "VOLUME" in code):
                self.add(
                    name,
                    "PASS",
                    f"a bind mount of {path} ({what}) is refused (HTTP {status} {code})",
                    http_status=status,
                    code=code,
                )
            elif status >= 500 or "HOST_PATH_CREATE" in code:
                self.add(
                    name,
                    "FAIL",
                    f"the server did not refuse a bind mount of {path} ({what}); the create "
                    f"failed later for another reason (HTTP {status} {code})",
                    fix,
                    http_status=status,
                    code=code,
                )
            else:
                self.add(
                    name,
                    "WARN",
                    f"inconclusive: the mount probe was answered HTTP {status} {code}",
                    "check --image and read the server's log",
                    http_status=status,
                    code=code,
                )
        finally:
            await self._remove_probe_sandboxes(client, created)

    async def _remove_probe_sandboxes(self, client: httpx.AsyncClient, created: str | None) -> None:
        """Delete the sandbox a probe created, and any other one carrying this run's tag."""
        if created:
            with contextlib.suppress(Exception):
                await client.delete(f"/v1/sandboxes/{created}", headers=self.headers())
        await self._remove_own_sandboxes()

    async def check_leftovers(self) -> None:
        from ._admin import destroy_sandbox, list_sandboxes

        if self.key and not self.key_works:
            self.add("leftovers", "SKIP", "cannot list sandboxes: the API key given is refused")
            return
        try:
            found = await list_sandboxes(self.connection, metadata=dict(self.options.match))
        except OpenSandboxError as exc:
            self.add("leftovers", "SKIP" if self.auth_enforced else "FAIL", str(exc))
            return
        removable = self.options.remove_older_than
        if removable is not None:
            old = [s for s in found if s.age() >= removable]
            removed: list[str] = []
            failed: list[str] = []
            for summary in old:
                try:
                    await destroy_sandbox(summary.id, self.connection)
                    removed.append(summary.id)
                except OpenSandboxError:
                    failed.append(summary.id)
            kept = len(found) - len(removed)
            if failed:
                self.add(
                    "leftovers",
                    "FAIL",
                    f"could not remove {len(failed)} of {len(old)} sandboxes older than "
                    f"{_format_age(removable)}: {', '.join(failed)}",
                    "read the server's log; remove them with `docker rm -f` if the server lost them",
                    removed=removed,
                    failed=failed,
                )
            else:
                self.add(
                    "leftovers",
                    "PASS",
                    f"removed {len(removed)} sandbox(es) older than {_format_age(removable)}"
                    + (f": {', '.join(removed)}" if removed else "")
                    + f"; {kept} younger one(s) kept",
                    removed=removed,
                    kept=kept,
                )
            return
        stale = [s for s in found if s.age() >= self.options.stale_after]
        if not stale:
            self.add(
                "leftovers",
                "PASS",
                f"no sandbox of these packages is older than "
                f"{_format_age(self.options.stale_after)} ({len(found)} younger, in use)",
                count=len(found),
                stale=[],
            )
            return
        listed = ", ".join(f"{s.id} ({_format_age(s.age())}, {s.state})" for s in stale[:10])
        more = f" and {len(stale) - 10} more" if len(stale) > 10 else ""
        self.add(
            "leftovers",
            "WARN",
            f"{len(stale)} sandbox(es) created by these packages are older than "
            f"{_format_age(self.options.stale_after)}: {listed}{more}",
            f"remove them with `opensandbox-doctor --remove-older-than "
            f"{_format_age(self.options.stale_after)}` (or opensandbox_core.remove_sandboxes); "
            "give sandboxes a lifetime so the server expires them",
            count=len(found),
            stale=[s.id for s in stale],
        )

    async def check_sandbox(self) -> None:
        if self.key and not self.key_works:
            for name in ("execd-framing", "latency", "throughput"):
                self.add(name, "SKIP", "cannot create a sandbox: the API key given is refused")
            return
        spec = SandboxSpec(
            image=self.options.image,
            lifetime=600,
            metadata={DOCTOR_KEY: self.token},
            resource={"cpu": "1", "memory": "512Mi"},
            ready_timeout=90,
        )
        session = AsyncSandboxSession(spec, connection=self.connection, default_timeout=120)
        try:
            try:
                await session.start()
            except UnsupportedDaemonError as exc:
                self.add(
                    "execd-framing",
                    "FAIL",
                    f"execd {GENERATIONS[Framing.ANCIENT]}: {describe(Framing.ANCIENT)}. {exc}",
                    EXECD_FIX,
                    framing=Framing.ANCIENT.value,
                    generation=GENERATIONS[Framing.ANCIENT],
                )
                self._skip_perf("no usable sandbox")
                return
            except OpenSandboxError as exc:
                self.add(
                    "execd-framing",
                    "FAIL",
                    f"could not create a sandbox from {self.options.image!r}: {exc}",
                    "pass --image with an image the server has or can pull (it needs `tail`), "
                    "and read the server's log",
                )
                self._skip_perf("no sandbox")
                return
            framing = session.framing
            exact = framing is Framing.MODERN or session._output_dir is not None
            if framing is not None and exact:
                self.add(
                    "execd-framing",
                    "PASS",
                    f"execd {GENERATIONS[framing]}: {describe(framing)}",
                    framing=framing.value,
                    generation=GENERATIONS[framing],
                )
            else:
                self.add(
                    "execd-framing",
                    "WARN",
                    f"execd {GENERATIONS[Framing.LEGACY]} (line-framed events), but its raw "
                    "output files were not found in its temp dir: output is rebuilt from lines "
                    "(a missing final newline and \\r\\n line endings are not kept exactly)",
                    f"run an unmodified execd image ({SUPPORTED_EXECD_IMAGE} or any v1.0.17 "
                    "or newer) and do not clean its temp dir from inside the sandbox",
                    framing=framing.value if framing else None,
                    generation=GENERATIONS[Framing.LEGACY],
                )
            await self._check_latency(session)
            await self._check_throughput(session)
        finally:
            with contextlib.suppress(Exception):
                await session.destroy()
            await self._remove_own_sandboxes()

    def _skip_perf(self, why: str) -> None:
        self.add("latency", "SKIP", why)
        self.add("throughput", "SKIP", why)

    async def _check_latency(self, session: AsyncSandboxSession) -> None:
        times: list[float] = []
        try:
            for _ in range(LATENCY_RUNS):
                started = time.perf_counter()
                result = await session.run("true", timeout=60)
                times.append(time.perf_counter() - started)
                if result.exit_code != 0:
                    raise OpenSandboxError(f"`true` exited with {result.exit_code}")
        except OpenSandboxError as exc:
            self.add("latency", "FAIL", f"running `true` failed: {exc}", "read the server's log")
            return
        median = statistics.median(times)
        summary = f"median of {LATENCY_RUNS} `true` commands: {median * 1000:.0f} ms"
        if median > LATENCY_WARN_SECONDS:
            self.add(
                "latency",
                "WARN",
                summary,
                "a slow round trip: check the network between client, server and sandbox; "
                "use_server_proxy=False talks to the sandbox directly",
                median_ms=median * 1000,
            )
        else:
            self.add("latency", "PASS", summary, median_ms=median * 1000)

    async def _check_throughput(self, session: AsyncSandboxSession) -> None:
        data = os.urandom(THROUGHPUT_BYTES)
        path = f"opensandbox-doctor-{self.token[:12]}.bin"
        mib = THROUGHPUT_BYTES / (1024 * 1024)
        try:
            started = time.perf_counter()
            await session.write_bytes(path, data)
            written = time.perf_counter()
            back = await session.read_bytes(path)
            done = time.perf_counter()
        except (OpenSandboxError, OSError) as exc:
            self.add("throughput", "FAIL", f"file transfer failed: {exc}", "read the server's log")
            return
        if back != data:
            self.add(
                "throughput",
                "FAIL",
                f"the {mib:g} MiB file read back differs from what was written",
                "a proxy between client and sandbox alters bodies; check it",
            )
            return
        write_rate = mib / max(written - started, 1e-9)
        read_rate = mib / max(done - written, 1e-9)
        summary = f"{mib:g} MiB: write {write_rate:.1f} MiB/s, read {read_rate:.1f} MiB/s"
        if min(write_rate, read_rate) < THROUGHPUT_WARN_MIB_S:
            self.add(
                "throughput",
                "WARN",
                summary,
                "slow transfers: check the network and any proxy in between",
                write_mib_s=write_rate,
                read_mib_s=read_rate,
            )
        else:
            self.add("throughput", "PASS", summary, write_mib_s=write_rate, read_mib_s=read_rate)

    async def _remove_own_sandboxes(self) -> None:
        from ._admin import destroy_sandbox, list_sandboxes

        with contextlib.suppress(Exception):
            for summary in await list_sandboxes(self.connection, metadata={DOCTOR_KEY: self.token}):
                with contextlib.suppress(Exception):
                    await destroy_sandbox(summary.id, self.connection)


async def run_doctor(options: DoctorOptions) -> list[CheckResult]:
    """Run every check and return the results in order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureSandboxWarning)
        return await _Doctor(options).run()


def _format_human(domain: str, results: Sequence[CheckResult]) -> str:
    width = max(len(r.name) for r in results) if results else 10
    lines = [f"opensandbox-doctor: {domain}"]
    for r in results:
        line = f"{r.status:<4}  {r.name:<{width}}  {r.summary}"
        if r.fix and r.status in ("WARN", "FAIL"):
            line += f" -- fix: {r.fix}"
        lines.append(line)
    counts = {s: sum(1 for r in results if r.status == s) for s in ("PASS", "WARN", "FAIL", "SKIP")}
    lines.append(", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n) or "no checks")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opensandbox-doctor",
        description="Check an OpenSandbox server: reachability, authentication, CORS, host "
        "mounts, execd version, speed, and sandboxes left behind. Exits 1 if a check fails.",
    )
    parser.add_argument("--domain", help=f"host:port or https://host:port (default: ${ENV_DOMAIN})")
    parser.add_argument("--api-key", help=f"the server's API key (default: ${ENV_API_KEY})")
    parser.add_argument(
        "--image",
        default=DEFAULT_IMAGE,
        help=f"image for test sandboxes (default: {DEFAULT_IMAGE})",
    )
    parser.add_argument(
        "--skip-sandbox", action="store_true", help="skip every check that may create a sandbox"
    )
    parser.add_argument(
        "--remove-older-than",
        type=parse_duration,
        metavar="AGE",
        help="remove sandboxes of these packages older than AGE (e.g. 2h, 1d)",
    )
    parser.add_argument(
        "--stale-after",
        type=parse_duration,
        default=DEFAULT_STALE_AFTER,
        metavar="AGE",
        help="report sandboxes of these packages older than AGE as left behind (default: 1h)",
    )
    parser.add_argument(
        "--match",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only consider sandboxes with this metadata (repeatable) for leftovers",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="HTTP timeout in seconds")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    match: dict[str, str] = {}
    for item in args.match:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--match needs KEY=VALUE, got {item!r}")
        match[key] = value
    try:
        options = DoctorOptions(
            domain=args.domain,
            api_key=args.api_key,
            image=args.image,
            skip_sandbox=args.skip_sandbox,
            remove_older_than=args.remove_older_than,
            stale_after=args.stale_after,
            match=match,
            request_timeout=args.timeout,
        )
        doctor_domain = Connection(domain=options.domain).resolved_domain()
    except (OpenSandboxError, ValueError) as exc:
        parser.error(str(exc))
    results = asyncio.run(run_doctor(options))
    failed = any(r.status == "FAIL" for r in results)
    if args.json:
        document = {
            "domain": doctor_domain,
            "ok": not failed,
            "checks": [asdict(r) for r in results],
        }
        print(json.dumps(document, indent=2, default=str))
    else:
        print(_format_human(doctor_domain, results))
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
