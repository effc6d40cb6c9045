"""Many sandboxes: a pool of ready ones, one per key, file checkpoints, snapshots, and the
server's list (no I/O until awaited). See docs/core.md ("A pool of ready sandboxes", "One sandbox
per key", "Snapshots tied to checkpoints") and docs/scaling.md.
"""

from ._fleet._admin import destroy_sandbox, list_sandboxes, remove_sandboxes
from ._fleet._checkpoints import CheckpointFiles, FilesVersion
from ._fleet._keyed import KeyedSandboxes
from ._fleet._pool import SandboxPool
from ._fleet._snapshots import (
    SnapshotsUnsupportedError,
    delete_snapshot,
    restore_snapshot,
    snapshot_sandbox,
)

__all__ = [
    "CheckpointFiles",
    "FilesVersion",
    "KeyedSandboxes",
    "SandboxPool",
    "SnapshotsUnsupportedError",
    "delete_snapshot",
    "destroy_sandbox",
    "list_sandboxes",
    "remove_sandboxes",
    "restore_snapshot",
    "snapshot_sandbox",
]
