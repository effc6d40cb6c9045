"""`FakeOpenSandbox`: the lifecycle API, the dispatch to each sandbox's execd, and faults."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any, Literal

import httpx

from opensandbox_core import _validate
from opensandbox_core._commands._capture import CAPTURE_ENV, MARKER, paths_of
from opensandbox_core._commands._offload import MARKER as OFFLOAD_MARKER
from opensandbox_core._commands._offload import OFFLOAD_ENV, cap_of
from opensandbox_core._config import Connection

from . import _routes
from ._canned import canned, marker_of, rename_args, renamed
from ._code import FakeCodeInterpreter
from ._model import (
    _EXECD_PORT,
    _TMP,
    CommandHandler,
    FakeCommand,
    FakeFile,
    FakeOutcome,
    FakeSandbox,
    Route,
)

__all__ = ["FakeOpenSandbox"]


class FakeOpenSandbox:
    """A fake OpenSandbox server with fake sandboxes; see the module docstring.

    `framing` is "legacy" (execd 1.0.17-1.0.19) or "modern" (1.1). `raw_output_files=False`
    makes a legacy daemon keep no raw output files (older layouts), so the library falls back
    to the events. `on_command` answers commands before the canned table.
    `kill_on_timeout=False` makes the daemon ignore a command's `timeout` (it runs on until the
    client interrupts it), so only the client's own deadline and interrupt can stop it.
    `file_api="1.0.18"` answers with execd v1.0.18's file API (see `FakeSandbox.file_api`).
    `code` serves execd's code interpreter (`/code`; see `FakeCodeInterpreter`).
    """

    def __init__(
        self,
        *,
        framing: Literal["legacy", "modern"] = "legacy",
        on_command: CommandHandler | None = None,
        raw_output_files: bool = True,
        kill_on_timeout: bool = True,
        domain: str | None = None,
        api_key: str = "fake-api-key",
        file_api: Literal["1.0.19", "1.0.18"] = "1.0.19",
        code: FakeCodeInterpreter | None = None,
    ) -> None:
        _validate.choice(framing, "framing", ("legacy", "modern"))
        _validate.choice(file_api, "file_api", ("1.0.19", "1.0.18"))
        self.framing = framing
        self.file_api = file_api
        self.on_command = on_command
        self.raw_output_files = raw_output_files
        self.kill_on_timeout = kill_on_timeout
        self.code = code
        # A fresh domain per fake: the library caches what it learns per (domain, sandbox).
        self.domain = domain or f"fake-{uuid.uuid4().hex[:8]}.opensandbox.test:8080"
        self.api_key = api_key
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.requests: list[httpx.Request] = []
        self.routes: list[Route] = []
        self._faults: dict[Route, list[tuple[str, int]]] = {}
        self._cut_after: int | None = None
        self.transport = httpx.MockTransport(self._handle)

    def __repr__(self) -> str:
        return f"FakeOpenSandbox(framing={self.framing!r}, sandboxes={len(self.sandboxes)})"

    def connection(self, **kwargs: Any) -> Connection:
        """A `Connection` whose every request goes to this fake."""
        return Connection(
            domain=self.domain, api_key=self.api_key, transport=self.transport, **kwargs
        )

    # -- faults ---------------------------------------------------------------------------
    def fail_next(self, route: Route, *, status: int = 503, times: int = 1) -> None:
        """The next `times` requests of `route` get HTTP `status` (and change nothing)."""
        self._faults.setdefault(route, []).extend([("status", status)] * times)

    def lose_next(self, route: Route, *, times: int = 1) -> None:
        """The next `times` requests of `route` take effect, then their answer is lost (the
        connection drops: httpx.RemoteProtocolError)."""
        self._faults.setdefault(route, []).extend([("lose", 0)] * times)

    def hang_next(self, route: Route, *, times: int = 1) -> None:
        """The next `times` requests of `route` never get an answer."""
        self._faults.setdefault(route, []).extend([("hang", 0)] * times)

    def cut_stream_after(self, events: int | None) -> None:
        """Command streams drop their connection after this many events (None: never)."""
        self._cut_after = events

    def count(self, route: Route) -> int:
        """How many requests of `route` arrived (faulty ones included)."""
        return self.routes.count(route)

    def sandbox(self, sandbox_id: str | None = None) -> FakeSandbox:
        """A sandbox by id, or the only one there is."""
        if sandbox_id is not None:
            return self.sandboxes[sandbox_id]
        if len(self.sandboxes) != 1:
            raise LookupError(f"There are {len(self.sandboxes)} fake sandboxes; pass an id.")
        return next(iter(self.sandboxes.values()))

    def add_sandbox(self, sandbox_id: str = "sbx-fake", **metadata: str) -> FakeSandbox:
        """A sandbox that exists already (to attach to)."""
        box = FakeSandbox(sandbox_id, dict(metadata), {}, datetime.now(UTC))
        box.file_api = self.file_api
        self.sandboxes[sandbox_id] = box
        return box

    # -- dispatch -------------------------------------------------------------------------
    async def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        host = request.url.host
        if host.startswith("execd-"):
            box = self.sandboxes.get(host[len("execd-") :].split(".")[0])
            route, answer = self._execd_route(request)
            if box is None:
                return await self._faulted(route, request, lambda: _routes.refused())
            return await self._faulted(route, request, lambda: answer(box, request))
        route, lifecycle = self._lifecycle_route(request)
        return await self._faulted(route, request, lambda: lifecycle(request))

    async def _faulted(
        self, route: Route, request: httpx.Request, answer: Callable[[], Any]
    ) -> httpx.Response:
        self.routes.append(route)
        pending = self._faults.get(route)
        fault = pending.pop(0) if pending else None
        if fault is not None and fault[0] == "status":
            return _routes.error(fault[1], "UNAVAILABLE", "fake fault: the service is unavailable.")
        if fault is not None and fault[0] == "hang":
            await asyncio.Event().wait()
        result = answer()
        response: httpx.Response = await result if asyncio.iscoroutine(result) else result
        if fault is not None and fault[0] == "lose":
            raise httpx.RemoteProtocolError("fake fault: the answer was lost", request=request)
        return response

    def _lifecycle_route(
        self, request: httpx.Request
    ) -> tuple[Route, Callable[[httpx.Request], httpx.Response]]:
        parts = [p for p in request.url.path.split("/") if p]
        if parts and parts[0] == "v1":
            parts = parts[1:]
        method = request.method
        if parts == ["sandboxes"]:
            return ("create", self._create) if method == "POST" else ("list", self._list)
        if len(parts) == 2 and method == "DELETE":
            return "delete", self._delete
        if len(parts) == 2:
            return "get", self._get
        if len(parts) == 3 and parts[2] == "renew-expiration":
            return "renew", self._renew
        if len(parts) == 4 and parts[2] == "endpoints":
            return "endpoint", self._endpoint
        return "get", lambda r: _routes.error(404, "NOT_FOUND", f"no route {method} {r.url.path}")

    # -- lifecycle ------------------------------------------------------------------------
    def _create(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        sandbox_id = f"sbx{uuid.uuid4().hex[:12]}"
        box = FakeSandbox(
            sandbox_id,
            {str(k): str(v) for k, v in (body.get("metadata") or {}).items()},
            {str(k): str(v) for k, v in (body.get("env") or {}).items()},
            datetime.now(UTC),
        )
        box.file_api = self.file_api
        self.sandboxes[sandbox_id] = box
        self.created.append(sandbox_id)
        return httpx.Response(202, json=self._info(box))

    def _info(self, box: FakeSandbox) -> dict[str, Any]:
        return {
            "id": box.id,
            "status": {"state": "Running"},
            "entrypoint": ["tail", "-f", "/dev/null"],
            "createdAt": box.created_at.isoformat(),
            "expiresAt": box.created_at.isoformat(),
            "metadata": box.metadata,
            "image": {"uri": "fake"},
        }

    def _sandbox_or_404(self, request: httpx.Request) -> FakeSandbox | httpx.Response:
        sandbox_id = [p for p in request.url.path.split("/") if p and p != "v1"][1]
        box = self.sandboxes.get(sandbox_id)
        if box is None:
            return _routes.error(404, "SANDBOX_NOT_FOUND", f"Sandbox {sandbox_id} not found")
        return box

    def _get(self, request: httpx.Request) -> httpx.Response:
        box = self._sandbox_or_404(request)
        return box if isinstance(box, httpx.Response) else httpx.Response(200, json=self._info(box))

    def _list(self, request: httpx.Request) -> httpx.Response:
        # The SDK sends one `metadata` parameter, `k1=v1&k2=v2` (as the server reads it).
        wanted = dict(
            pair.split("=", 1)
            for item in request.url.params.get_list("metadata")
            for pair in item.split("&")
            if "=" in pair
        )
        items = [
            self._info(box)
            for box in self.sandboxes.values()
            if all(box.metadata.get(k) == v for k, v in wanted.items())
        ]
        page = {"page": 1, "pageSize": 20, "totalItems": len(items), "totalPages": 1}
        return httpx.Response(
            200, json={"items": items, "pagination": {**page, "hasNextPage": False}}
        )

    def _delete(self, request: httpx.Request) -> httpx.Response:
        box = self._sandbox_or_404(request)
        if isinstance(box, httpx.Response):
            return box
        del self.sandboxes[box.id]
        self.deleted.append(box.id)
        return httpx.Response(204)

    def _renew(self, request: httpx.Request) -> httpx.Response:
        box = self._sandbox_or_404(request)
        if isinstance(box, httpx.Response):
            return box
        box.renewals += 1
        return httpx.Response(200, json={"expiresAt": datetime.now(UTC).isoformat()})

    def _endpoint(self, request: httpx.Request) -> httpx.Response:
        box = self._sandbox_or_404(request)
        if isinstance(box, httpx.Response):
            return box
        endpoint = f"execd-{box.id}.fake:{_EXECD_PORT}"
        return httpx.Response(200, json={"endpoint": endpoint, "headers": {}})

    # -- execd ----------------------------------------------------------------------------
    def _execd_route(
        self, request: httpx.Request
    ) -> tuple[Route, Callable[[FakeSandbox, httpx.Request], Any]]:
        path, method = request.url.path, request.method
        table: dict[tuple[str, str], tuple[Route, Callable[[FakeSandbox, httpx.Request], Any]]]
        table = {
            ("GET", "/ping"): ("ping", lambda b, r: httpx.Response(200)),
            ("POST", "/command"): ("command", self._command),
            ("DELETE", "/command"): ("interrupt", _routes.interrupt),
            ("GET", "/files/download"): ("download", _routes.download),
            ("POST", "/files/upload"): ("upload", _routes.upload),
            ("GET", "/files/info"): ("info", _routes.file_info),
            ("GET", "/directories/list"): ("list_dir", _routes.list_dir),
            ("POST", "/directories"): ("make_dirs", _routes.make_dirs),
            ("POST", "/files/mv"): ("move", _routes.move),
            ("DELETE", "/files"): ("remove", _routes.remove_files),
            ("DELETE", "/directories"): ("remove", _routes.remove_dirs),
        }
        code = (
            self.code.route(request) if self.code is not None and path.startswith("/code") else None
        )
        if code is not None:
            return "code", code
        if method == "GET" and path.startswith("/command/status/"):
            return "status", _routes.status
        found = table.get((method, path))
        if found is None:
            return "ping", lambda b, r: httpx.Response(404, text="404 page not found")
        return found

    def _command(self, box: FakeSandbox, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        timeout = body.get("timeout")
        text, env = str(body.get("command", "")), dict(body.get("envs") or {})
        # The core's output capture (`opensandbox_core._capture`): the caller's command is in the
        # environment, its output goes to two files, and the events carry one marker line.
        captured = paths_of(text) if CAPTURE_ENV in env else None
        # Output offload (`_offload`): the command in the environment, its output to a file.
        cap = cap_of(text) if OFFLOAD_ENV in env else None
        offload = (env.pop(OFFLOAD_ENV), cap) if cap is not None else None
        if captured is not None or offload is not None:
            text = env.pop(CAPTURE_ENV)
        command = FakeCommand(
            command=text,
            cwd=body.get("cwd"),
            env=env,
            timeout_ms=int(timeout) if timeout is not None else None,
            sandbox=box,
            body=body,
        )
        box.commands.append(command)
        cwd = command.cwd
        if cwd and cwd not in box.dirs:
            message = (
                "invalid request, validation error working directory does not exist: "
                f"{cwd}: stat {cwd}: no such file or directory"
            )
            return _routes.error(400, "INVALID_REQUEST_BODY", message)
        outcome = (self.code.command(command) if self.code is not None else None) or (
            self.on_command(command) if self.on_command else None
        )
        execution_id = uuid.uuid4().hex
        rename = rename_args(command) if outcome is None else None
        if rename is not None:
            stream = self._rename_stream(box, rename, execution_id, command, request)
            return httpx.Response(
                200, headers={"Content-Type": "text/event-stream"}, content=stream
            )
        outcome = outcome or canned(command)
        if offload is not None:
            outcome = _offloaded(box, outcome, *offload)
        stream = self._stream(box, execution_id, command, outcome, request, captured)
        return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=stream)

    async def _stream(
        self,
        box: FakeSandbox,
        execution_id: str,
        command: FakeCommand,
        outcome: FakeOutcome,
        request: httpx.Request,
        captured: tuple[str, str] | None = None,
    ) -> AsyncIterator[bytes]:
        legacy = self.framing == "legacy"
        stdout, stderr = outcome.stdout, outcome.stderr
        if captured is not None:
            box.files[captured[0]] = FakeFile(outcome.stdout, 0o644)
            box.files[captured[1]] = FakeFile(outcome.stderr, 0o644)
            flags = ("o" if stdout else "") + ("e" if stderr else "")
            stdout, stderr = f"{MARKER}{flags or '-'}".encode(), b""
        if legacy and self.raw_output_files:
            box.files[f"{_TMP}/{execution_id}.stdout"] = FakeFile(stdout, 0o755)
            box.files[f"{_TMP}/{execution_id}.stderr"] = FakeFile(stderr, 0o755)
        status: dict[str, Any] = {"id": execution_id, "content": command.command, "running": True}
        box.statuses[execution_id] = status
        events = [_routes.event("init", execution_id), _routes.event("ping", "pong")]
        for kind, raw in (("stdout", stdout), ("stderr", stderr)):
            events += [_routes.event(kind, text) for text in _routes.texts(raw, legacy=legacy)]
        sent = 0
        cut = self._cut_after
        limit_ms = command.timeout_ms if self.kill_on_timeout else None
        killed = limit_ms is not None and outcome.delay * 1000 > limit_ms
        for index, event in enumerate(events):
            if cut is not None and sent >= cut:
                raise httpx.RemoteProtocolError("fake fault: stream cut", request=request)
            if index == 2 and outcome.delay:
                wait = outcome.delay
                if killed and limit_ms is not None:
                    wait = limit_ms / 1000
                await self._sleep(box, execution_id, wait)
            if captured is not None and index >= 2 and (killed or execution_id in box.interrupted):
                continue  # the wrapper was killed before it printed its marker
            yield event
            sent += 1
        if not events[2:] and outcome.delay:
            wait = min(outcome.delay, (limit_ms or 1e12) / 1000)
            await self._sleep(box, execution_id, wait)
        if cut is not None and sent >= cut:
            raise httpx.RemoteProtocolError("fake fault: stream cut", request=request)
        status["running"] = False
        if execution_id in box.interrupted:
            status.update(exit_code=-1, error="signal: terminated")
            yield _routes.error_event("-1", ["signal: terminated"])
        elif killed:
            status.update(exit_code=-1, error="signal: killed")
            yield _routes.error_event("-1", ["signal: killed"])
        elif outcome.exit_code:
            status["exit_code"] = outcome.exit_code
            yield _routes.error_event(str(outcome.exit_code), [f"exit status {outcome.exit_code}"])
        else:
            status["exit_code"] = 0
            yield _routes.event("execution_complete", None, execution_time=1)

    async def _rename_stream(
        self,
        box: FakeSandbox,
        args: list[str],
        execution_id: str,
        command: FakeCommand,
        request: httpx.Request,
    ) -> AsyncIterator[bytes]:
        """The library's rename command: it waits for the upload's marker, then renames."""
        marker = marker_of(args)
        for _ in range(5000):
            if not marker or marker in box.files:
                break
            await asyncio.sleep(0.001)
        landed = not marker or marker in box.files
        outcome = renamed(args, box) if landed else FakeOutcome(exit_code=86)
        async for chunk in self._stream(box, execution_id, command, outcome, request):
            yield chunk

    @staticmethod
    async def _sleep(box: FakeSandbox, execution_id: str, seconds: float) -> None:
        step = 0.01
        waited = 0.0
        while waited < seconds and execution_id not in box.interrupted:
            await asyncio.sleep(min(step, seconds - waited))
            waited += step


def _offloaded(box: FakeSandbox, outcome: FakeOutcome, path: str, cap: int) -> FakeOutcome:
    """What the offload wrapper does with `outcome`: its output (stdout, then stderr) to the
    file `path`, capped, and one marker line instead."""
    data = (outcome.stdout + outcome.stderr)[:cap]
    box.files[path] = FakeFile(data, 0o644)
    lines = data.count(b"\n")
    marker = f"{OFFLOAD_MARKER} {outcome.exit_code} {lines} {len(data)}\n"
    return dataclasses.replace(outcome, stdout=marker.encode(), stderr=b"")
