"""Time travel that includes the files: a sandbox snapshot tied to each LangGraph checkpoint.

`TimeTravelSandboxBackend` is a `ThreadSandboxBackend` plus an agent middleware
(`backend.middleware`). After every tool call that may change files (`write_file`, `edit_file`,
`execute`, `task` by default) the middleware writes a fresh version marker into the sandbox, takes
a snapshot (`opensandbox_core.snapshot_sandbox`) and records
`{"sandbox_id", "snapshot_id", "marker"}` in the thread's state under `SANDBOX_FILES_KEY`, in the
same step, so the checkpoint written after that step names the snapshot of exactly its files.

When a run continues from any checkpoint (the latest one, or an earlier one to fork or replay),
the next tool call compares the recorded marker with the one in the recorded sandbox:
- equal: the sandbox still holds that checkpoint's files; the call runs there;
- different (another branch changed the files since) or the sandbox is gone: a new sandbox is
  created from the recorded snapshot (`opensandbox_core.restore_snapshot`) and the branch uses it
  from then on (its id goes into the state with the call's result). Each fork gets its own copy.

Ownership: the thread's sandbox and every copy made for its forks belong to the thread.
A copy gets fresh labels (a new ownership tag, a fork key instead of the thread key, and
`FORK_OF_METADATA_KEY` = the thread key), so `for_thread()` never mistakes a copy for the
thread's sandbox and the source's owner never deletes it; `destroy_thread()` deletes the thread's
sandbox, its copies, and the snapshots taken of any of them.

Costs: one marker write and one snapshot per file-changing tool call (on Docker a `docker commit`,
0.6 to 0.8 s until `Ready`, plus the image's disk space until `destroy_thread()`); a fork's first
tool call pays a restore (about 2 s until its first command). A process that first meets a branch
reads the marker once. Not supported: one branch run by two processes at the same time.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NotRequired, TypedDict

from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from opensandbox_core import (
    SandboxUnavailableError,
    destroy_sandbox,
    list_sandboxes,
    restore_snapshot,
    run_blocking,
    snapshot_sandbox,
)
from opensandbox_core import delete_snapshot as _delete_snapshot
from opensandbox_core import list_snapshots as _list_snapshots
from opensandbox_core.metadata import FORK_OF_KEY, adapter_labels

from ._backend import OpenSandboxBackend
from ._threads import NAMESPACE_METADATA_KEY, THREAD_METADATA_KEY, ThreadSandboxBackend

__all__ = [
    "FORK_OF_METADATA_KEY",
    "SANDBOX_FILES_KEY",
    "SandboxFiles",
    "TimeTravelSandboxBackend",
]

logger = logging.getLogger(__name__)

SANDBOX_FILES_KEY = "sandbox_files"
"""The state key holding the `SandboxFiles` record of the checkpoint's files."""
FORK_OF_METADATA_KEY = FORK_OF_KEY
"""Metadata label of a sandbox restored for a fork: the thread key of the thread it belongs to."""
MARKER_PATH = "/var/tmp/.opensandbox-agents-files-version"  # noqa: S108 - inside the sandbox
CHANGING_TOOLS = frozenset({"write_file", "edit_file", "execute", "task"})

_BRANCH: contextvars.ContextVar[OpenSandboxBackend | None] = contextvars.ContextVar(
    "opensandbox_time_travel_branch", default=None
)


class SandboxFiles(TypedDict):
    """Where a checkpoint's files are: the sandbox that had them, its snapshot, the marker."""

    sandbox_id: str
    snapshot_id: str
    marker: str
    seq: float


def _latest(old: SandboxFiles | None, new: SandboxFiles | None) -> SandboxFiles | None:
    """Reducer: the record written last wins (parallel tool calls of one step each write one)."""
    if old is None or new is None:
        return new if new is not None else old
    return new if new["seq"] >= old["seq"] else old


class _FilesState(AgentState[Any]):
    sandbox_files: NotRequired[Annotated[SandboxFiles | None, _latest]]


class _TimeTravelMiddleware(AgentMiddleware[_FilesState, Any, Any]):
    """Snapshots after file-changing tool calls; restores a checkpoint's files when needed."""

    state_schema = _FilesState

    def __init__(self, backend: TimeTravelSandboxBackend) -> None:
        super().__init__()
        self._backend = backend

    @property
    def name(self) -> str:
        return "OpenSandboxTimeTravel"

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        thread_id = self._backend.current_thread_id()
        backend, record = run_blocking(self._backend._branch(request.state, thread_id))
        token = _BRANCH.set(backend)
        try:
            result = handler(request)
        finally:
            _BRANCH.reset(token)
        if request.tool_call["name"] in self._backend.changing_tools:
            record = run_blocking(self._backend._record(backend))
        return _with_record(result, record)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        thread_id = self._backend.current_thread_id()
        backend, record = await self._backend._branch(request.state, thread_id)
        token = _BRANCH.set(backend)
        try:
            result = await handler(request)
        finally:
            _BRANCH.reset(token)
        if request.tool_call["name"] in self._backend.changing_tools:
            record = await self._backend._record(backend)
        return _with_record(result, record)


def _with_record(
    result: ToolMessage | Command[Any], record: SandboxFiles | None
) -> ToolMessage | Command[Any]:
    if record is None:
        return result
    if isinstance(result, ToolMessage):
        return Command(update={"messages": [result], SANDBOX_FILES_KEY: record})
    if isinstance(result.update, dict):
        return Command(
            graph=result.graph,
            update={**result.update, SANDBOX_FILES_KEY: record},
            resume=result.resume,
            goto=result.goto,
        )
    logger.warning("A tool returned a Command without a dict update; its files are not recorded")
    return result


class TimeTravelSandboxBackend(ThreadSandboxBackend):
    """A `ThreadSandboxBackend` whose forks and replays also restore the sandbox's files.

    ```python
    backend = TimeTravelSandboxBackend(namespace="my-app")
    agent = create_deep_agent(
        model=..., backend=backend, middleware=[backend.middleware], checkpointer=saver
    )
    agent.invoke({"messages": "..."}, {"configurable": {"thread_id": "t1"}})
    earlier = next(s for s in agent.get_state_history(config) if ...)  # a checkpoint
    agent.invoke({"messages": "try another way"}, earlier.config)  # a fork, with those files
    backend.destroy_thread("t1")  # the thread's sandbox, its forks' copies, their snapshots
    ```

    Pass `backend.middleware` to the agent, or nothing is snapshotted. The arguments are those of
    `ThreadSandboxBackend`, plus `changing_tools`: the tool names after which a snapshot is
    taken. Needs a server whose runtime has snapshots (opensandbox-server 1.1.1 on Docker);
    elsewhere the first snapshot raises `opensandbox_core.SnapshotsUnsupportedError`.
    """

    def __init__(self, *, changing_tools: frozenset[str] = CHANGING_TOOLS, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.changing_tools = frozenset(changing_tools)
        self.middleware: AgentMiddleware[Any, Any, Any] = _TimeTravelMiddleware(self)
        self._markers: dict[str, str] = {}  # sandbox id -> the marker this process knows it has
        self._copies: dict[str, OpenSandboxBackend] = {}

    # -- which sandbox a branch uses ---------------------------------------------------------
    def _current(self) -> OpenSandboxBackend:
        return _BRANCH.get() or super()._current()

    async def _acurrent(self) -> OpenSandboxBackend:
        return _BRANCH.get() or await super()._acurrent()

    @property
    def id(self) -> str:
        """The sandbox id the current tool call runs in (the thread's, or a fork's copy)."""
        branch = _BRANCH.get()
        return branch.id if branch is not None else super().id

    async def _sandbox(self, sandbox_id: str) -> OpenSandboxBackend:
        backend = self._copies.get(sandbox_id)
        if backend is None:
            backend = self._copies[sandbox_id] = await self._attach(sandbox_id)
        return backend

    async def _branch(
        self, state: Any, thread_id: str
    ) -> tuple[OpenSandboxBackend, SandboxFiles | None]:
        """The sandbox holding this state's files, and a record to store if it is a new copy."""
        record: SandboxFiles | None = (state or {}).get(SANDBOX_FILES_KEY)
        if not record:
            return await self.afor_thread(thread_id), None
        sandbox_id, marker = record["sandbox_id"], record["marker"]
        if self._markers.get(sandbox_id) == marker:
            return await self._sandbox(sandbox_id), None
        try:
            backend = await self._sandbox(sandbox_id)
            found = (await backend.session.read_bytes(MARKER_PATH)).decode(errors="replace")
        except (SandboxUnavailableError, OSError) as exc:
            self._copies.pop(sandbox_id, None)
            found = f"<{type(exc).__name__}>"
        if found == marker:
            self._markers[sandbox_id] = marker
            return backend, None
        started = time.monotonic()
        thread_key = self.thread_key(thread_id)
        fork_key = hashlib.sha256(f"{thread_key}\0{uuid.uuid4().hex}".encode()).hexdigest()[:40]
        session = await restore_snapshot(
            record["snapshot_id"],
            connection=self._connection,
            metadata={
                **adapter_labels("deepagents"),
                NAMESPACE_METADATA_KEY: self.namespace,
                THREAD_METADATA_KEY: fork_key,
                FORK_OF_METADATA_KEY: thread_key,
            },
            lifetime=self._lifetime if self._lifetime is None else max(self._lifetime, 60),
            working_dir=self._working_dir,
            default_timeout=self._command_timeout,
        )
        copy_id = session.id
        assert copy_id is not None
        await session.aclose()  # the copy belongs to the thread (destroy_thread), not to a session
        logger.info(
            "Restored the files of a checkpoint from snapshot %s into sandbox %s (%.2f s)",
            record["snapshot_id"],
            copy_id,
            time.monotonic() - started,
        )
        self._markers[copy_id] = marker
        moved = SandboxFiles(
            sandbox_id=copy_id, snapshot_id=record["snapshot_id"], marker=marker, seq=time.time()
        )
        return await self._sandbox(copy_id), moved

    async def _record(self, backend: OpenSandboxBackend) -> SandboxFiles:
        """Mark the sandbox's files with a new version and snapshot them."""
        marker = uuid.uuid4().hex
        seq = time.time()
        await backend.session.write_bytes(MARKER_PATH, marker.encode())
        self._markers[backend.id] = marker
        snapshot = await snapshot_sandbox(backend.session, name=f"timetravel-{marker[:12]}")
        return SandboxFiles(sandbox_id=backend.id, snapshot_id=snapshot.id, marker=marker, seq=seq)

    # -- cleanup ------------------------------------------------------------------------------
    async def find_copies(self, thread_id: str) -> list[str]:
        """The ids of the sandboxes restored for this thread's forks (never creates one)."""
        found = await list_sandboxes(
            self._connection,
            metadata={
                NAMESPACE_METADATA_KEY: self.namespace,
                FORK_OF_METADATA_KEY: self.thread_key(thread_id),
            },
        )
        return sorted(s.id for s in found)

    async def adestroy_thread(self, thread_id: str) -> list[str]:
        """Delete the thread's sandbox, its forks' copies and every snapshot taken of them."""
        own = await self.find_thread(thread_id)
        sandboxes = ([own] if own else []) + await self.find_copies(thread_id)
        snapshots = [
            s.id
            for sandbox_id in sandboxes
            for s in await _list_snapshots(self._connection, sandbox_id=sandbox_id)
        ]
        removed = await super().adestroy_thread(thread_id)
        for sandbox_id in sandboxes:
            backend = self._copies.pop(sandbox_id, None)
            if backend is not None:
                await backend.aclose()
            self._markers.pop(sandbox_id, None)
            if sandbox_id not in removed and await destroy_sandbox(sandbox_id, self._connection):
                removed.append(sandbox_id)
        for snapshot_id in snapshots:
            await _delete_with_retry(snapshot_id, self)
        logger.info(
            "Destroyed %d sandbox(es) and %d snapshot(s) of a thread", len(removed), len(snapshots)
        )
        return removed

    async def aclose(self) -> None:
        copies = list(self._copies.values())
        self._copies.clear()
        for backend in copies:
            await backend.aclose()
        await super().aclose()


async def _delete_with_retry(snapshot_id: str, owner: TimeTravelSandboxBackend) -> None:
    """Delete a snapshot; its image may stay busy for a moment after its sandboxes are gone."""
    deadline = time.monotonic() + 30
    while True:
        try:
            await _delete_snapshot(snapshot_id, owner._connection)
            return
        except Exception:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(1)
