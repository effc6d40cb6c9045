"""`ThreadSandboxBackend`: one sandbox per LangGraph thread, found again through its metadata.

Deep Agents 0.7 takes a backend instance, not a factory, so the per-thread choice happens on each
call: the backend reads the running graph's `thread_id` (`langgraph.config.get_config()`) and
forwards the call to that thread's `OpenSandboxBackend`.

How a thread's sandbox is found, and why there is never a second one:
- Every sandbox made here carries two metadata labels: the backend's `namespace` and a digest of
  (namespace, thread id). A digest, because the server only accepts short label-safe values and
  thread ids are arbitrary strings. A new process (a resumed thread, another worker) lists the
  server's sandboxes by those labels and attaches; nothing has to be stored beside the checkpoint.
- Within one process, concurrent first calls of a thread share one lookup (a future per thread).
- Across processes nothing can lock, so a thread with no sandbox is settled by create-then-elect:
  each racer creates a sandbox, lists the thread's sandboxes again, and keeps its own only when no
  other one is as old or older (the server's `created_at`). A racer that loses destroys the
  sandbox it created (it owns it) and attaches to the oldest. Two racers cannot both keep theirs:
  the later lister sees the earlier sandbox, and `created_at` never orders a later sandbox first
  (on Docker it is the container's creation time, on Kubernetes the resource's, in whole seconds:
  a tie makes both yield and look again). Verified against opensandbox-server 1.1.1 on Docker.
- Ownership: a thread's sandbox belongs to the thread, not to the process that happened to create
  it. Nothing here destroys it except `destroy_thread()`, which the application calls when the
  thread is finished; the idle `timeout` removes sandboxes of abandoned threads. `close()` only
  releases local connections.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import random
import threading
import time
from collections.abc import Callable

from opensandbox_core import (
    SandboxSummary,
    SandboxUnavailableError,
    ServerError,
    destroy_sandbox,
    list_sandboxes,
    run_blocking,
)
from opensandbox_core import (
    validation as _validate,
)
from opensandbox_core.metadata import NAMESPACE_KEY, THREAD_KEY

from ._backend import OpenSandboxBackend
from ._forward import ForwardingBackend
from ._options import ThreadOptions, takes_options

__all__ = ["NAMESPACE_METADATA_KEY", "THREAD_METADATA_KEY", "ThreadSandboxBackend"]

logger = logging.getLogger(__name__)

NAMESPACE_METADATA_KEY = NAMESPACE_KEY  # the project's keys: opensandbox_core.metadata
"""Metadata label holding the `namespace` of the `ThreadSandboxBackend` that made the sandbox."""
THREAD_METADATA_KEY = THREAD_KEY
"""Metadata label holding a digest of (namespace, thread id); see `ThreadSandboxBackend.thread_key`."""

_SETTLE_POLL = (0.2, 0.6)  # seconds, random: racers that both yielded do not retry in step


def _state(summary: SandboxSummary) -> str:
    return summary.state.rsplit(".", 1)[-1].lower()


def _order(summary: SandboxSummary) -> tuple[float, str]:
    return (summary.created_at.timestamp(), summary.id)


class ThreadSandboxBackend(ForwardingBackend):
    """A Deep Agents backend that gives every LangGraph thread a sandbox of its own.

    ```python
    from deepagents import create_deep_agent
    from langgraph.checkpoint.sqlite import SqliteSaver
    from deepagents_opensandbox_backend import ThreadSandboxBackend

    backend = ThreadSandboxBackend(namespace="my-app")
    agent = create_deep_agent(model=..., backend=backend, checkpointer=SqliteSaver(conn))
    agent.invoke({"messages": "..."}, {"configurable": {"thread_id": "ticket-42"}})
    backend.destroy_thread("ticket-42")  # when the thread is finished
    ```

    The first operation of a thread creates its sandbox (or, in a new process, finds it again
    through its metadata); later operations of that thread reuse it, in this process and in any
    other with the same `namespace` and server. The keyword arguments are `ThreadOptions`'
    fields: those of `OpenSandboxBackend.create()`, plus `namespace` (separates applications
    sharing one server: letters, digits, `-`, `_`, `.`, at most 63 characters) and
    `settle_timeout` (how long a racing first call may take to agree on the thread's sandbox).

    `timeout` (idle lifetime, default 30 minutes, renewed by every operation) is what removes the
    sandboxes of threads nobody finishes; `None` keeps them until `destroy_thread()`.
    Construction does no I/O.
    """

    @takes_options(ThreadOptions)
    def __init__(self, options: ThreadOptions) -> None:
        self._namespace = options.namespace
        self._options = options.sandbox_options()
        self._attach_options = options.attach_options()
        self._connection = options.connection()
        # Read by subclasses (`TimeTravelSandboxBackend`) to shape the sandboxes they make.
        self._lifetime = self._options.sandbox_spec().lifetime
        self._working_dir = options.working_dir
        self._command_timeout = _validate.idle_lifetime(options.command_timeout, "command_timeout")
        self._settle_timeout = float(options.settle_timeout)
        self._lock = threading.Lock()
        self._threads: dict[str, concurrent.futures.Future[OpenSandboxBackend]] = {}

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(namespace={self._namespace!r}, image={self._options.image!r}, "
            f"threads={len(self._threads)}, connection={self._connection!r})"
        )

    # -- identity ---------------------------------------------------------------------------
    @property
    def namespace(self) -> str:
        return self._namespace

    def thread_key(self, thread_id: str) -> str:
        """The `THREAD_METADATA_KEY` value of this thread's sandbox (a digest of namespace and id)."""
        if not isinstance(thread_id, str) or not thread_id:
            raise ValueError(f"thread_id must be a non-empty string, got {thread_id!r}.")
        digest = hashlib.sha256(f"{self._namespace}\0{thread_id}".encode()).hexdigest()
        return digest[:40]

    @staticmethod
    def current_thread_id() -> str:
        """The `thread_id` of the LangGraph run this call belongs to."""
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:
            raise RuntimeError(
                "ThreadSandboxBackend was used outside a LangGraph run, so it cannot tell which "
                "thread's sandbox to use: call it from the agent, or use for_thread(thread_id)."
            ) from None
        thread_id = (config.get("configurable") or {}).get("thread_id")
        if thread_id is None or thread_id == "":
            raise ValueError(
                "The LangGraph run has no thread_id, so it has no sandbox of its own: invoke the "
                "agent with config={'configurable': {'thread_id': ...}} (and a checkpointer)."
            )
        return str(thread_id)

    @property
    def id(self) -> str:
        """The sandbox id of the current LangGraph thread (created on first use)."""
        return self.for_thread(self.current_thread_id()).id

    # -- finding, creating, destroying ------------------------------------------------------
    def for_thread(self, thread_id: str) -> OpenSandboxBackend:
        """The backend of this thread's sandbox, found again or created (blocking)."""
        future, mine = self._claim(thread_id)
        if mine:
            self._settle(thread_id, future, lambda: run_blocking(self._find_or_create(thread_id)))
        return future.result()

    async def afor_thread(self, thread_id: str) -> OpenSandboxBackend:
        """`for_thread()` on the caller's event loop."""
        future, mine = self._claim(thread_id)
        if mine:
            try:
                backend = await self._find_or_create(thread_id)
            except BaseException as exc:
                self._fail(thread_id, future, exc)
                raise
            future.set_result(backend)
        return await asyncio.wrap_future(future)

    def _claim(self, thread_id: str) -> tuple[concurrent.futures.Future[OpenSandboxBackend], bool]:
        self.thread_key(thread_id)  # validates
        with self._lock:
            future = self._threads.get(thread_id)
            if future is not None:
                return future, False
            future = concurrent.futures.Future()
            self._threads[thread_id] = future
            return future, True

    def _settle(
        self,
        thread_id: str,
        future: concurrent.futures.Future[OpenSandboxBackend],
        resolve: Callable[[], OpenSandboxBackend],
    ) -> None:
        try:
            backend = resolve()
        except BaseException as exc:
            self._fail(thread_id, future, exc)
            raise
        future.set_result(backend)

    def _fail(
        self,
        thread_id: str,
        future: concurrent.futures.Future[OpenSandboxBackend],
        exc: BaseException,
    ) -> None:
        with self._lock:
            if self._threads.get(thread_id) is future:
                del self._threads[thread_id]  # the next call tries again
        future.set_exception(exc)
        future.exception()  # marks it retrieved: waiters re-raise it, nobody logs it as lost

    async def _live(self, key: str) -> list[SandboxSummary]:
        found = await list_sandboxes(
            self._connection,
            metadata={NAMESPACE_METADATA_KEY: self._namespace, THREAD_METADATA_KEY: key},
        )
        return sorted((s for s in found if s.activity() != "dead"), key=_order)

    async def find_thread(self, thread_id: str) -> str | None:
        """The id of this thread's sandbox on the server, or None (never creates one)."""
        live = await self._live(self.thread_key(thread_id))
        return live[0].id if live else None

    async def _find_or_create(self, thread_id: str) -> OpenSandboxBackend:
        key = self.thread_key(thread_id)
        deadline = time.monotonic() + self._settle_timeout
        while True:
            live = await self._live(key)
            if live:
                oldest = live[0]
                settled = len(live) == 1 or _order(live[1])[0] > _order(oldest)[0]
                if settled and _state(oldest) == "running":
                    try:
                        backend = await self._attach(oldest.id)
                    except (SandboxUnavailableError, ServerError) as exc:
                        if isinstance(exc, ServerError) and not exc.retryable:
                            raise
                        # A duplicate being deleted, or a sandbox whose creator is still
                        # waiting for its daemon: look again.
                        logger.info(
                            "Sandbox %s of a thread did not answer (%s); looking again",
                            oldest.id,
                            type(exc).__name__,
                        )
                    else:
                        logger.info("Attached to sandbox %s of a thread", oldest.id)
                        return backend
            else:
                backend = await self._create(key)
                live = await self._live(key)
                mine = next((s for s in live if s.id == backend.id), None)
                rivals = [
                    s
                    for s in live
                    if s.id != backend.id and (mine is None or _order(s)[0] <= _order(mine)[0])
                ]
                if not rivals:
                    logger.info("Created sandbox %s for a thread", backend.id)
                    return backend
                logger.info(
                    "Another process created a sandbox for the same thread at the same time; "
                    "deleting this process's duplicate %s",
                    backend.id,
                )
                await backend.akill()
            if time.monotonic() >= deadline:
                raise ServerError(
                    f"Could not settle on one sandbox for the thread within "
                    f"{self._settle_timeout:g} s (its sandboxes kept changing or never became "
                    "ready). It is safe to retry.",
                    retryable=True,
                )
            await asyncio.sleep(random.uniform(*_SETTLE_POLL))  # noqa: S311 - jitter, not secrecy

    async def _create(self, key: str) -> OpenSandboxBackend:
        session = self._options.create(
            {NAMESPACE_METADATA_KEY: self._namespace, THREAD_METADATA_KEY: key},
            connection=self._connection,
        )
        backend = OpenSandboxBackend(session, stderr_prefix=self._options.stderr_prefix)
        await backend._start_owned()
        return backend

    async def _attach(self, sandbox_id: str) -> OpenSandboxBackend:
        session = self._attach_options.attach(sandbox_id, connection=self._connection)
        backend = OpenSandboxBackend(session, stderr_prefix=self._options.stderr_prefix)
        await session.start()
        return backend

    def destroy_thread(self, thread_id: str) -> list[str]:
        """Delete this thread's sandbox (files included); returns the ids deleted.

        Call it when the thread is finished. Every process's next call for the thread then
        creates a new, empty sandbox.
        """
        return run_blocking(self.adestroy_thread(thread_id))

    async def adestroy_thread(self, thread_id: str) -> list[str]:
        """`destroy_thread()` on the caller's event loop."""
        key = self.thread_key(thread_id)
        with self._lock:
            future = self._threads.pop(thread_id, None)
        if future is not None and future.done() and future.exception() is None:
            await future.result().aclose()
        removed = []
        for summary in await self._live(key):
            if await destroy_sandbox(summary.id, self._connection):
                removed.append(summary.id)
        logger.info("Destroyed %d sandbox(es) of a thread", len(removed))
        return removed

    def close(self) -> None:
        """Close local connections of every thread's backend. The sandboxes keep running."""
        run_blocking(self.aclose())

    async def aclose(self) -> None:
        """`close()` for async code."""
        with self._lock:
            futures = list(self._threads.values())
            self._threads.clear()
        for future in futures:
            if future.done() and future.exception() is None:
                await future.result().aclose()

    # -- the sandbox every operation runs on (`ForwardingBackend`) ---------------------------
    def _current(self) -> OpenSandboxBackend:
        return self.for_thread(self.current_thread_id())

    async def _acurrent(self) -> OpenSandboxBackend:
        return await self.afor_thread(self.current_thread_id())
