"""A sandbox image with nothing but busybox: Debian's `busybox-static` and its applets.

No python3, no bash (busybox's `sh` is ash), no GNU coreutils or findutils: what a minimal
image gives an agent. The `.deb` comes from the machine's Debian mirror through apt
(`apt-get download busybox-static`, cached in `.testbed/cache/`), its `/bin/busybox` (a static
binary) goes into an otherwise empty root filesystem with one symlink per applet (the list the
binary itself gives), `/etc/passwd` and `/etc/group` for root and nobody, `/root` and `/tmp`,
imported as `opensandbox-agents/testbed-busybox:local`. Cached by a hash of this recipe: a
second start builds nothing.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

from testbed import _images
from testbed._paths import CACHE_DIR, cache_lock
from testbed._proc import TestbedError, run, say, step

__all__ = ["BUSYBOX_TAG", "busybox_binary", "busybox_hash", "ensure_busybox_image", "rootfs_tar"]

BUSYBOX_TAG = "opensandbox-agents/testbed-busybox:local"
PACKAGE = "busybox-static"
PASSWD = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
GROUP = b"root:x:0:\nnogroup:x:65534:\n"
# (path, mode) of the folders of the root filesystem; docker mounts /proc, /sys and /dev.
FOLDERS = (("bin", 0o755), ("sbin", 0o755), ("usr/bin", 0o755), ("usr/sbin", 0o755),
           ("etc", 0o755), ("root", 0o700), ("tmp", 0o1777), ("proc", 0o555), ("sys", 0o555),
           ("dev", 0o755), ("var/tmp", 0o1777))  # fmt: skip
_RECIPE = "1"  # bumped when the layout below changes


def busybox_hash() -> str:
    return _images.digest(
        "busybox", _images.LAYOUT, _RECIPE, PACKAGE, _images.arch(), PASSWD, GROUP
    )


def _deb() -> Path:
    """The cached busybox-static .deb, downloaded with apt-get when missing."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    found = sorted(CACHE_DIR.glob(f"{PACKAGE}_*.deb"))
    if found:
        return found[-1]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    download = ["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", PACKAGE]
    with step(f"apt-get download {PACKAGE}..."):
        for attempt in range(2):
            if attempt:  # no package lists yet on this machine
                run(["apt-get", "update", "-q"], timeout=600, env=env)
            proc = subprocess.run(
                download,
                cwd=CACHE_DIR,
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
                check=False,
            )
            if proc.returncode == 0:
                break
        else:
            raise TestbedError(f"apt-get download {PACKAGE} failed: {proc.stderr.strip()[-300:]}")
    found = sorted(CACHE_DIR.glob(f"{PACKAGE}_*.deb"))
    if not found:
        raise TestbedError(f"apt-get download {PACKAGE} left no .deb in {CACHE_DIR}")
    return found[-1]


def _busybox_binary(deb: Path) -> tuple[bytes, bytes]:
    """(/bin/busybox, its copyright file) out of the .deb."""
    proc = subprocess.run(
        ["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, timeout=120, check=False
    )
    if proc.returncode != 0:
        raise TestbedError(f"dpkg-deb --fsys-tarfile {deb.name}: {proc.stderr.decode()[-300:]}")
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        binary = tar.extractfile("./bin/busybox")
        notice = tar.extractfile(f"./usr/share/doc/{PACKAGE}/copyright")
        if binary is None or notice is None:
            raise TestbedError(f"{deb.name} holds no ./bin/busybox")
        return binary.read(), notice.read()


def busybox_binary() -> Path:
    """The image's static busybox as a file here (`.testbed/cache/busybox`, extracted from the
    cached .deb, downloaded when missing): the unit tests run commands on its applets."""
    path = CACHE_DIR / "busybox"
    if path.exists():  # made whole (renamed into place): no need to wait for the lock
        return path
    with cache_lock():
        if not path.exists():
            binary, _ = _busybox_binary(_deb())
            part = path.with_suffix(".part")
            part.write_bytes(binary)
            part.chmod(0o755)
            part.replace(path)
    return path


def _applets(binary: bytes) -> list[str]:
    """The applets' paths (`bin/sh`, `usr/bin/awk`, ...) as the binary lists them."""
    tmp = CACHE_DIR / "busybox.probe"
    tmp.write_bytes(binary)
    tmp.chmod(0o755)
    try:
        listed = run([str(tmp), "--list-full"], timeout=30).stdout.split()
    finally:
        tmp.unlink(missing_ok=True)
    return sorted(p for p in listed if p and p != "bin/busybox")


def rootfs_tar(binary: bytes, applets: list[str], notice: bytes = b"") -> bytes:
    """The root filesystem as a tar: busybox, a symlink per applet, passwd and group."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, mode in FOLDERS:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        files = [
            ("bin/busybox", binary, 0o755),
            ("etc/passwd", PASSWD, 0o644),
            ("etc/group", GROUP, 0o644),
        ]
        if notice:
            files.append((f"usr/share/doc/{PACKAGE}/copyright", notice, 0o644))
        for name, data, mode in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        for path in applets:
            info = tarfile.TarInfo(path)
            info.type, info.linkname = tarfile.SYMTYPE, "/bin/busybox"
            tar.addfile(info)
    return buf.getvalue()


def ensure_busybox_image() -> str:
    """Build (or reuse) the busybox sandbox image; return its tag."""
    want = busybox_hash()
    if _images.is_current(BUSYBOX_TAG, want):
        say(f"busybox image up to date: {BUSYBOX_TAG} ({want})")
        return BUSYBOX_TAG
    labels = _images.image_labels(BUSYBOX_TAG)
    if labels is not None and labels.get(_images.LABEL) != "1":
        raise TestbedError(f"{BUSYBOX_TAG} exists and was not built by the testbed")
    old = _images.image_id(BUSYBOX_TAG)
    deb = _deb()
    with step(f"docker import {deb.name} -> {BUSYBOX_TAG}..."):
        binary, notice = _busybox_binary(deb)
        tar = rootfs_tar(binary, _applets(binary), notice)
        args = ["docker", "import"]
        for change in [
            f"ENV {_images.PATH_ENV}",
            "WORKDIR /root",
            'CMD ["sh"]',
            *_images.label_changes("busybox", want),
        ]:
            args += ["--change", change]
        proc = subprocess.run(
            [*args, "-", BUSYBOX_TAG], input=tar, capture_output=True, timeout=300, check=False
        )
        if proc.returncode != 0:
            raise TestbedError(
                f"docker import of the busybox root failed: {proc.stderr.decode()[-300:]}"
            )
    _images.retire(old, BUSYBOX_TAG)
    return BUSYBOX_TAG
