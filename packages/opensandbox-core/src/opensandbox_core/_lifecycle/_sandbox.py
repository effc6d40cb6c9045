"""The lifecycle facet: one session's sandbox from first use to `destroy()`.

It owns the per-loop HTTP clients (built in one place, `clients()`), the start that runs once
however many loops and tasks ask at the same time (create or attach, readiness, probe), renewal,
pause and resume, and the gone probe through which every facet's failed call on execd reaches
the one translator (`fail`, then `_errors.from_foreign`). The commands and files facets see it only through the `Lifecycle` / `FileLink`
protocols it implements; `AsyncSandboxSession` delegates to it.

Rules it keeps: nothing here does I/O before the first operation; the sandbox id never changes
once known; HTTP clients are per event loop (httpx's async clients are bound to the loop that
opened them), so one session serves the blocking façade's loop and the caller's loop alike, and
a loop's clients are closed when that loop shuts down (`_loops.PerLoop`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from opensandbox_core import _errors
from opensandbox_core._config import Connection, SandboxSpec
from opensandbox_core._defaults import READY_TIMEOUT
from opensandbox_core._errors import SandboxUnavailableError
from opensandbox_core._wire._events import Context
from opensandbox_core._wire._execd import ExecdClient, ExecdEndpoint
from opensandbox_core._wire._framing import Framing

from . import _caches, _pausing, _reach
from ._lifetime import Renewal, renew_if_due
from ._loops import PerLoop
from ._startup import Creator

if TYPE_CHECKING:
    from opensandbox.config import ConnectionConfig
    from opensandbox.services.sandbox import Sandboxes

__all__ = ["LoopClients", "Ready", "SandboxLifecycle"]

logger = logging.getLogger(__name__)


@dataclass
class LoopClients:
    """The HTTP clients of one event loop."""

    sdk_config: ConnectionConfig
    sandboxes: Sandboxes
    execd: ExecdClient | None = None

    async def aclose(self) -> None:
        """Close them all; a client that fails to close is dropped all the same."""
        if self.execd is not None:
            with contextlib.suppress(Exception):
                await self.execd.aclose()
        with contextlib.suppress(Exception):
            close = getattr(self.sandboxes, "close", None) or getattr(
                self.sandboxes, "aclose", None
            )
            if close is not None:
                result = close()
                if inspect.isawaitable(result):
                    await result
        with contextlib.suppress(Exception):
            await self.sdk_config.close_transport_if_owned()


@dataclass
class Ready:
    """Everything known once the sandbox is reachable; shared by all loops."""

    endpoint: ExecdEndpoint
    framing: Framing
    working_dir: str


class SandboxLifecycle:
    """Create or attach, reach, renew, pause, resume and destroy one sandbox (module docstring).

    `spec` creates a sandbox on first use; `sandbox_id` attaches to one. The arguments are
    checked by the session before they get here.
    """

    def __init__(
        self,
        spec: SandboxSpec | None,
        sandbox_id: str | None,
        connection: Connection,
        *,
        working_dir: str | None,
        recover_timeout: float,
    ) -> None:
        self.spec = spec
        self.connection = connection
        self.working_dir_config = working_dir
        self.request_timeout = float(connection.request_timeout)
        # Made on first use, not here: construction stays free of I/O and of randomness, which
        # durable engines (Temporal's workflow sandbox) refuse in workflow code.
        self._owner_token: str | None = None
        self.sandbox_id = sandbox_id
        self.owned = False
        self.destroyed = False
        self.paused = False
        self.ready: Ready | None = None
        self.output_dir: str | None = None  # where execd keeps raw command output (`_reach`)
        self.loops: PerLoop[LoopClients] = PerLoop(LoopClients.aclose)
        self.renewal = Renewal(last=float("-inf"))
        self.lifetime = spec.lifetime if spec is not None else None
        self._lock = threading.Lock()
        self._start_future: concurrent.futures.Future[None] | None = None
        self._creator = (
            None
            if spec is None
            else Creator(
                spec,
                owner_token=lambda: self.owner_token,
                request_timeout=self.request_timeout,
                recover_timeout=float(recover_timeout),
                address=connection.display_address,
            )
        )

    # -- what the other facets see (`_commands.Lifecycle`, `_filesystem.FileLink`) ----------
    @property
    def owner_token(self) -> str:
        if self._owner_token is None:
            self._owner_token = uuid.uuid4().hex
        return self._owner_token

    def adopt(self, owner_token: str) -> None:
        """Take ownership of a sandbox that was created for this session by someone else (a
        snapshot restore): it carries `owner_token` as its tag, and is destroyed on exit."""
        self.owned = True
        self._owner_token = owner_token

    async def find_by_tag(self) -> str | None:
        """The id of the sandbox carrying this session's owner tag (a create whose answer was
        lost), or None; an attaching session has none."""
        if self._creator is None:
            return None
        return await self._creator.find_by_tag(self.clients().sandboxes)

    def take(self, sandbox_id: str) -> None:
        """Own `sandbox_id`, found by this session's tag after its create's answer was lost."""
        self.sandbox_id = sandbox_id
        self.owned = True

    @property
    def stall_timeout(self) -> float:
        return max(1.0, self.request_timeout) + 3.5

    @property
    def domain(self) -> str:
        return self.connection.resolved_domain()

    @property
    def working_dir(self) -> str:
        assert self.ready is not None, "the sandbox is reached before a path is resolved"
        return self.ready.working_dir

    async def context(self) -> Context:
        clients = await self.ensure()
        ready = self.ready
        assert ready is not None and clients.execd is not None
        return Context(clients.execd, ready.framing, ready.working_dir, self.output_dir)

    async def renew_once(self) -> None:
        if self.sandbox_id is None or self.destroyed:
            return
        await self.maybe_renew(self.clients())

    # -- clients and start -----------------------------------------------------------------
    def clients(self) -> LoopClients:
        """This loop's clients, made on first use and closed when the loop shuts down
        (`_loops.PerLoop`: a session used from repeated `asyncio.run()` keeps no old ones)."""
        clients = self.loops.get_or_make(self._new_clients)
        if clients.execd is None and self.ready is not None:
            clients.execd = self._new_execd(clients, self.ready.endpoint)
        return clients

    def _new_clients(self) -> LoopClients:
        from opensandbox.adapters.factory import AdapterFactory

        config = self.connection.build_sdk_config().with_transport_if_missing()
        return LoopClients(
            sdk_config=config, sandboxes=AdapterFactory(config).create_sandbox_service()
        )

    def _new_execd(self, clients: LoopClients, endpoint: ExecdEndpoint) -> ExecdClient:
        config = clients.sdk_config
        # A transport the caller passed in is used (and left open) without the SDK's retry
        # wrapper, if it is one (the SDK's public `unwrap_retry_transport`); otherwise the
        # client opens its own. Either way a command POST is never sent twice.
        from opensandbox.transport import unwrap_retry_transport

        transport = None if config.owns_transport else config.transport
        return ExecdClient(
            endpoint,
            transport=None if transport is None else unwrap_retry_transport(transport),
            request_timeout=config.request_timeout.total_seconds(),
        )

    async def _resolve_endpoint(
        self, clients: LoopClients, sandbox_id: str, *, wait: bool, budget: float
    ) -> ExecdEndpoint:
        return await _reach.resolve_endpoint(
            clients.sandboxes, clients.sdk_config, sandbox_id, wait=wait, budget=budget
        )

    async def ensure(self, *, allow_paused: bool = False) -> LoopClients:
        """This loop's clients, the sandbox created or attached and reachable (once)."""
        if self.destroyed:
            raise SandboxUnavailableError(
                f"Sandbox {self.sandbox_id} was destroyed by this session.",
                sandbox_id=self.sandbox_id,
            )
        clients = self.clients()
        if self.paused and not allow_paused:
            await self._recheck_paused(clients)
        if self.ready is not None:
            await self.maybe_renew(clients)
            return clients
        while True:
            with self._lock:
                future = self._start_future
                creator = future is None
                if creator:
                    future = self._start_future = concurrent.futures.Future()
            assert future is not None
            if creator:
                break
            try:
                await asyncio.shield(asyncio.wrap_future(future))
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if future.cancelled() and (task is None or not task.cancelling()):
                    continue  # the starter was cancelled; try again ourselves
                raise
            return self.clients()
        try:
            await self._start(clients)
        except BaseException as exc:
            with self._lock:
                self._start_future = None
            if isinstance(exc, Exception):
                future.set_exception(exc)
            else:
                future.cancel()
            raise
        future.set_result(None)
        return self.clients()

    async def _start(self, clients: LoopClients) -> None:
        created = False
        if self.sandbox_id is None:
            assert self._creator is not None
            self.sandbox_id = await self._creator.create(clients.sandboxes)
            self.owned = True
            logger.info("Created OpenSandbox sandbox %s", self.sandbox_id)
            created = True
        sandbox_id = self.sandbox_id
        budget = self.spec.ready_timeout if self.spec else READY_TIMEOUT
        given = await self._resolve_endpoint(clients, sandbox_id, wait=created, budget=budget)
        route = _reach.Route(given, domain=self.domain, sandbox_id=sandbox_id)
        reach = _reach.Reach(route, lambda endpoint: self._new_execd(clients, endpoint))

        async def fail(exc: BaseException, execd: ExecdClient) -> NoReturn:
            await self.fail(exc, "start using the sandbox", execd=execd)

        try:
            if created:
                await _reach.wait_ready(
                    clients.sandboxes, clients.sdk_config, reach, sandbox_id, budget
                )
            else:
                await reach.settle()
            probed = await _reach.probe(
                reach.execd,
                sandbox_id,
                domain=self.domain,
                working_dir=self.working_dir_config,
                fail=fail,
            )
        except BaseException:
            await reach.execd.aclose()
            raise
        clients.execd = reach.execd
        self.output_dir = probed.output_dir
        self.ready = Ready(
            endpoint=route.endpoint, framing=probed.framing, working_dir=probed.working_dir
        )
        self.renewal.last = time.monotonic()

    # -- pause and resume ------------------------------------------------------------------
    async def pause_or_resume(self, *, pause: bool, limit: float) -> None:
        clients = await self.ensure(allow_paused=True)
        assert self.sandbox_id is not None
        deadline = time.monotonic() + limit
        await _pausing.request(
            clients.sandboxes, self.sandbox_id, pause=pause, limit=limit, deadline=deadline
        )
        self.paused = pause
        if not pause and clients.execd is not None:
            await _pausing.wait_for_daemon(
                clients.execd, self.sandbox_id, limit=limit, deadline=deadline
            )
        logger.info("%s OpenSandbox sandbox %s", "Paused" if pause else "Resumed", self.sandbox_id)

    async def state(self, clients: LoopClients) -> str:
        """The sandbox's state as the server reports it, lower case ('' when unknown)."""
        assert self.sandbox_id is not None
        return await _pausing.state(clients.sandboxes, self.sandbox_id)

    async def _recheck_paused(self, clients: LoopClients) -> None:
        """The sandbox was seen paused: ask the server once whether someone resumed it since,
        and raise the paused error unless it runs again."""
        try:
            state = await self.state(clients)
        except Exception:
            state = ""
        if state != "running":
            raise self.paused_error()
        self.paused = False
        logger.info("Sandbox %s was resumed by another client", self.sandbox_id)

    def paused_error(self) -> SandboxUnavailableError:
        return SandboxUnavailableError(
            f"Sandbox {self.sandbox_id} is paused: commands and file operations wait until it "
            "is resumed. Call resume() on the session first.",
            sandbox_id=self.sandbox_id,
        )

    async def endpoint(self, port: int) -> tuple[str, dict[str, str]]:
        """The URL of `port` inside the sandbox, and the headers a client must send to it."""
        clients = await self.ensure()
        assert self.sandbox_id is not None
        with _errors.translated(f"get the endpoint of port {port}", sandbox_id=self.sandbox_id):
            endpoint = await clients.sandboxes.get_sandbox_endpoint(
                self.sandbox_id, port, clients.sdk_config.use_server_proxy
            )
        headers = endpoint.build_request_headers(clients.sdk_config)
        return f"{clients.sdk_config.protocol}://{endpoint.endpoint}", headers

    # -- end -------------------------------------------------------------------------------
    async def destroy(self) -> None:
        sandbox_id = self.sandbox_id
        if sandbox_id is None or self.destroyed:
            self.destroyed = self.destroyed or sandbox_id is not None
            await self.aclose()
            return
        clients = self.clients()
        try:
            await clients.sandboxes.kill_sandbox(sandbox_id)
            logger.info("Destroyed OpenSandbox sandbox %s", sandbox_id)
        except Exception as exc:
            if not _errors.is_not_found(exc):
                await self.aclose()
                with _errors.translated("destroy the sandbox", sandbox_id=sandbox_id):
                    raise
            logger.debug("sandbox %s was already gone", sandbox_id)
        finally:
            _caches.forget(self.domain, sandbox_id)
        self.destroyed = True
        await self.aclose()

    async def aclose(self) -> None:
        """Close this loop's clients (those of loops closed since are dropped)."""
        await self.loops.close_current()

    # -- renewal ---------------------------------------------------------------------------
    async def maybe_renew(self, clients: LoopClients) -> None:
        if self.sandbox_id is not None:
            await renew_if_due(
                clients.sandboxes,
                self.sandbox_id,
                self.renewal,
                lifetime=self.lifetime,
                attached=self.spec is None,
            )

    # -- failures --------------------------------------------------------------------------
    async def gone(self, execd: ExecdClient | None, *, raise_paused: bool = False) -> bool:
        """Whether the sandbox no longer exists or its daemon no longer answers (a probe)."""
        assert self.sandbox_id is not None
        clients = self.clients()
        # One request timeout at most: the SDK's client retries a read timeout several times,
        # which would multiply the time a failed call takes to report on a stalled network.
        budget = max(1.0, clients.sdk_config.request_timeout.total_seconds())
        try:
            async with asyncio.timeout(budget):
                info = await clients.sandboxes.get_sandbox_info(self.sandbox_id)
        except Exception as exc:
            return _errors.is_not_found(exc)
        state = str(getattr(info.status, "state", "")).lower()
        if _errors.is_gone_state(state):
            return True
        if state in ("paused", "pausing") and raise_paused:
            self.paused = True  # paused by someone else: say so instead of a network error
            raise self.paused_error()
        return execd is not None and not await execd.ping(timeout=3.0)

    async def fail(
        self,
        exc: BaseException,
        action: str,
        *,
        execd: ExecdClient | None = None,
        path: str | None = None,
        detail: str | None = None,
    ) -> NoReturn:
        """Raise the project's error for a failed call on this sandbox (`_errors.from_foreign`,
        the one translator): a path error, execd's refusal, a gone sandbox, or a server error.

        When the failure alone cannot tell (no answer, a server error), the server is asked
        first whether the sandbox is gone (`gone`; paused by someone else raises that). `path`
        maps execd's path errors to builtin ones; `detail`, when given, says what is known of a
        call that failed half way (a command whose stream was cut after it started)."""
        gone = False
        if _errors.needs_gone_probe(exc, path=path):
            gone = await self.gone(execd or self.clients().execd, raise_paused=True)
        raise _errors.from_foreign(
            exc,
            operation=action,
            address=self.connection.display_address(),
            sandbox_id=self.sandbox_id,
            path=path,
            gone=gone,
            detail=detail,
        )
