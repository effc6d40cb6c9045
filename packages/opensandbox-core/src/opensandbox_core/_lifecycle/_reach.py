"""Making a sandbox usable: its execd endpoint and the route to it, readiness, and the probe.

The route. On Docker the server gives every port but 8080 as `host:<execd's host port>/proxy/<port>`,
execd's own port included: execd's reverse proxy then relays each request to execd itself, two
hops in the sandbox for every call. When the endpoint's path is exactly `/proxy/44772` (nothing
before it) and execd answers at the root of the same address (its `/ping`, with the endpoint's
headers), the session talks to that root directly (`Route`): checked with the readiness wait of a
new sandbox, or one ping when attaching, and remembered per sandbox. Any other answer keeps the
endpoint as given; the server-proxy form (`/v1/sandboxes/<id>/proxy/44772`) and ingress forms are
never rewritten.

The probe learns, once per sandbox, the execd generation (its output framing), the canonical
working directory and where execd keeps each command's raw output. Those verdicts hold for a
sandbox whatever session asks, so they are cached process-wide, keyed by (domain, sandbox id)
(`_caches`: why that is safe, and `forget`, which drops them when the sandbox is destroyed).
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
import shlex
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, NoReturn
from urllib.parse import urlsplit, urlunsplit

import httpx

from opensandbox_core import _errors
from opensandbox_core._errors import (
    ConfigurationError,
    SandboxUnavailableError,
    UnsupportedDaemonError,
)
from opensandbox_core._wire._events import COMMAND_ID, CommandEvents, command_body, read_events
from opensandbox_core._wire._execd import EXECD_PORT, ExecdClient, ExecdEndpoint, ExecdError
from opensandbox_core._wire._framing import (
    PROBE_COMMAND,
    PROBE_OUTPUT,
    UPGRADE_EXECD,
    Framing,
    classify_probe,
    rebuild,
)

from ._caches import SandboxCache

if TYPE_CHECKING:
    from opensandbox.config import ConnectionConfig
    from opensandbox.services.sandbox import Sandboxes

__all__ = [
    "Probed",
    "Reach",
    "Route",
    "direct_endpoint",
    "probe",
    "raise_if_failed",
    "resolve_endpoint",
]

logger = logging.getLogger(__name__)

READY_POLL: Final = 0.025
_STATUS_POLL: Final = 0.5  # how often a new sandbox's state is read while waiting for execd
_TMP_MARK: Final = "osb-tmp:"

_framing_cache: SandboxCache[tuple[str, str], Framing] = SandboxCache(
    "the output framing of each sandbox's execd"
)
_workdir_cache: SandboxCache[tuple[str, str, str | None], str] = SandboxCache(
    "each sandbox's canonical working directory, per working_dir asked for (the last item)"
)
_output_dir_cache: SandboxCache[tuple[str, str], str | None] = SandboxCache(
    "where each sandbox's execd keeps a command's raw output (None: not found)"
)
_route_cache: SandboxCache[tuple[str, str, str], bool] = SandboxCache(
    "whether each sandbox's execd answers at the root of the address its endpoint (the last "
    "item) proxies through (True: the direct route is used; False for any other form)"
)

Fail = Callable[[BaseException, ExecdClient], Awaitable[NoReturn]]
"""The lifecycle's `fail`: raises the project's error for a failed call on `execd`."""


@dataclass(frozen=True)
class Probed:
    framing: Framing
    working_dir: str
    output_dir: str | None


async def resolve_endpoint(
    sandboxes: Sandboxes, config: ConnectionConfig, sandbox_id: str, *, wait: bool, budget: float
) -> ExecdEndpoint:
    """The address and headers of the sandbox's execd (`wait`: while a new sandbox starts)."""
    deadline = time.monotonic() + budget
    while True:
        try:
            endpoint = await sandboxes.get_sandbox_endpoint(
                sandbox_id, EXECD_PORT, config.use_server_proxy
            )
            break
        except Exception as exc:
            if _errors.is_not_found(exc) and not wait:
                hint = "Attaching never creates a replacement."
                raise _errors.sandbox_not_found(sandbox_id, hint) from exc
            if not wait or time.monotonic() >= deadline:
                with _errors.translated("reach the sandbox", sandbox_id=sandbox_id):
                    raise
            await asyncio.sleep(READY_POLL * 4)
    headers = endpoint.build_request_headers(config)
    return ExecdEndpoint(
        base_url=f"{config.protocol}://{endpoint.endpoint}".rstrip("/"), headers=headers
    )


def direct_endpoint(endpoint: ExecdEndpoint) -> ExecdEndpoint | None:
    """execd's own address behind an endpoint that reaches it through its proxy to itself: the
    root of the same scheme, host and port (headers kept) when the path is exactly
    `/proxy/44772`; None for any other form."""
    parts = urlsplit(endpoint.base_url)
    if parts.path.rstrip("/") != f"/proxy/{EXECD_PORT}" or parts.query or parts.fragment:
        return None
    if not parts.scheme or not parts.netloc:
        return None
    root = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    return ExecdEndpoint(base_url=root, headers=endpoint.headers)


class Route:
    """The address a session uses for one sandbox's execd: the endpoint as the server gives it,
    or execd's root behind it (`direct_endpoint`) once execd answered there (module docstring).
    What was learnt is remembered per sandbox (`_route_cache`)."""

    def __init__(self, given: ExecdEndpoint, *, domain: str, sandbox_id: str) -> None:
        self.given = given
        self.direct = direct_endpoint(given)
        self._key = (domain, sandbox_id, given.base_url)
        known = _route_cache.get(self._key)
        if self.direct is None and known is None:
            known = _route_cache[self._key] = False
        self.settled = known is not None
        self.endpoint = self.direct if self.direct is not None and known is not False else given
        if known is not None:
            self._log()

    @property
    def trying_direct(self) -> bool:
        """Whether the direct address is in use but not yet confirmed."""
        return not self.settled and self.endpoint is self.direct

    def answered(self, status: int | None) -> bool:
        """Learn from the status of a `GET /ping` at the address in use (None: no answer);
        True when the route changed to the endpoint as given (execd is not at the root)."""
        if not self.trying_direct or status is None:
            return False
        self.settled = True
        _route_cache[self._key] = status == 200
        if status != 200:
            self.endpoint = self.given
        self._log()
        return status != 200

    def _log(self) -> None:
        if self.endpoint is self.direct:
            logger.debug(
                "Sandbox %s: execd is reached directly at %s (its endpoint %s goes through "
                "execd's own proxy)",
                self._key[1],
                self.endpoint.base_url,
                self.given.base_url,
            )
        else:
            logger.debug(
                "Sandbox %s: execd is reached at its endpoint as given, %s",
                self._key[1],
                self.endpoint.base_url,
            )


class Reach:
    """The execd client of a sandbox being started, on the `Route` it learns as it goes: a
    refusal at the direct address (any answer but 200 to `/ping`) closes that client and opens
    one on the endpoint as given."""

    def __init__(self, route: Route, client_for: Callable[[ExecdEndpoint], ExecdClient]) -> None:
        self.route = route
        self._client_for = client_for
        self.execd = client_for(route.endpoint)

    async def ping(self, timeout: float) -> bool:
        """Whether execd answers `/ping` at the address in use; a direct address that answers
        anything else is given up for the endpoint as given, which is then asked."""
        status = await self.execd.ping_status(timeout)
        if self.route.answered(status):
            old, self.execd = self.execd, self._client_for(self.route.endpoint)
            await old.aclose()
            status = await self.execd.ping_status(timeout)
        return status == 200

    async def settle(self) -> None:
        """Confirm or refuse the direct address of an existing sandbox (one ping), unless this
        sandbox's route is known already; without any answer the endpoint as given is used
        (and nothing is remembered)."""
        if not self.route.trying_direct:
            return
        if not await self.ping(timeout=2.0) and self.route.trying_direct:
            self.route.endpoint = self.route.given
            old, self.execd = self.execd, self._client_for(self.route.endpoint)
            await old.aclose()


async def wait_ready(
    sandboxes: Sandboxes,
    config: ConnectionConfig,
    reach: Reach,
    sandbox_id: str,
    budget: float,
) -> None:
    """Wait until execd answers; fail at once, with the server's reason, when the server
    reports the sandbox failed (a missing entrypoint, an image that cannot start)."""
    deadline = time.monotonic() + budget
    next_look = time.monotonic() + _STATUS_POLL
    while not await reach.ping(timeout=min(2.0, budget)):
        if time.monotonic() >= next_look:
            next_look = time.monotonic() + _STATUS_POLL
            await raise_if_failed(sandboxes, config, sandbox_id)
        if time.monotonic() >= deadline:
            raise SandboxUnavailableError(
                f"Sandbox {sandbox_id} did not become ready within {budget:g} s: its execd "
                "daemon never answered. Check the image's entrypoint and the server log; on "
                "Docker Desktop or Kubernetes pass use_server_proxy=True.",
                sandbox_id=sandbox_id,
            )
        await asyncio.sleep(READY_POLL)


async def raise_if_failed(sandboxes: Sandboxes, config: ConnectionConfig, sandbox_id: str) -> None:
    """Raise SandboxUnavailableError when the server says the new sandbox failed or ended."""
    try:
        async with asyncio.timeout(max(1.0, config.request_timeout.total_seconds())):
            info = await sandboxes.get_sandbox_info(sandbox_id)
    except Exception as exc:  # the wait goes on; its own deadline still holds
        logger.debug("could not read the state of sandbox %s (%s)", sandbox_id, exc)
        return
    status = getattr(info, "status", None)
    state = str(getattr(status, "state", "") or "").lower()
    if not _errors.is_gone_state(state):
        return
    reason = str(getattr(status, "reason", "") or "")
    message = str(getattr(status, "message", "") or "")
    detail = "; ".join(t for t in (reason, message) if t) or "no reason given"
    raise SandboxUnavailableError(
        f"Sandbox {sandbox_id} failed to start: the server reports it {state} ({detail}). "
        "Check the image and its entrypoint.",
        sandbox_id=sandbox_id,
    )


async def probe(
    execd: ExecdClient, sandbox_id: str, *, domain: str, working_dir: str | None, fail: Fail
) -> Probed:
    """Learn the execd generation (its output framing), the canonical working dir and where
    execd keeps each command's raw output (one command and two small requests, cached).

    The probe prints a known text to stdout (`PROBE_COMMAND`: its events tell the framing),
    the working dir and the daemon's temp dir (Go's `os.TempDir()`: `$TMPDIR`, else `/tmp`)
    to stderr. Its own raw stdout file is then read back: if it holds the probe's exact
    bytes, commands take their exact output from those files (line-framed execd) and clean
    them up (every generation); then the probe's own files are deleted.
    """
    key = (domain, sandbox_id)
    wd_key = (*key, working_dir)
    framing = _framing_cache.get(key)
    workdir = _workdir_cache.get(wd_key)
    if framing is not None and workdir is not None and key in _output_dir_cache:
        return Probed(framing, workdir, _output_dir_cache[key])
    stdout, stderr, probe_id = await _run_probe(execd, working_dir, fail)
    framing = classify_probe(stdout)
    if framing is None:
        raise SandboxUnavailableError(
            f"Sandbox {sandbox_id}: could not recognise the command output framing of its "
            f"execd daemon (got {stdout[:5]!r}).",
            sandbox_id=sandbox_id,
        )
    text = "".join(rebuild(framing, t) for t in stderr)
    tmp_lines = [line for line in text.splitlines() if line.startswith(_TMP_MARK)]
    tmp_dir = tmp_lines[-1][len(_TMP_MARK) :] if tmp_lines else ""
    output_dir = await _find_output_dir(execd, sandbox_id, probe_id, tmp_dir, framing)
    if framing is Framing.ANCIENT:
        raise UnsupportedDaemonError(
            f"Sandbox {sandbox_id} runs an execd of v1.0.16 or older, which drops the blank "
            "lines (line breaks) from command output, so output cannot be reconstructed. "
            f"{UPGRADE_EXECD}",
            sandbox_id=sandbox_id,
        )
    lines = [line for line in text.strip().splitlines() if line.startswith("/")]
    if not lines:
        raise ConfigurationError(
            f"The working directory {working_dir!r} could not be created or "
            f"entered in sandbox {sandbox_id}: {text.strip()[:300]!r}"
        )
    workdir = lines[-1]
    _framing_cache[key] = framing
    _workdir_cache[wd_key] = workdir
    _output_dir_cache[key] = output_dir
    return Probed(framing, workdir, output_dir)


async def _run_probe(
    execd: ExecdClient, working_dir: str | None, fail: Fail
) -> tuple[list[str], list[str], str | None]:
    """Run the probe command: its stdout and stderr event texts, and its execution id."""
    if working_dir:
        quoted = shlex.quote(working_dir)
        setup = f"mkdir -p -- {quoted} && cd -- {quoted} && pwd -P >&2"
    else:
        setup = "pwd -P >&2"
    command = f"{setup}; printf '{_TMP_MARK}%s\\n' \"${{TMPDIR:-/tmp}}\" >&2; {PROBE_COMMAND}"
    stdout: list[str] = []
    stderr: list[str] = []

    def output(kind: Literal["stdout", "stderr"], text: str) -> None:
        (stdout if kind == "stdout" else stderr).append(text)

    stream = CommandEvents(output=output)
    try:
        async with asyncio.timeout(60):
            body = command_body(command, cwd=None, timeout=30)
            await read_events(execd, body, stream.handle, done=stream.done)
    except Exception as exc:
        await fail(exc, execd)
    return stdout, stderr, stream.execution_id


async def _find_output_dir(
    execd: ExecdClient, sandbox_id: str, probe_id: str | None, tmp_dir: str, framing: Framing
) -> str | None:
    """The directory that holds execd's `<id>.stdout|.stderr` files (checked on the probe's
    own file, which is then deleted), or None where they are not found."""
    if not probe_id or not tmp_dir.startswith("/") or not COMMAND_ID.fullmatch(probe_id):
        found = None
    else:
        directory = posixpath.normpath(tmp_dir)
        base = posixpath.join(directory, probe_id)
        try:
            head = await execd.read_head(base + ".stdout", len(PROBE_OUTPUT) + 1)
        except (httpx.HTTPError, ExecdError) as exc:
            logger.debug("could not read the probe's raw output file (%s)", exc)
            head = None
        found = directory if head == PROBE_OUTPUT else None
        if head is not None:
            execd.discard_later([base + ".stdout", base + ".stderr"])
    if found is None and framing is Framing.LEGACY:
        logger.warning(
            "Sandbox %s: execd's raw output files were not found in %r, so command output "
            "is rebuilt from its line events: a missing final newline and \\r\\n line endings "
            "are not kept exactly.",
            sandbox_id,
            tmp_dir,
        )
    return found
