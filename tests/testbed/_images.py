"""Local images: a Debian minbase sandbox image and an execd image, built without any registry.

The root filesystem is debootstrap's minbase with `images/packages.txt`, then apt (without
recommends) inside it for `images/apt-packages.txt` (python3-matplotlib, for the demo's chart).
"""

from __future__ import annotations

import glob
import hashlib
import io
import os
import platform
import re
import shutil
import subprocess
import tarfile
import time
from datetime import UTC, datetime
from pathlib import Path

from testbed import _daemon
from testbed._docker import apt_install, inspect
from testbed._paths import CACHE_DIR, EXECD_DIR, IMAGES_DIR
from testbed._proc import TestbedError, run, run_logged, say, step

SUITE = "bookworm"
SANDBOX_TAG = "opensandbox-agents/testbed-sandbox:bookworm"
EXECD_REPO = "opensandbox-agents/testbed-execd"
EXECD_TAG = f"{EXECD_REPO}:local"
# Upstream tags that the target frameworks use as defaults; given to our sandbox image when
# no image of that tag is present (never when it is somebody else's image). The code-interpreter
# tag (opensandbox/code-interpreter:v1.1.0) goes to the code-interpreter image (_jupyter.py).
UPSTREAM_ALIASES = ("python:3.13-slim",)
LABEL = "io.opensandbox-agents.testbed"
HASH_LABEL = f"{LABEL}.hash"
KIND_LABEL = f"{LABEL}.kind"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Bumped when the way images are assembled here changes.
LAYOUT = "2"


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:16]


def arch() -> str:
    if shutil.which("dpkg"):
        proc = run(["dpkg", "--print-architecture"], check=False, timeout=10)
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def rootfs_hash() -> str:
    script = (IMAGES_DIR / "rootfs.sh").read_bytes()
    packages = (IMAGES_DIR / "packages.txt").read_bytes()
    extra = IMAGES_DIR / "apt-packages.txt"
    apt_packages = extra.read_bytes() if extra.is_file() else b""
    return digest("rootfs", LAYOUT, SUITE, arch(), script, packages, apt_packages)


def sandbox_hash() -> str:
    entry = (IMAGES_DIR / "code-interpreter.sh").read_bytes()
    return digest("sandbox", LAYOUT, rootfs_hash(), entry)


def _execd_inputs() -> tuple[Path, Path]:
    package, bootstrap = _daemon.package_dir(EXECD_DIR), EXECD_DIR / "bootstrap.sh"
    missing = [str(p) for p in (package / "server.py", bootstrap) if not p.is_file()]
    if missing:
        raise TestbedError(f"execd build inputs missing: {', '.join(missing)}")
    return package, bootstrap


def _execd_sources() -> tuple[bytes, Path]:
    """The daemon as the image's `/execd` (a zip application of its package) and
    `bootstrap.sh`."""
    package, bootstrap = _execd_inputs()
    return _daemon.zipapp_bytes(package), bootstrap


def execd_hash() -> str:
    package, bootstrap = _execd_inputs()
    return digest(
        "execd", LAYOUT, sandbox_hash(), _daemon.source_key(package), bootstrap.read_bytes()
    )


def apt_mirror() -> str:
    """The Debian mirror this machine's apt uses (deb822 `URIs:` or one-line `deb` entries)."""
    override = os.environ.get("OSB_TESTBED_MIRROR")
    if override:
        return override
    found: list[tuple[str, list[str]]] = []
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        for stanza in Path(path).read_text(errors="replace").split("\n\n"):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                key, _, value = line.partition(":")
                fields[key.strip().lower()] = value.strip()
            if "deb" not in fields.get("types", "").split():
                continue
            if fields.get("enabled", "yes").lower() == "no":
                continue
            for uri in fields.get("uris", "").split():
                found.append((uri, fields.get("suites", "").split()))
    for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
        if not os.path.isfile(path):
            continue
        for line in Path(path).read_text(errors="replace").splitlines():
            words = line.split("#", 1)[0].split()
            if not words or words[0] != "deb":
                continue
            words = words[1:]
            if words and words[0].startswith("["):
                while words and not words[0].endswith("]"):
                    words = words[1:]
                words = words[1:]
            if len(words) >= 2:
                found.append((words[0], [words[1]]))

    def plain(suites: list[str]) -> bool:
        return any("-" not in s and "/" not in s for s in suites)

    for uri, suites in found:
        if plain(suites) and "security" not in uri:
            return uri.rstrip("/")
    raise TestbedError(
        "no Debian mirror found in /etc/apt/sources.list{,.d/*} (set OSB_TESTBED_MIRROR to one)"
    )


def image_labels(tag: str) -> dict[str, str] | None:
    """The labels of a local image, or None when there is no such image."""
    data = inspect("image", tag)
    if not data:
        return None
    config = data[0].get("Config") or {}
    labels = config.get("Labels") if isinstance(config, dict) else None
    return dict(labels or {})


def image_id(tag: str) -> str | None:
    data = inspect("image", tag)
    return str(data[0]["Id"]) if data else None


def is_current(tag: str, want: str) -> bool:
    labels = image_labels(tag)
    return labels is not None and labels.get(HASH_LABEL) == want


def rootfs_tarball() -> Path:
    """The cached rootfs tarball, built with debootstrap when missing."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    key = rootfs_hash()
    tarball = CACHE_DIR / f"rootfs-{SUITE}-{key}.tar"
    if tarball.is_file():
        say(f"rootfs tarball cached: {tarball.name}")
        return tarball
    if shutil.which("debootstrap") is None:
        apt_install("debootstrap")
    mirror = apt_mirror()
    for old in CACHE_DIR.glob(f"rootfs-{SUITE}-*.tar"):
        say(f"removing outdated rootfs tarball {old.name}")
        old.unlink()
    with step(f"debootstrap {SUITE} minbase from {mirror} (takes a few minutes)..."):
        run_logged(
            ["bash", str(IMAGES_DIR / "rootfs.sh"), str(tarball), mirror, SUITE],
            CACHE_DIR / "rootfs-build.log",
            what="debootstrap",
            timeout=1800,
        )
    return tarball


def tar_of(files: dict[str, tuple[bytes, int]]) -> bytes:
    """A tar stream of the given {absolute path: (content, mode)}, owned by root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        dirs: set[str] = set()
        for path in files:
            parent = Path(path.lstrip("/")).parent
            while str(parent) not in (".", ""):
                dirs.add(str(parent))
                parent = parent.parent
        for d in sorted(dirs):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            info.mtime = int(time.time())
            tar.addfile(info)
        for path, (content, mode) in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size = len(content)
            info.mode = mode
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def _layer(base: str, tag: str, files: dict[str, tuple[bytes, int]], changes: list[str]) -> None:
    """Commit `files` on top of image `base` as `tag` (docker create + cp + commit: no network)."""
    cid = run(["docker", "create", "--network=none", base], timeout=60).stdout.strip()
    try:
        proc = subprocess.run(
            ["docker", "cp", "-", f"{cid}:/"],
            input=tar_of(files),
            capture_output=True,
            timeout=120,
            check=False,
        )
        if proc.returncode != 0:
            raise TestbedError(f"docker cp into {base} failed: {proc.stderr.decode()[-500:]}")
        args = ["docker", "commit"]
        for change in changes:
            args += ["--change", change]
        run([*args, cid, tag], timeout=300)
    finally:
        run(["docker", "rm", "-f", cid], check=False, timeout=60)


def layer_with_tar(
    base: str, tag: str, tar: Path, files: dict[str, tuple[bytes, int]], changes: list[str]
) -> None:
    """As :func:`_layer`, with the tarball `tar` unpacked at `/` first."""
    cid = run(["docker", "create", "--network=none", base], timeout=60).stdout.strip()
    try:
        for stream in (tar.read_bytes(), tar_of(files)):
            proc = subprocess.run(
                ["docker", "cp", "-", f"{cid}:/"],
                input=stream,
                capture_output=True,
                timeout=600,
                check=False,
            )
            if proc.returncode != 0:
                raise TestbedError(f"docker cp into {base} failed: {proc.stderr.decode()[-500:]}")
        args = ["docker", "commit"]
        for change in changes:
            args += ["--change", change]
        run([*args, cid, tag], timeout=600)
    finally:
        run(["docker", "rm", "-f", cid], check=False, timeout=60)


def label_changes(kind: str, value: str) -> list[str]:
    return [f'LABEL {LABEL}="1" {KIND_LABEL}="{kind}" {HASH_LABEL}="{value}"']


def retire(old_id: str | None, tag: str) -> None:
    """Remove an image of ours that a rebuild replaced (best effort: it may still be in use)."""
    if old_id and old_id != image_id(tag):
        run(["docker", "rmi", old_id], check=False, timeout=60)


def ensure_sandbox_image() -> str:
    """Build (or reuse) the sandbox image; return its tag."""
    want = sandbox_hash()
    if is_current(SANDBOX_TAG, want):
        say(f"sandbox image up to date: {SANDBOX_TAG} ({want})")
    else:
        labels = image_labels(SANDBOX_TAG)
        if labels is not None and labels.get(LABEL) != "1":
            raise TestbedError(f"{SANDBOX_TAG} exists and was not built by the testbed")
        old = image_id(SANDBOX_TAG)
        tarball = rootfs_tarball()
        base = f"{SANDBOX_TAG}-rootfs"
        with step(f"docker import {tarball.name} -> {SANDBOX_TAG}..."):
            changes = [
                f"ENV {PATH_ENV}",
                "ENV LANG=C.UTF-8",
                'CMD ["/bin/bash"]',
                *label_changes("rootfs", rootfs_hash()),
            ]
            args = ["docker", "import"]
            for change in changes:
                args += ["--change", change]
            run([*args, str(tarball), base], timeout=900)
            entry = (IMAGES_DIR / "code-interpreter.sh").read_bytes()
            _layer(
                base,
                SANDBOX_TAG,
                {"/opt/code-interpreter/code-interpreter.sh": (entry, 0o755)},
                [
                    "WORKDIR /root",
                    'CMD ["/bin/bash"]',
                    *label_changes("sandbox", want),
                ],
            )
            run(["docker", "rmi", base], check=False, timeout=60)
        retire(old, SANDBOX_TAG)
    _alias_upstream_tags()
    return SANDBOX_TAG


def _alias_upstream_tags() -> None:
    for name in UPSTREAM_ALIASES:
        alias(SANDBOX_TAG, name)


def alias(ours: str, name: str) -> bool:
    """Tag our image `ours` as `name` too, unless `name` is an image that is not ours; whether
    `name` is ours now."""
    labels = image_labels(name)
    if labels is not None and labels.get(LABEL) != "1":
        say(f"{name} exists and is not ours: left as it is")
        return False
    if image_id(name) == image_id(ours):
        return True
    run(["docker", "tag", ours, name], timeout=60)
    say(f"tagged {ours} as {name}")
    return True


def _try_upstream_execd(tag: str) -> bool:
    if image_labels(tag) is not None:
        say(f"using local execd image {tag}")
        return True
    with step(f"docker pull {tag} (OSB_EXECD_IMAGE)..."):
        try:
            proc = subprocess.run(
                ["docker", "pull", tag], capture_output=True, text=True, timeout=90, check=False
            )
        except subprocess.TimeoutExpired:
            say(f"  pull of {tag} timed out")
            return False
    if proc.returncode == 0:
        return True
    say(f"  cannot pull {tag}: {(proc.stderr or proc.stdout).strip()[-300:]}")
    return False


def ensure_execd_image(*, pinned: bool = False) -> str:
    """The execd image: OSB_EXECD_IMAGE when present or pullable, else our own build.

    Our own is `EXECD_TAG`, or with `pinned` an image of its own tagged `EXECD_REPO:<input
    hash>`: a server that takes its daemon from that gets this work tree's daemon even when
    another work tree re-tags `EXECD_TAG` with its own daemon before the server's first sandbox
    (the server copies `/execd` then), and a build of the same inputs is reused. Pinned images
    older than a day are removed.
    """
    upstream = os.environ.get("OSB_EXECD_IMAGE", "").strip()
    if upstream:
        if _try_upstream_execd(upstream):
            return upstream
        say(f"falling back to the testbed's own execd image {EXECD_TAG}")
    want = execd_hash()
    tag = f"{EXECD_REPO}:{want}" if pinned else EXECD_TAG
    if is_current(tag, want):
        say(f"execd image up to date: {tag} ({want})")
        return tag
    _build_execd_image(tag, want)
    if pinned:
        _prune_pinned(keep=tag)
    return tag


def _prune_pinned(keep: str, max_age_s: float = 86400.0) -> None:
    listed = run(
        ["docker", "images", "--filter", f"reference={EXECD_REPO}", "--format", "{{.Tag}}"],
        check=False,
        timeout=60,
    ).stdout.split()
    for name in listed:
        tag = f"{EXECD_REPO}:{name}"
        if tag == keep or not re.fullmatch(r"[0-9a-f]{16}", name):
            continue
        data = inspect("image", tag)
        created = str(data[0].get("Created", "")) if data else ""
        try:
            when = datetime.fromisoformat(created[:26].rstrip("Z")).replace(tzinfo=UTC)
        except ValueError:
            continue
        if (datetime.now(UTC) - when).total_seconds() > max_age_s:
            run(["docker", "rmi", tag], check=False, timeout=60)


def is_testbed_execd(image: str | None) -> bool:
    """Whether `image` is one of the testbed's own execd images (any tag of EXECD_REPO)."""
    return bool(image) and str(image).startswith(EXECD_REPO + ":")


def _build_execd_image(tag: str, want: str) -> None:
    labels = image_labels(tag)
    if labels is not None and labels.get(LABEL) != "1":
        raise TestbedError(f"{tag} exists and was not built by the testbed")
    old = image_id(tag)
    daemon, bootstrap = _execd_sources()
    with step(f"building {tag} from {SANDBOX_TAG} + the daemon, {bootstrap.name}..."):
        _layer(
            SANDBOX_TAG,
            tag,
            {
                "/execd": (daemon, 0o755),
                "/bootstrap.sh": (bootstrap.read_bytes(), 0o755),
            },
            ['CMD ["tail", "-f", "/dev/null"]', *label_changes("execd", want)],
        )
    retire(old, tag)
