"""`CheckpointFiles`: sandbox snapshots tied to a caller's checkpoints, so that going back to a
checkpoint (to replay or fork from it) also brings back the sandbox's files.

After a step that may change files, `save(session)` writes a fresh version marker into the
sandbox (a file, `MARKER_PATH`), snapshots it (`snapshot_sandbox`) and returns a `FilesVersion`
(`sandbox_id`, `snapshot_id`, `marker`, `seq`), which the caller stores with that checkpoint (a
graph's state, a database row). To continue from a checkpoint, `open(version, owner=...)` gives
the session that holds exactly that version's files:

- the recorded sandbox, when its marker is still the version's (nothing changed it since);
- else (another branch changed its files, or it is gone) a new sandbox restored from the
  version's snapshot (`restore_snapshot`), returned with the new `FilesVersion` to store from then
  on. Each fork gets its own copy.

A copy carries the namespace label, a fresh key label (so the owner's `KeyedSandboxes` never
mistakes it for the owner's sandbox), `COPY_OF_METADATA_KEY` = the owner's key digest, and the
caller's `labels` (an adapter's `adapter_labels`);
`copies(owner)` finds them, and `destroy(owner, sandboxes)` deletes the owner's sandboxes, their
copies and every snapshot taken of any of them. This process remembers which marker each sandbox
holds, so a sandbox it wrote is not read again. Not supported: one version continued by two
processes at the same time.

Costs: one marker write and one snapshot per `save` (on Docker a `docker commit`, 0.6 to 0.8 s
until `Ready`); a copy's first use pays a restore (about 2 s until its first command).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from opensandbox_core._config import Connection
from opensandbox_core._errors import SandboxUnavailableError
from opensandbox_core._metadata import FORK_OF_KEY
from opensandbox_core._portal import close_everywhere
from opensandbox_core._session import AsyncSandboxSession

from ._admin import destroy_sandbox, list_sandboxes
from ._keyed import KEY_METADATA_KEY, NAMESPACE_METADATA_KEY
from ._snapshots import delete_snapshot, list_snapshots, restore_snapshot, snapshot_sandbox

__all__ = ["COPY_OF_METADATA_KEY", "MARKER_PATH", "CheckpointFiles", "FilesVersion"]

logger = logging.getLogger(__name__)

COPY_OF_METADATA_KEY = FORK_OF_KEY
"""Metadata label of a sandbox restored for a checkpoint: the key digest of its owner."""
MARKER_PATH = "/var/tmp/.opensandbox-agents-files-version"  # noqa: S108 - inside the sandbox


@dataclass(frozen=True)
class FilesVersion:
    """Where a checkpoint's files are: the sandbox that had them, its snapshot, the marker
    written before the snapshot, and when (`seq`, seconds since the epoch: the later wins)."""

    sandbox_id: str
    snapshot_id: str
    marker: str
    seq: float


class CheckpointFiles:
    """Snapshots tied to a caller's checkpoints (see the module docstring).

    `attach(sandbox_id)` returns an unstarted session on an existing sandbox (default: an
    attached `AsyncSandboxSession` on `connection`); `lifetime`, `working_dir` and
    `default_timeout` shape the restored copies. The labels are those of `KeyedSandboxes`;
    `labels` go on every copy besides them. Construction does no I/O.
    """

    def __init__(
        self,
        *,
        namespace: str,
        connection: Connection | None = None,
        attach: Callable[[str], AsyncSandboxSession] | None = None,
        lifetime: float | None = 1800.0,
        working_dir: str | None = "/workspace",
        default_timeout: float | None = 1800.0,
        key_label: str = KEY_METADATA_KEY,
        namespace_label: str = NAMESPACE_METADATA_KEY,
        copy_label: str = COPY_OF_METADATA_KEY,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self._connection = connection or Connection()
        self._namespace = namespace
        self._attach = attach or (
            lambda sandbox_id: AsyncSandboxSession.attach(sandbox_id, connection=self._connection)
        )
        self._restore = {
            "lifetime": lifetime if lifetime is None else max(lifetime, 60),
            "working_dir": working_dir,
            "default_timeout": default_timeout,
        }
        self._labels = (namespace_label, key_label, copy_label)
        self._extra = dict(labels or {})
        self._markers: dict[str, str] = {}  # sandbox id -> the marker this process knows it has
        self._sessions: dict[str, AsyncSandboxSession] = {}

    async def save(self, session: AsyncSandboxSession, *, name: str | None = None) -> FilesVersion:
        """Mark the session's files with a new version and snapshot them (returns once the
        snapshot is ready): the `FilesVersion` to store with the caller's checkpoint."""
        marker = uuid.uuid4().hex
        seq = time.time()
        await session.files.write_bytes(MARKER_PATH, marker.encode())
        sandbox_id = await session.start()
        self._markers[sandbox_id] = marker
        snapshot = await snapshot_sandbox(session, name=name or f"files-{marker[:12]}")
        return FilesVersion(sandbox_id, snapshot.id, marker, seq)

    async def session(self, sandbox_id: str) -> AsyncSandboxSession:
        """This process's started session on `sandbox_id` (attached once, then kept)."""
        session = self._sessions.get(sandbox_id)
        if session is None:
            session = self._attach(sandbox_id)
            await session.start()
            self._sessions[sandbox_id] = session
        return session

    async def open(
        self, version: FilesVersion, *, owner: str
    ) -> tuple[AsyncSandboxSession, FilesVersion | None]:
        """The session holding `version`'s files, and the new version to store when that is a
        copy restored from its snapshot (labelled as `owner`'s), else None."""
        sandbox_id, marker = version.sandbox_id, version.marker
        if self._markers.get(sandbox_id) == marker:
            return await self.session(sandbox_id), None
        try:
            session = await self.session(sandbox_id)
            found = (await session.files.read_bytes(MARKER_PATH)).decode(errors="replace")
        except (SandboxUnavailableError, OSError) as exc:
            self._sessions.pop(sandbox_id, None)
            found = f"<{type(exc).__name__}>"
        if found == marker:
            self._markers[sandbox_id] = marker
            return session, None
        started = time.monotonic()
        namespace_label, key_label, copy_label = self._labels
        fork_key = hashlib.sha256(f"{owner}\0{uuid.uuid4().hex}".encode()).hexdigest()[:40]
        restored = await restore_snapshot(
            version.snapshot_id,
            connection=self._connection,
            metadata={
                **self._extra,
                namespace_label: self._namespace,
                key_label: fork_key,
                copy_label: owner,
            },
            **self._restore,  # type: ignore[arg-type]
        )
        copy_id = await restored.start()
        await restored.aclose()  # the copy belongs to the owner (`destroy`), not to a session
        logger.info(
            "Restored the files of a checkpoint from snapshot %s into sandbox %s (%.2f s)",
            version.snapshot_id,
            copy_id,
            time.monotonic() - started,
        )
        self._markers[copy_id] = marker
        moved = FilesVersion(copy_id, version.snapshot_id, marker, time.time())
        return await self.session(copy_id), moved

    async def copies(self, owner: str) -> list[str]:
        """The ids of the sandboxes restored for `owner`'s checkpoints (never creates one)."""
        namespace_label, _, copy_label = self._labels
        found = await list_sandboxes(
            self._connection, metadata={namespace_label: self._namespace, copy_label: owner}
        )
        return sorted(s.id for s in found)

    async def destroy(self, owner: str, sandboxes: list[str]) -> list[str]:
        """Delete `sandboxes`, `owner`'s copies and every snapshot taken of any of them;
        returns the ids of the sandboxes deleted."""
        every = [*sandboxes, *await self.copies(owner)]
        snapshots = [
            s.id
            for sandbox_id in every
            for s in await list_snapshots(self._connection, sandbox_id=sandbox_id)
        ]
        removed = []
        for sandbox_id in every:
            session = self._sessions.pop(sandbox_id, None)
            if session is not None:
                await close_everywhere(session)
            self._markers.pop(sandbox_id, None)
            if await destroy_sandbox(sandbox_id, self._connection):
                removed.append(sandbox_id)
        for snapshot_id in snapshots:
            await self._delete_snapshot(snapshot_id)
        logger.info("Destroyed %d sandbox(es) and %d snapshot(s)", len(removed), len(snapshots))
        return removed

    async def _delete_snapshot(self, snapshot_id: str) -> None:
        """Delete a snapshot; its image may stay busy for a moment after its sandboxes go."""
        deadline = time.monotonic() + 30
        while True:
            try:
                await delete_snapshot(snapshot_id, self._connection)
                return
            except Exception:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(1)

    async def aclose(self) -> None:
        """Close the local connections of every session opened here (on this loop and the
        blocking one). Sandboxes keep running."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        for session in sessions:
            await close_everywhere(session)
