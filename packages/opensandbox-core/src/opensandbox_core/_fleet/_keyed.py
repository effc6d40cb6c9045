"""`KeyedSandboxes`: one sandbox per key (a conversation, a thread, a user), found again by any
process through the sandbox's metadata, never created twice.

How a key's sandbox is found, and why there is never a second one:
- Every sandbox made here carries two metadata labels: the `namespace` and a digest of
  (namespace, key). A digest, because the server only accepts short label-safe values and keys
  are arbitrary strings. A new process lists the server's sandboxes by those labels and
  attaches; nothing has to be stored anywhere else.
- Within one process, concurrent first calls for a key share one lookup (a future per key),
  from any thread or event loop.
- Across processes nothing can lock, so a key with no sandbox is settled by create-then-elect:
  each racer creates a sandbox, lists the key's sandboxes again, and keeps its own only when no
  other one is as old or older (the server's `created_at`). A racer that loses destroys the
  sandbox it created (it owns it) and attaches to the oldest. Two racers cannot both keep theirs:
  the later lister sees the earlier sandbox, and `created_at` never orders a later sandbox first
  (on Docker the container's creation time, on Kubernetes the resource's, in whole seconds: a
  tie makes both yield and look again). Verified against opensandbox-server 1.1.1 on Docker.
- Ownership: a key's sandbox belongs to the key, not to the process that happened to create it.
  Nothing here destroys it except `destroy(key)`; the sandboxes' idle lifetime removes those of
  abandoned keys. `aclose()` only releases local connections: those of the caller's event loop
  and of the core's blocking (portal) loop, where `session_blocking` callers use the session.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import hashlib
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping

from opensandbox_core import _validate
from opensandbox_core._config import Connection, SandboxSpec
from opensandbox_core._errors import SandboxUnavailableError, ServerError
from opensandbox_core._lifecycle._guard import CreateGuard
from opensandbox_core._metadata import KEY_KEY, NAMESPACE_KEY
from opensandbox_core._portal import close_everywhere, run_blocking
from opensandbox_core._session import AsyncSandboxSession

from ._admin import SandboxSummary, destroy_sandbox, list_sandboxes

__all__ = ["KEY_METADATA_KEY", "NAMESPACE_METADATA_KEY", "KeyedSandboxes"]

logger = logging.getLogger(__name__)

NAMESPACE_METADATA_KEY = NAMESPACE_KEY
"""Metadata label holding the `namespace` of the `KeyedSandboxes` that made the sandbox."""
KEY_METADATA_KEY = KEY_KEY
"""Default metadata label holding the digest of (namespace, key)."""

_SETTLE_POLL = (0.2, 0.6)  # seconds, random: racers that both yielded do not retry in step
Factory = Callable[[Mapping[str, str]], AsyncSandboxSession]
Attacher = Callable[[str], AsyncSandboxSession]


def _state(summary: SandboxSummary) -> str:
    return summary.state.rsplit(".", 1)[-1].lower()


def _order(summary: SandboxSummary) -> tuple[float, str]:
    return (summary.created_at.timestamp(), summary.id)


class KeyedSandboxes:
    """One sandbox per key, found again through its metadata (see the module docstring).

    ```python
    sandboxes = KeyedSandboxes(SandboxSpec(image="python:3.13-slim"), namespace="my-app")
    session = await sandboxes.session("ticket-42")  # created, or found again
    await sandboxes.destroy("ticket-42")  # when the conversation is finished
    ```

    Built from a `SandboxSpec` (each sandbox gets its labels added to the spec's metadata), or
    with `create(labels)` and `attach(sandbox_id)` functions returning unstarted sessions, for
    an adapter that builds its sessions itself. `namespace` separates applications sharing a
    server (letters, digits, `-`, `_`, `.`; at most 63 characters); `key_label` names the label
    of the key's digest. `settle_timeout`: how long racing first calls may take to agree.
    Construction does no I/O.
    """

    def __init__(
        self,
        spec: SandboxSpec | None = None,
        *,
        namespace: str,
        connection: Connection | None = None,
        create: Factory | None = None,
        attach: Attacher | None = None,
        key_label: str = KEY_METADATA_KEY,
        namespace_label: str = NAMESPACE_METADATA_KEY,
        settle_timeout: float = 60.0,
    ) -> None:
        self._connection = connection or Connection()
        _validate.keyed_factories(spec, create, attach)
        self._namespace = _validate.label_value(namespace, "namespace")
        self._labels = (namespace_label, key_label)
        self._settle_timeout = _validate.seconds(settle_timeout, "settle_timeout", minimum=0)
        self._create = create or self._from_spec(spec)
        self._attach = attach or self._attacher()
        self._lock = threading.Lock()
        self._keys: dict[str, concurrent.futures.Future[AsyncSandboxSession]] = {}

    def _from_spec(self, spec: SandboxSpec | None) -> Factory:
        assert spec is not None

        def create(labels: Mapping[str, str]) -> AsyncSandboxSession:
            labelled = dataclasses.replace(spec, metadata={**spec.metadata, **labels})
            return AsyncSandboxSession(labelled, connection=self._connection)

        return create

    def _attacher(self) -> Attacher:
        return lambda sandbox_id: AsyncSandboxSession.attach(
            sandbox_id, connection=self._connection
        )

    def __repr__(self) -> str:
        return (
            f"KeyedSandboxes(namespace={self._namespace!r}, keys={len(self._keys)}, "
            f"connection={self._connection!r})"
        )

    @property
    def namespace(self) -> str:
        return self._namespace

    def digest(self, key: str) -> str:
        """The key label's value for `key`: a digest of (namespace, key)."""
        _validate.non_empty_string(key, "key")
        return hashlib.sha256(f"{self._namespace}\0{key}".encode()).hexdigest()[:40]

    def labels(self, key: str) -> dict[str, str]:
        """The metadata labels that the sandbox of `key` carries."""
        namespace_label, key_label = self._labels
        return {namespace_label: self._namespace, key_label: self.digest(key)}

    # -- finding and creating ----------------------------------------------------------------
    async def session(self, key: str) -> AsyncSandboxSession:
        """The started session of `key`'s sandbox: found again or created (shared per key)."""
        future, mine = self._claim(key)
        if mine:
            try:
                session = await self._find_or_create(key)
            except BaseException as exc:
                self._fail(key, future, exc)
                raise
            future.set_result(session)
        return await asyncio.wrap_future(future)

    def session_blocking(self, key: str) -> AsyncSandboxSession:
        """`session()` for blocking code (on the core's portal loop)."""
        future, mine = self._claim(key)
        if mine:
            try:
                session = run_blocking(self._find_or_create(key))
            except BaseException as exc:
                self._fail(key, future, exc)
                raise
            future.set_result(session)
        return future.result()

    def _claim(self, key: str) -> tuple[concurrent.futures.Future[AsyncSandboxSession], bool]:
        self.digest(key)  # validates
        with self._lock:
            future = self._keys.get(key)
            if future is not None:
                return future, False
            future = concurrent.futures.Future()
            self._keys[key] = future
            return future, True

    def _fail(
        self, key: str, future: concurrent.futures.Future[AsyncSandboxSession], exc: BaseException
    ) -> None:
        with self._lock:
            if self._keys.get(key) is future:
                del self._keys[key]  # the next call tries again
        future.set_exception(exc)
        future.exception()  # marks it retrieved: waiters re-raise it, nobody logs it as lost

    async def _live(self, key: str) -> list[SandboxSummary]:
        found = await list_sandboxes(self._connection, metadata=self.labels(key))
        return sorted((s for s in found if s.activity() != "dead"), key=_order)

    async def find(self, key: str) -> str | None:
        """The id of `key`'s sandbox on the server, or None (never creates one)."""
        live = await self._live(key)
        return live[0].id if live else None

    async def _find_or_create(self, key: str) -> AsyncSandboxSession:
        deadline = time.monotonic() + self._settle_timeout
        while True:
            live = await self._live(key)
            if live:
                found = await self._attach_settled(live)
                if found is not None:
                    return found
            else:
                session = await self._created(key)
                if session is not None:
                    return session
            if time.monotonic() >= deadline:
                raise ServerError(
                    f"Could not settle on one sandbox for the key within "
                    f"{self._settle_timeout:g} s (its sandboxes kept changing or never became "
                    "ready). It is safe to retry.",
                    retryable=True,
                )
            await asyncio.sleep(random.uniform(*_SETTLE_POLL))  # noqa: S311 - jitter

    async def _attach_settled(self, live: list[SandboxSummary]) -> AsyncSandboxSession | None:
        """The oldest live sandbox, attached, once no other one may be as old; else None."""
        oldest = live[0]
        settled = len(live) == 1 or _order(live[1])[0] > _order(oldest)[0]
        if not settled or _state(oldest) != "running":
            return None
        session = self._attach(oldest.id)
        try:
            await session.start()
        except (SandboxUnavailableError, ServerError) as exc:
            await session.aclose()
            if isinstance(exc, ServerError) and not exc.retryable:
                raise
            # A duplicate being deleted, or a sandbox whose creator still waits for its daemon.
            logger.info("Sandbox %s of a key did not answer (%s)", oldest.id, type(exc).__name__)
            return None
        logger.info("Attached to sandbox %s of a key", oldest.id)
        return session

    async def _created(self, key: str) -> AsyncSandboxSession | None:
        """A new sandbox for `key`, kept when no other is as old; else deleted, and None."""
        session = self._create(self.labels(key))
        await CreateGuard(session).start()
        sandbox_id = session.id
        live = await self._live(key)
        mine = next((s for s in live if s.id == sandbox_id), None)
        rivals = [
            s
            for s in live
            if s.id != sandbox_id and (mine is None or _order(s)[0] <= _order(mine)[0])
        ]
        if not rivals:
            logger.info("Created sandbox %s for a key", sandbox_id)
            return session
        logger.info(
            "Another process created a sandbox for the same key at the same time; deleting "
            "this process's duplicate %s",
            sandbox_id,
        )
        await session.destroy()
        return None

    # -- destroying and closing --------------------------------------------------------------
    async def destroy(self, key: str) -> list[str]:
        """Delete `key`'s sandbox (files included); returns the ids deleted. Every process's
        next call for the key then creates a new, empty sandbox."""
        with self._lock:
            future = self._keys.pop(key, None)
        if future is not None and future.done() and future.exception() is None:
            await close_everywhere(future.result())
        removed = []
        for summary in await self._live(key):
            if await destroy_sandbox(summary.id, self._connection):
                removed.append(summary.id)
        logger.info("Destroyed %d sandbox(es) of a key", len(removed))
        return removed

    def forget(self, key: str) -> AsyncSandboxSession | None:
        """Drop this process's session of `key` (not closed; returned if it had started)."""
        with self._lock:
            future = self._keys.pop(key, None)
        if future is not None and future.done() and future.exception() is None:
            return future.result()
        return None

    async def aclose(self) -> None:
        """Close the local connections of every key's session (on this loop and the blocking
        one). The sandboxes keep running."""
        with self._lock:
            futures = list(self._keys.values())
            self._keys.clear()
        for future in futures:
            if future.done() and future.exception() is None:
                await close_everywhere(future.result())
