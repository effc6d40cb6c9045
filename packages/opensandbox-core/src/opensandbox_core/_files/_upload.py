"""Upload a local directory tree into a sandbox, leaving secrets behind unless told otherwise.

Built only on the session's public file methods (`make_dir`, `write_bytes`: the `UploadTarget`
protocol), so it works the same over every execd generation and through any session the
adapters wrap.

What is skipped, and why:
- Secrets, by default (`SECRET_PATTERNS`): a project directory routinely holds API keys in
  `.env`, cloud credentials, SSH and GPG keys, and package-registry tokens. Code the agent runs
  could read and send them anywhere. `include_secrets=True` uploads them anyway.
- Whatever matches `exclude` (the same pattern syntax), for example `node_modules/`.
- Symlinks that leave the tree (or dangle): following one would upload a file from elsewhere on
  this machine, such as `~/.ssh/id_rsa`. A symlink to a file inside the tree is uploaded as a
  regular file with the target's content (and skipped if the target itself is a secret); a
  symlink to a directory is never descended, so a link cycle cannot loop.
- Anything that is not a regular file or directory (sockets, FIFOs, devices).

Patterns follow `.gitignore`'s shape: a pattern without `/` matches a file or directory name at
any depth (`*.pem`, `.env`), a trailing `/` matches directories only (`.ssh/`), a `/` elsewhere
matches the path relative to `local_dir` (`config/prod.json`). Matching is case-sensitive
`fnmatch` (`*`, `?`, `[...]`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import posixpath
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Final, Protocol, TypedDict

from opensandbox_core import _validate
from opensandbox_core._errors import ConfigurationError
from opensandbox_core._types import WriteData

__all__ = [
    "SECRET_PATTERNS",
    "DirectoryUpload",
    "UploadOptions",
    "UploadTarget",
    "upload_directory",
]

logger = logging.getLogger(__name__)

SECRET_PATTERNS: Final[tuple[str, ...]] = (
    # environment files and direnv
    ".env",
    ".env.*",
    ".envrc",
    # key and certificate material
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    # credential directories
    ".ssh/",
    ".aws/",
    ".gnupg/",
    ".azure/",
    ".kube/",
    ".docker/",
    "gcloud/",
    # token files of tools and package registries
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".htpasswd",
    "credentials.json",
    "service-account*.json",
)
"""What `upload_directory` leaves out unless `include_secrets=True` (pattern syntax above)."""

STREAM_ABOVE: Final = 4 * 1024 * 1024
"""Files larger than this are streamed in chunks instead of read into memory whole."""
_CHUNK: Final = 1024 * 1024


class UploadTarget(Protocol):
    """Where `upload_directory` writes: an `AsyncSandboxSession` (its two file methods)."""

    async def make_dir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None: ...

    async def write_bytes(
        self, path: str, data: WriteData, *, mode: int | None = None, timeout: float | None = None
    ) -> None: ...


class UploadOptions(TypedDict, total=False):
    """The keyword options of `upload_directory` (and of the adapters' `upload_dir` helpers)."""

    exclude: Iterable[str] | None
    include_secrets: bool
    concurrency: int
    timeout: float | None


@dataclass(frozen=True)
class DirectoryUpload:
    """What `upload_directory` did.

    - `uploaded`: the sandbox paths written, sorted.
    - `skipped`: local paths relative to `local_dir` (POSIX separators; directories end in `/`)
      mapped to why they were left out: `"secret"`, `"excluded"`, `"symlink outside the
      directory"`, `"broken symlink"`, `"symlink to a directory"` or `"not a regular file"`.
    - `bytes_uploaded`: the total size of the files written.
    """

    uploaded: tuple[str, ...]
    skipped: Mapping[str, str] = field(default_factory=dict)
    bytes_uploaded: int = 0


@dataclass(frozen=True)
class _Rules:
    secrets: tuple[str, ...]
    exclude: tuple[str, ...]

    def reason(self, rel: str, *, is_dir: bool) -> str | None:
        if any(_matches(p, rel, is_dir=is_dir) for p in self.secrets):
            return "secret"
        if any(_matches(p, rel, is_dir=is_dir) for p in self.exclude):
            return "excluded"
        return None


def _matches(pattern: str, rel: str, *, is_dir: bool) -> bool:
    dir_only = pattern.endswith("/")
    body = pattern.rstrip("/")
    if dir_only and not is_dir:
        return False
    if "/" in body:
        return fnmatchcase(rel, body.lstrip("/"))
    return fnmatchcase(posixpath.basename(rel), body)


@dataclass
class _Plan:
    files: list[tuple[Path, str, int, int]] = field(default_factory=list)  # local, rel, mode, size
    empty_dirs: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _plan(root: Path, rules: _Rules) -> _Plan:
    """Walk `root` without following symlinks and decide, for every entry, upload or skip."""
    if not root.is_dir():
        raise ConfigurationError(
            f"local_dir must be an existing directory, got {str(root)!r}: check the path."
        )
    plan = _Plan()
    real_root = root.resolve()
    for current, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(current)
        rel_base = base.relative_to(root).as_posix()
        rel_base = "" if rel_base == "." else rel_base
        kept_dirs: list[str] = []
        for name in sorted(dirnames):
            rel = posixpath.join(rel_base, name)
            if (base / name).is_symlink():
                target = (base / name).resolve()
                inside = target == real_root or real_root in target.parents
                plan.skipped[rel] = (
                    "symlink to a directory" if inside else "symlink outside the directory"
                )
                continue
            reason = rules.reason(rel, is_dir=True)
            if reason is not None:
                plan.skipped[rel + "/"] = reason
                continue
            kept_dirs.append(name)
        dirnames[:] = kept_dirs  # os.walk descends into these only
        uploaded_here = 0
        for name in sorted(filenames):
            rel = posixpath.join(rel_base, name)
            path = base / name
            reason = rules.reason(rel, is_dir=False)
            if reason is None and path.is_symlink():
                reason = _symlink_reason(path, real_root, rules)
            if reason is not None:
                plan.skipped[rel] = reason
                continue
            info = path.stat()  # follows a symlink that stays inside the tree
            if not stat.S_ISREG(info.st_mode):
                plan.skipped[rel] = "not a regular file"
                continue
            plan.files.append((path, rel, stat.S_IMODE(info.st_mode), info.st_size))
            uploaded_here += 1
        if rel_base and not uploaded_here and not kept_dirs:
            plan.empty_dirs.append(rel_base)
    return plan


def _symlink_reason(path: Path, real_root: Path, rules: _Rules) -> str | None:
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):  # dangling, or a loop of links
        return "broken symlink"
    if real_root not in target.parents:
        return "symlink outside the directory"
    if target.is_dir():
        return "symlink to a directory"
    return rules.reason(target.relative_to(real_root).as_posix(), is_dir=False)


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    handle = await asyncio.to_thread(path.open, "rb")
    try:
        while chunk := await asyncio.to_thread(handle.read, _CHUNK):
            yield chunk
    finally:
        await asyncio.to_thread(handle.close)


async def upload_directory(
    session: UploadTarget,
    local_dir: str | os.PathLike[str],
    remote_dir: str,
    *,
    exclude: Iterable[str] | None = None,
    include_secrets: bool = False,
    concurrency: int = 8,
    timeout: float | None = None,
) -> DirectoryUpload:
    """Copy the tree under `local_dir` into `remote_dir` in the sandbox; secrets stay behind.

    Skipped by default (`SECRET_PATTERNS`): `.env`, `.env.*`, `.envrc`, `*.pem`, `*.key`,
    `*.p12`, `*.pfx`, `*.jks`, `*.keystore`, `id_rsa*`, `id_dsa*`, `id_ecdsa*`, `id_ed25519*`,
    the directories `.ssh/`, `.aws/`, `.gnupg/`, `.azure/`, `.kube/`, `.docker/`, `gcloud/`, and
    the files `.netrc`, `_netrc`, `.git-credentials`, `.npmrc`, `.pypirc`, `.pgpass`,
    `.htpasswd`, `credentials.json`, `service-account*.json`. `include_secrets=True` uploads
    them; `exclude` adds patterns of your own (`['node_modules/', '*.log']`), applied either
    way. Symlinks never lead out of `local_dir` (see the module docstring for the rules).

    Files keep their permission bits (an executable stays executable); empty directories are
    created; parents are made as needed. At most `concurrency` files move at once; `timeout`
    bounds each file's write. `remote_dir` may be relative to the session's working directory.

    Returns a `DirectoryUpload` naming what was uploaded and what was skipped, and why. The
    first failed write raises (the session's own error, such as `SandboxUnavailableError`) once
    the writes already under way have ended; files written before it stay.
    """
    root = Path(local_dir)
    _validate.remote_dir(remote_dir)
    _validate.positive_int(concurrency, "concurrency")
    rules = _Rules(
        secrets=() if include_secrets else SECRET_PATTERNS,
        exclude=_validate.exclude_patterns(exclude),
    )
    plan = await asyncio.to_thread(_plan, root, rules)
    if plan.skipped:
        logger.info(
            "Uploading %s: leaving out %d path(s) (%s)",
            root,
            len(plan.skipped),
            ", ".join(sorted(set(plan.skipped.values()))),
        )
    await session.make_dir(remote_dir, parents=True, exist_ok=True)
    written = await _write(session, plan, remote_dir, concurrency=concurrency, timeout=timeout)
    return DirectoryUpload(
        uploaded=tuple(sorted(written)),
        skipped=dict(sorted(plan.skipped.items())),
        bytes_uploaded=sum(size for *_, size in plan.files),
    )


async def _write(
    session: UploadTarget, plan: _Plan, remote_dir: str, *, concurrency: int, timeout: float | None
) -> list[str]:
    """Write the plan's files, then make its empty directories, at most `concurrency` at once;
    the sandbox paths of the files written. After a failure no more writes start, and the first
    failure is raised once those under way have ended."""
    semaphore = asyncio.Semaphore(concurrency)
    failed: list[BaseException] = []

    async def one(remote: str, write: Callable[[], Awaitable[None]]) -> str | None:
        async with semaphore:
            if failed:
                return None  # an earlier write failed: start no more
            try:
                await write()
            except Exception as exc:
                failed.append(exc)
                return None
        return remote

    def file_job(local: Path, rel: str, mode: int, size: int) -> Awaitable[str | None]:
        remote = posixpath.join(remote_dir, rel)

        async def write() -> None:
            if size > STREAM_ABOVE:
                await session.write_bytes(remote, _chunks(local), mode=mode, timeout=timeout)
            else:
                data = await asyncio.to_thread(local.read_bytes)
                await session.write_bytes(remote, data, mode=mode, timeout=timeout)

        return one(remote, write)

    def dir_job(rel: str) -> Awaitable[str | None]:
        remote = posixpath.join(remote_dir, rel)
        return one(remote, lambda: session.make_dir(remote, parents=True, exist_ok=True))

    written = await asyncio.gather(*(file_job(*entry) for entry in plan.files))
    await asyncio.gather(*(dir_job(rel) for rel in plan.empty_dirs))
    if failed:
        raise failed[0]
    return [r for r in written if r is not None]
