"""`ThreadSandboxBackend`: one sandbox per LangGraph thread (the core's `KeyedSandboxes`, keyed
by thread id), every protocol operation forwarded natively. Guide: docs/threads.md; design:
docs/deepagents.md#threadsandboxbackend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deepagents.backends.sandbox import BaseSandbox

from opensandbox_core import AsyncSandboxSession
from opensandbox_core.adapters import twin
from opensandbox_core.fleet import KeyedSandboxes

from ._backend import OpenSandboxBackend
from ._options import SEED_ORDER, ThreadOptions
from ._signatures import takes_keywords

__all__ = [
    "NAMESPACE_METADATA_KEY",
    "OPERATIONS",
    "THREAD_METADATA_KEY",
    "ForwardingBackend",
    "ThreadSandboxBackend",
]

NAMESPACE_METADATA_KEY = "opensandbox-agents.namespace"
"""Metadata label holding the `namespace` of the `ThreadSandboxBackend` that made the sandbox
(passed to the core's `KeyedSandboxes` as its `namespace_label`)."""
THREAD_METADATA_KEY = "opensandbox-agents.thread"
"""Metadata label holding a digest of (namespace, thread id); see `ThreadSandboxBackend.thread_key`
(passed to the core's `KeyedSandboxes` as its `key_label`)."""


_NAMES = (
    "execute execute_with_offload upload_files download_files ls read write edit glob grep delete"
)
OPERATIONS = tuple(_NAMES.split())
"""The protocol's operations; each has an async twin named with an `a` in front."""


class ForwardingBackend(BaseSandbox):
    """A Deep Agents backend whose every operation runs on the `OpenSandboxBackend` that
    `_current()` (blocking) or `_acurrent()` (async) returns for the call."""

    enable_capture_offload = True
    """`execute_with_offload` leaves a large output in the sandbox (see `OpenSandboxBackend`)."""

    def _current(self) -> OpenSandboxBackend:
        raise NotImplementedError

    async def _acurrent(self) -> OpenSandboxBackend:
        raise NotImplementedError


def _install(name: str, method: Callable[..., Any]) -> None:
    """Define `ForwardingBackend.<name>` as `method`, with the docstring and signature of
    `OpenSandboxBackend.<name>` (`inspect.getdoc` then finds the protocol's docstring)."""
    wrapped = getattr(OpenSandboxBackend, name)
    method.__name__ = name
    method.__qualname__ = f"{ForwardingBackend.__name__}.{name}"
    method.__doc__ = wrapped.__doc__
    method.__module__ = ForwardingBackend.__module__
    setattr(method, "__wrapped__", wrapped)  # noqa: B010 - `inspect.signature` follows it
    setattr(ForwardingBackend, name, method)


def _forward(name: str) -> None:
    """Define the blocking and async forwarders of the operation `name`."""

    def forward(self: ForwardingBackend, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._current(), name)(*args, **kwargs)

    async def aforward(self: ForwardingBackend, *args: Any, **kwargs: Any) -> Any:
        return await getattr(await self._acurrent(), "a" + name)(*args, **kwargs)

    _install(name, forward)  # the blocking one reads LangGraph's context in the caller's thread
    _install("a" + name, aforward)


for _operation in OPERATIONS:
    _forward(_operation)
del _operation


class ThreadSandboxBackend(ForwardingBackend):
    """A Deep Agents backend that gives every LangGraph thread a sandbox of its own.

    ```python
    backend = ThreadSandboxBackend(namespace="my-app")
    agent = create_deep_agent(model=..., backend=backend, checkpointer=SqliteSaver(conn))
    agent.invoke({"messages": "..."}, {"configurable": {"thread_id": "ticket-42"}})
    backend.destroy_thread("ticket-42")  # when the thread is finished
    ```

    A thread's first operation creates its sandbox (or finds it again, in any process with the
    same `namespace` and server); later ones reuse it. The keywords are `ThreadOptions`': those
    of `OpenSandboxBackend.create()`, plus `namespace` and `settle_timeout`. Construction does
    no I/O.
    """

    @takes_keywords(ThreadOptions, SEED_ORDER)
    def __init__(self, options: ThreadOptions) -> None:
        self._namespace = options.namespace
        self._options = options.sandbox_options()
        self._attach_options = options.attach_options()
        self._connection = options.connection()
        self._keys = KeyedSandboxes(
            namespace=options.namespace,
            connection=self._connection,
            create=lambda labels: self._options.create(labels, connection=self._connection),
            attach=self._attach_session,
            key_label=THREAD_METADATA_KEY,
            namespace_label=NAMESPACE_METADATA_KEY,
            settle_timeout=float(options.settle_timeout),
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(namespace={self._namespace!r}, image={self._options.image!r}, "
            f"connection={self._connection!r})"
        )

    def _attach_session(self, sandbox_id: str) -> AsyncSandboxSession:
        return self._attach_options.attach(sandbox_id, connection=self._connection)

    def _backend(self, session: AsyncSandboxSession) -> OpenSandboxBackend:
        """A backend on a started session (what it learns is kept by the session and the core)."""
        return OpenSandboxBackend(session, stderr_prefix=self._options.stderr_prefix)

    # -- identity ---------------------------------------------------------------------------
    @property
    def namespace(self) -> str:
        return self._namespace

    def thread_key(self, thread_id: str) -> str:
        """The `THREAD_METADATA_KEY` value of this thread's sandbox (a digest of namespace and id)."""
        if not isinstance(thread_id, str) or not thread_id:
            raise ValueError(f"thread_id must be a non-empty string, got {thread_id!r}.")
        return self._keys.digest(thread_id)

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
        self.thread_key(thread_id)  # validates
        return self._backend(self._keys.session_blocking(thread_id))

    async def afor_thread(self, thread_id: str) -> OpenSandboxBackend:
        """`for_thread()` on the caller's event loop."""
        self.thread_key(thread_id)
        return self._backend(await self._keys.session(thread_id))

    async def find_thread(self, thread_id: str) -> str | None:
        """The id of this thread's sandbox on the server, or None (never creates one)."""
        self.thread_key(thread_id)
        return await self._keys.find(thread_id)

    async def adestroy_thread(self, thread_id: str) -> list[str]:
        """`destroy_thread()` on the caller's event loop."""
        self.thread_key(thread_id)
        return await self._keys.destroy(thread_id)

    async def aclose(self) -> None:
        """`close()` for async code."""
        await self._keys.aclose()

    destroy_thread = twin(
        adestroy_thread,
        name="destroy_thread",
        on_self=True,
        doc="""Delete this thread's sandbox (files included); returns the ids deleted.

        Call it when the thread is finished. Every process's next call for the thread then
        creates a new, empty sandbox.
        """,
    )
    close = twin(
        aclose,
        name="close",
        on_self=True,
        doc="Close local connections of every thread's backend. The sandboxes keep running.",
    )

    # -- the sandbox every operation runs on (`ForwardingBackend`) ---------------------------
    def _current(self) -> OpenSandboxBackend:
        return self.for_thread(self.current_thread_id())

    async def _acurrent(self) -> OpenSandboxBackend:
        return await self.afor_thread(self.current_thread_id())
