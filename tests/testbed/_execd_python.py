"""The interpreter that the testbed's execd stand-in brings into every sandbox.

The stand-in daemon is Python; an image without python3 (the busybox image) could not run it. So
`images/execd-python.py` gathers bookworm's python3 from the sandbox image (the binary, its
dynamic loader and libraries, the standard library) into a folder under `.testbed/cache/`,
and every testbed server binds that folder read-only into its sandboxes at
/opt/opensandbox/python (`[docker] sandbox_binds`). `bootstrap.sh` starts the daemon through it
(`/opt/opensandbox/python/execd-python /opt/opensandbox/execd`), never with the image's own
python. The server copies only `/execd` and `/bootstrap.sh` out of the execd image, so the
interpreter cannot travel inside it; copying ~45 MB into every sandbox would also slow every
creation, where a bind costs nothing.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from testbed import _images
from testbed._paths import CACHE_DIR, IMAGES_DIR, read_env_file
from testbed._proc import TestbedError, say, step

__all__ = ["ENV", "MOUNT", "binds", "ensure_execd_python", "known_dir"]

MOUNT = "/opt/opensandbox/python"
ENV = "OSB_TESTBED_EXECD_PYTHON"
_SCRIPT = IMAGES_DIR / "execd-python.py"
_PREFIX = "execd-python-"
_KEEP = 3  # folders kept: a running server may still bind an older one


def python_hash() -> str:
    return _images.digest(
        "execd-python", _images.LAYOUT, _images.sandbox_hash(), _SCRIPT.read_bytes()
    )


def ensure_execd_python() -> Path:
    """The interpreter folder for the current sandbox image, built when missing."""
    target = CACHE_DIR / f"{_PREFIX}{python_hash()}"
    if (target / "execd-python").is_file():
        say(f"execd interpreter cached: {target.name}")
        return target
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    with step(f"gathering bookworm's python3 from {_images.SANDBOX_TAG} into {target.name}..."):
        with _SCRIPT.open("rb") as script:
            proc = subprocess.run(
                [
                    "docker",
                    "run",
                    "--rm",
                    "-i",
                    "--network=none",
                    _images.SANDBOX_TAG,
                    "python3",
                    "-",
                ],
                stdin=script,
                capture_output=True,
                timeout=300,
                check=False,
            )
        if proc.returncode != 0:
            raise TestbedError(
                f"execd-python.py failed: {proc.stderr.decode(errors='replace')[-500:]}"
            )
        part.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(proc.stdout), mode="r:") as tar:
            if hasattr(tarfile, "tar_filter"):
                tar.extractall(part, filter="tar")
            else:  # pragma: no cover - Python 3.11.0-3.11.3
                tar.extractall(part)  # noqa: S202 - our own archive, made just now
        part.rename(target)
    _prune(target)
    return target


def _prune(keep: Path) -> None:
    others = sorted(
        (p for p in CACHE_DIR.glob(f"{_PREFIX}*") if p != keep and p.is_dir()),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in others[_KEEP - 1 :]:
        say(f"removing outdated interpreter folder {old.name}")
        shutil.rmtree(old, ignore_errors=True)


def binds(folder: Path | None) -> list[str]:
    """The server's `sandbox_binds` entry for `folder` (none without one)."""
    return [f"{folder}:{MOUNT}:ro"] if folder is not None else []


def known_dir() -> Path | None:
    """The folder the running testbed binds (env, else `.testbed/env`), when it exists."""
    value = os.environ.get(ENV) or read_env_file().get(ENV)
    return Path(value) if value and Path(value, "execd-python").is_file() else None
