"""Time travel that includes the files: a sandbox snapshot tied to each LangGraph checkpoint
(the core's `CheckpointFiles`). How and at what cost: docs/deepagents.md#time-travel and
docs/threads.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Annotated, Any, NotRequired, TypedDict, cast

from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from opensandbox_core.adapters import run_blocking
from opensandbox_core.fleet import CheckpointFiles, FilesVersion
from opensandbox_core.metadata import adapter_labels

from ._backend import OpenSandboxBackend
from ._options import ADAPTER
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
FORK_OF_METADATA_KEY = "opensandbox-agents.fork-of"
"""Metadata label of a sandbox restored for a fork: the thread key of the thread it belongs to
(the core's `CheckpointFiles` writes it as its `copy_label`)."""
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


Result = ToolMessage | Command[Any]
Branch = tuple[OpenSandboxBackend, SandboxFiles | None]  # a tool call's backend, a new record


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
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Result]
    ) -> Result:
        thread_id = self._backend.current_thread_id()  # LangGraph's context: not the portal's
        backend, record = run_blocking(self._backend._branch(request.state, thread_id))
        with _on(backend):
            result = handler(request)
        if request.tool_call["name"] in self._backend.changing_tools:
            record = run_blocking(self._backend._snapshot(backend))
        return _with_record(result, record)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Result]]
    ) -> Result:
        backend, record = await self._backend._branch(
            request.state, self._backend.current_thread_id()
        )
        with _on(backend):
            result = await handler(request)
        if request.tool_call["name"] in self._backend.changing_tools:
            record = await self._backend._snapshot(backend)
        return _with_record(result, record)


@contextlib.contextmanager
def _on(backend: OpenSandboxBackend) -> Iterator[None]:
    """Within this block, the tool's operations run on `backend` (its branch's sandbox)."""
    token = _BRANCH.set(backend)
    try:
        yield
    finally:
        _BRANCH.reset(token)


def _with_record(result: Result, record: SandboxFiles | None) -> Result:
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
    agent.invoke({"messages": "try another way"}, earlier.config)  # a fork, with its files
    backend.destroy_thread("t1")  # the thread's sandbox, its forks' copies, their snapshots
    ```

    Pass `backend.middleware` to the agent, or nothing is snapshotted. The arguments are those
    of `ThreadSandboxBackend` plus `changing_tools` (the tool names after which a snapshot is
    taken). Needs a runtime with snapshots, else `SnapshotsUnsupportedError` at the first one.
    """

    def __init__(self, *, changing_tools: frozenset[str] = CHANGING_TOOLS, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.changing_tools = frozenset(changing_tools)
        self.middleware: AgentMiddleware[Any, Any, Any] = _TimeTravelMiddleware(self)
        self._files = CheckpointFiles(
            namespace=self.namespace,
            connection=self._connection,
            attach=self._attach_session,
            lifetime=self._options.sandbox_spec().lifetime,
            working_dir=self._options.working_dir,
            default_timeout=self._options.session_options()["default_timeout"],
            key_label=THREAD_METADATA_KEY,
            namespace_label=NAMESPACE_METADATA_KEY,
            copy_label=FORK_OF_METADATA_KEY,
            labels=adapter_labels(ADAPTER),
        )

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

    async def _branch(self, state: Any, thread_id: str) -> Branch:
        """The sandbox holding this state's files, and a record to store if it is a new copy."""
        record: SandboxFiles | None = (state or {}).get(SANDBOX_FILES_KEY)
        if not record:
            return await self.afor_thread(thread_id), None
        version = FilesVersion(**record)
        session, moved = await self._files.open(version, owner=self.thread_key(thread_id))
        return self._backend(session), None if moved is None else _record_of(moved)

    async def _snapshot(self, backend: OpenSandboxBackend) -> SandboxFiles:
        """Mark the sandbox's files with a new version and snapshot them."""
        return _record_of(await self._files.save(backend.session, name=None))

    # -- cleanup ------------------------------------------------------------------------------
    async def find_copies(self, thread_id: str) -> list[str]:
        """The ids of the sandboxes restored for this thread's forks (never creates one)."""
        return await self._files.copies(self.thread_key(thread_id))

    async def adestroy_thread(self, thread_id: str) -> list[str]:
        """Delete the thread's sandbox, its forks' copies and every snapshot taken of them."""
        own = await self.find_thread(thread_id)
        removed = await self._files.destroy(self.thread_key(thread_id), [own] if own else [])
        return [*removed, *await super().adestroy_thread(thread_id)]

    async def aclose(self) -> None:
        await self._files.aclose()
        await super().aclose()


def _record_of(version: FilesVersion) -> SandboxFiles:
    return cast(SandboxFiles, dataclasses.asdict(version))
