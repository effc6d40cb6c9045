"""Snapshots: keep a sandbox's files at one moment, and start new sandboxes from them.

Built on the server's snapshot API through the SDK's public lifecycle service:
`POST /sandboxes/{id}/snapshots`, `GET|DELETE /snapshots/{id}`, and a create with `snapshotId`.

What opensandbox-server 1.1.1 does on Docker (see docs/scaling.md, with a live test as evidence):
a snapshot is a `docker commit` of the container, `Ready` about 0.6 s after it was asked for; it
keeps files (anywhere in the root filesystem), not processes, memory or mounted volumes. A
sandbox created from it gets the source's labels too, so `restore_snapshot` always sets a fresh
ownership tag (and the caller's metadata) over the inherited ones: the restored sandbox belongs
to whoever restored it, and the source owner's cleanup (by its tag) never finds it.

Runtimes without snapshots (Kubernetes without a snapshot committer, servers before the API)
raise `SnapshotsUnsupportedError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from opensandbox_core import _errors, _validate
from opensandbox_core._config import Connection
from opensandbox_core._errors import ConfigurationError, SandboxUnavailableError, ServerError
from opensandbox_core._metadata import ADAPTER_KEY, LIBRARY_KEY, LIBRARY_VALUE, OWNER_KEY
from opensandbox_core._session import AsyncSandboxSession

__all__ = [
    "SnapshotRef",
    "SnapshotsUnsupportedError",
    "delete_snapshot",
    "find_snapshot",
    "get_snapshot",
    "list_snapshots",
    "restore_snapshot",
    "snapshot_sandbox",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_POLL = 0.2  # seconds between state checks


class SnapshotsUnsupportedError(ServerError):
    """The server's runtime cannot take or restore snapshots (or the server predates them)."""


@dataclass(frozen=True)
class SnapshotRef:
    """A snapshot as the server reports it: `id` (pass it to `restore_snapshot`), the source
    `sandbox_id`, its `state` (`Creating`, `Ready`, `Failed`, ...) and optional `name`."""

    id: str
    sandbox_id: str
    state: str
    name: str | None = None
    created_at: datetime | None = None

    @property
    def ready(self) -> bool:
        return self.state.lower() == "ready"


def _ref(info: Any) -> SnapshotRef:
    status = getattr(info, "status", None)
    return SnapshotRef(
        id=str(info.id),
        sandbox_id=str(info.sandbox_id),
        state=str(getattr(status, "state", "") or ""),
        name=getattr(info, "name", None),
        created_at=getattr(info, "created_at", None),
    )


async def _read(service: Any, snapshot_id: str) -> SnapshotRef:
    """The snapshot as the server reports it now."""
    return _ref(await service.get_snapshot(snapshot_id))


@contextlib.asynccontextmanager
async def _service(connection: Connection | None) -> AsyncIterator[Any]:
    from opensandbox.adapters.factory import AdapterFactory

    config = (connection or Connection()).build_sdk_config().with_transport_if_missing()
    try:
        yield AdapterFactory(config).create_sandbox_service()
    finally:
        with contextlib.suppress(Exception):
            await config.close_transport_if_owned()


@contextlib.contextmanager
def _snapshot_call(
    action: str, *, operation: str | None = None, sandbox_id: str | None = None
) -> Iterator[None]:
    """Raise what fails inside as `SnapshotsUnsupportedError` when the runtime has no
    snapshots, else as the project's error (`_errors.translated`, as `operation`, by default
    `action`)."""
    try:
        yield
    except Exception as exc:
        _unsupported(exc, action)
        with _errors.translated(operation or action, sandbox_id=sandbox_id):
            raise


async def _if_found(call: Awaitable[T], verb: str, snapshot_id: str) -> tuple[T] | None:
    """`(await call,)`, the call that does `verb` to the snapshot, or None when it failed
    because the snapshot does not exist (any more); any other failure raises as in
    `_snapshot_call`."""
    with _snapshot_call(f"{verb} a snapshot", operation=f"{verb} snapshot {snapshot_id}"):
        try:
            return (await call,)
        except Exception as exc:
            if not _errors.is_not_found(exc):
                raise
    return None


def _unsupported(exc: BaseException, action: str) -> None:
    """Raise `SnapshotsUnsupportedError` when `exc` says the runtime has no snapshots."""
    status = getattr(exc, "status_code", None)
    code = str(getattr(getattr(exc, "error", None), "code", "") or "")
    if status in (405, 501) or "UNSUPPORTED_RUNTIME" in code or "NOT_IMPLEMENTED" in code:
        detail = _errors.scrub(str(getattr(getattr(exc, "error", None), "message", "") or exc))
        raise SnapshotsUnsupportedError(
            f"Could not {action}: this server's runtime does not support snapshots (HTTP "
            f"{status}: {detail}). opensandbox-server 1.1.1 takes them on Docker; on Kubernetes "
            "the runtime needs a snapshot committer. Without snapshots, keep state in files you "
            "copy out, or in a mounted volume.",
            status_code=status,
        ) from exc


def _sandbox_id_of(sandbox: AsyncSandboxSession | str) -> str:
    if isinstance(sandbox, AsyncSandboxSession):
        return _validate.started_session(sandbox.id)
    return _validate.snapshot_source(sandbox)


async def snapshot_sandbox(
    sandbox: AsyncSandboxSession | str,
    *,
    name: str | None = None,
    connection: Connection | None = None,
    wait: bool = True,
    timeout: float = 120.0,
) -> SnapshotRef:
    """Snapshot a sandbox's files (a session, or a sandbox id) and return the snapshot.

    With `wait=True` (the default) this returns once the snapshot is `Ready`: only then does a
    later change in the sandbox stay out of it. Raises `SnapshotsUnsupportedError` when the
    runtime has no snapshots, `ServerError` when the snapshot fails or is not ready in `timeout`.
    """
    from opensandbox.models.sandboxes import CreateSnapshotRequest

    sandbox_id = _sandbox_id_of(sandbox)
    if connection is None and isinstance(sandbox, AsyncSandboxSession):
        connection = sandbox.connection
    started = time.monotonic()
    async with _service(connection) as service:
        with _snapshot_call("snapshot the sandbox", sandbox_id=sandbox_id):
            info = await service.create_snapshot(sandbox_id, CreateSnapshotRequest(name=name))
        ref = _ref(info)
        while wait and not ref.ready:
            if ref.state.lower() == "failed" or time.monotonic() - started > timeout:
                raise ServerError(
                    f"Snapshot {ref.id} of sandbox {sandbox_id} did not become ready within "
                    f"{timeout:g} s (its state is {ref.state!r}). Check the server's log; delete "
                    "it with delete_snapshot() and try again.",
                    retryable=ref.state.lower() != "failed",
                )
            await asyncio.sleep(_POLL)
            with _errors.translated(f"read snapshot {ref.id}"):
                ref = await _read(service, ref.id)
    logger.info(
        "Snapshot %s of sandbox %s is %s (%.2f s)",
        ref.id,
        sandbox_id,
        ref.state,
        time.monotonic() - started,
    )
    return ref


async def get_snapshot(
    snapshot_id: str, connection: Connection | None = None
) -> SnapshotRef | None:
    """The snapshot with this id, or None when it does not exist (any more)."""
    snapshot_id = _validate.snapshot_id(snapshot_id)
    async with _service(connection) as service:
        found = await _if_found(_read(service, snapshot_id), "read", snapshot_id)
    return None if found is None else found[0]


async def list_snapshots(
    connection: Connection | None = None, *, sandbox_id: str | None = None
) -> list[SnapshotRef]:
    """The server's snapshots, or those taken of one sandbox (`sandbox_id`)."""
    from opensandbox.models.sandboxes import SnapshotFilter

    found: list[SnapshotRef] = []
    async with _service(connection) as service:
        page = 1
        while True:
            with _snapshot_call("list snapshots"):
                result = await service.list_snapshots(
                    SnapshotFilter(sandbox_id=sandbox_id, page=page, page_size=100)
                )
            found.extend(_ref(info) for info in result.snapshot_infos)
            if not result.pagination.has_next_page:
                return found
            page += 1


async def find_snapshot(reference: str, connection: Connection | None = None) -> str:
    """The id of the ready snapshot with the id `reference`, else of the newest ready one named
    `reference`; `ConfigurationError` when there is none."""
    found = await get_snapshot(reference, connection)
    if found is not None and found.ready:
        return found.id
    named = [s for s in await list_snapshots(connection) if s.name == reference and s.ready]
    if not named:
        state = f" (its state is {found.state!r})" if found is not None else ""
        raise ConfigurationError(
            f"No ready snapshot named or with the id {reference!r} on the server{state}. Make "
            "one from a sandbox with opensandbox_core.fleet.snapshot_sandbox(session, name=...)."
        )
    named.sort(key=lambda s: (s.created_at is not None, s.created_at or 0))
    return named[-1].id


async def delete_snapshot(snapshot_id: str, connection: Connection | None = None) -> bool:
    """Delete a snapshot (on Docker: its image). False, quietly, when it was already gone.

    Delete the sandboxes created from it first: on Docker the image of a running sandbox
    cannot be removed.
    """
    snapshot_id = _validate.snapshot_id(snapshot_id)
    async with _service(connection) as service:
        found = await _if_found(service.delete_snapshot(snapshot_id), "delete", snapshot_id)
    if found is None:
        return False
    logger.info("Deleted snapshot %s", snapshot_id)
    return True


async def restore_snapshot(
    snapshot: str,
    *,
    connection: Connection | None = None,
    metadata: Mapping[str, str] | None = None,
    lifetime: float | None = 1800.0,
    resource: Mapping[str, str] | None = None,
    ready_timeout: float = 90.0,
    recover_timeout: float = 30.0,
    **session_options: Any,
) -> AsyncSandboxSession:
    """Create a sandbox from a snapshot and return a session that owns it (ready for commands).

    `snapshot` is a ready snapshot's id, or its name (`snapshot_sandbox(name=...)`; the newest
    ready snapshot of that name); `ConfigurationError` when the server has no such snapshot.

    The new sandbox has the snapshot's files; it is a new sandbox with a new id, and it belongs
    to the caller: a fresh ownership tag and `metadata` are set over the labels it inherits from
    the snapshot's source, so cleanup by the source's owner never touches it. Like a session
    that created its sandbox, the returned session destroys it on leaving `async with` or on
    `destroy()`. `session_options` go to `AsyncSandboxSession` (`working_dir`, `env`, ...).

    A create whose answer is lost is recovered by the ownership tag (never a duplicate). Raises
    `SnapshotsUnsupportedError` when the runtime cannot restore snapshots.
    """
    reference = _validate.snapshot_id(snapshot)
    connection = connection or Connection()
    extra = _validate.env(metadata or {})
    lifetime = _validate.restore_lifetime(lifetime)
    snapshot_id = await find_snapshot(reference, connection)
    token = uuid.uuid4().hex
    labels = {ADAPTER_KEY: "core", **extra, OWNER_KEY: token, LIBRARY_KEY: LIBRARY_VALUE}
    started = time.monotonic()
    async with _service(connection) as service:
        sandbox_id = await _create_from(
            service,
            snapshot_id,
            labels=labels,
            lifetime=lifetime,
            resource=resource,
            budget=recover_timeout,
        )
        session = AsyncSandboxSession.attach(sandbox_id, connection=connection, **session_options)
        # The session is the creator: it owns the sandbox and carries its tag.
        session._adopt(token)
        try:
            await _wait_usable(service, session, sandbox_id, ready_timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                await session.destroy()
            raise
    logger.info(
        "Restored snapshot %s as sandbox %s (%.2f s)",
        snapshot_id,
        sandbox_id,
        time.monotonic() - started,
    )
    return session


async def _create_from(
    service: Any,
    snapshot_id: str,
    *,
    labels: Mapping[str, str],
    lifetime: float | None,
    resource: Mapping[str, str] | None,
    budget: float,
) -> str:
    """The id of a new sandbox made from the snapshot, carrying `labels` (its ownership tag
    among them: a create whose answer is lost is found by it within `budget` seconds)."""
    from opensandbox.models.sandboxes import SandboxFilter

    try:
        created = await service.create_sandbox(
            spec=None,
            entrypoint=None,
            env={},
            metadata=dict(labels),
            timeout=timedelta(seconds=lifetime) if lifetime else None,
            resource=dict(resource or {"cpu": "1", "memory": "2Gi"}),
            network_policy=None,
            extensions={},
            volumes=None,
            snapshot_id=snapshot_id,
        )
        return str(created.id)
    except Exception as exc:
        _unsupported(exc, "restore a snapshot")
        if not _errors.is_lost_response(exc):
            with _errors.translated(f"create a sandbox from snapshot {snapshot_id}"):
                raise
        logger.warning(
            "The create answer for snapshot %s was lost (%s); looking for it by its tag",
            snapshot_id,
            type(exc).__name__,
        )
        return await _find_by_tag(service, SandboxFilter, labels[OWNER_KEY], budget, exc)


async def _find_by_tag(
    service: Any, sandbox_filter: Any, token: str, budget: float, cause: Exception
) -> str:
    deadline = time.monotonic() + budget
    while True:
        with contextlib.suppress(Exception):
            result = await service.list_sandboxes(
                sandbox_filter(metadata={OWNER_KEY: token}, page_size=20)
            )
            mine = sorted(
                (s for s in result.sandbox_infos if (s.metadata or {}).get(OWNER_KEY) == token),
                key=lambda s: s.created_at,
            )
            if mine:
                return str(mine[0].id)
        if time.monotonic() >= deadline:
            raise ServerError(
                "Could not restore the snapshot: the server's answer was lost and no sandbox with "
                f"this call's tag appeared within {budget:g} s. It is safe to retry.",
                retryable=True,
            ) from cause
        await asyncio.sleep(0.5)


async def _wait_usable(
    service: Any, session: AsyncSandboxSession, sandbox_id: str, budget: float
) -> None:
    """Wait until the restored sandbox runs and its daemon answers a first command."""
    deadline = time.monotonic() + budget
    while True:
        try:
            info = await service.get_sandbox_info(sandbox_id)
            state = str(getattr(info.status, "state", "") or "").lower()
        except Exception:  # not listed yet; the deadline below decides
            state = ""
        if _errors.is_gone_state(state):
            raise SandboxUnavailableError(
                f"Sandbox {sandbox_id}, created from a snapshot, ended in state {state!r} before "
                "it could be used. Check the server's log.",
                sandbox_id=sandbox_id,
            )
        if state == "running":
            try:
                await session.commands.run("true", timeout=30)
                return
            except (SandboxUnavailableError, ServerError):
                pass  # its daemon is still starting
        if time.monotonic() >= deadline:
            raise SandboxUnavailableError(
                f"Sandbox {sandbox_id}, created from a snapshot, did not answer within "
                f"{budget:g} s (state {state or 'unknown'!r}).",
                sandbox_id=sandbox_id,
            )
        await asyncio.sleep(_POLL * 2)
