"""`files.upload_dir`, live: secrets stay behind by default, the override uploads them, symlinks
never lead out of the tree, and modes, empty directories and large files arrive intact."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from opensandbox_core import AsyncSandboxSession, ConfigurationError, SandboxSession
from opensandbox_core._files._upload import SECRET_PATTERNS, STREAM_ABOVE

BIG = bytes(range(256)) * ((STREAM_ABOVE + 4096) // 256)  # streamed, not read whole

PLAIN = {
    "README.md": b"# project\n",
    "src/app.py": b"print('hi')\n",
    "src/pkg/__init__.py": b"",
    "run.sh": b"#!/bin/sh\necho run\n",
    "sample.env": b"not a dotfile: not matched by .env\n",
    "notes/key-points.md": b"a file with 'key' in its name is not a key\n",
    "data/big.bin": BIG,
}
SECRET = {
    ".env": b"OPENAI_API_KEY=sk-secret\n",
    ".env.production": b"DB_PASSWORD=hunter2\n",
    "config/server.pem": b"-----BEGIN PRIVATE KEY-----\n",
    "config/tls.key": b"key\n",
    ".ssh/id_ed25519": b"ssh key\n",
    ".ssh/config": b"Host *\n",
    ".aws/credentials": b"[default]\n",
    "deploy/id_rsa.pub": b"ssh-rsa AAAA\n",
    ".netrc": b"machine example.com password x\n",
    ".git-credentials": b"https://user:token@example.com\n",
    ".npmrc": b"//registry.npmjs.org/:_authToken=x\n",
    ".pypirc": b"[pypi]\npassword = x\n",
    "certs/client.p12": b"\x00p12",
}


def _tree(root: Path) -> None:
    for rel, content in {**PLAIN, **SECRET}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    (root / "run.sh").chmod(0o755)
    (root / "empty").mkdir()
    outside = root.parent / "outside-secret.txt"
    outside.write_bytes(b"outside the tree\n")
    os.symlink(outside, root / "escape.txt")  # out of the tree: skipped
    os.symlink("README.md", root / "readme-link.md")  # inside: uploaded as a file
    os.symlink(".env", root / "settings.env")  # inside, but to a secret: skipped
    os.symlink("src", root / "src-link")  # a directory: never descended
    os.symlink("missing", root / "dangling")


async def _remote_files(session: AsyncSandboxSession, remote: str) -> set[str]:
    result = await session.commands.run(f"cd {remote} && find . -type f -o -type l | sort")
    assert result.exit_code == 0, result.output
    return {line[2:] for line in result.stdout.splitlines()}


async def test_secrets_are_skipped_by_default(session: AsyncSandboxSession, tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    _tree(root)
    remote = "/workspace/upload-default"

    report = await session.files.upload_dir(root, remote)

    expected = {*PLAIN, "readme-link.md"}
    assert await _remote_files(session, remote) == expected
    assert set(report.uploaded) == {f"{remote}/{rel}" for rel in expected}
    assert report.bytes_uploaded == sum(len(v) for v in PLAIN.values()) + len(PLAIN["README.md"])
    assert report.skipped == {
        ".env": "secret",
        ".env.production": "secret",
        ".git-credentials": "secret",
        ".netrc": "secret",
        ".npmrc": "secret",
        ".pypirc": "secret",
        ".aws/": "secret",
        ".ssh/": "secret",
        "certs/client.p12": "secret",
        "config/server.pem": "secret",
        "config/tls.key": "secret",
        "deploy/id_rsa.pub": "secret",
        "dangling": "broken symlink",
        "escape.txt": "symlink outside the directory",
        "settings.env": "secret",
        "src-link": "symlink to a directory",
    }
    assert (await session.files.read_bytes(f"{remote}/data/big.bin")) == BIG
    assert (await session.files.read_bytes(f"{remote}/readme-link.md")) == PLAIN["README.md"]
    assert (await session.files.stat(f"{remote}/empty")).is_dir
    modes = await session.commands.run(f"stat -c '%a %n' {remote}/run.sh {remote}/README.md")
    assert modes.stdout.split("\n")[:2] == [f"755 {remote}/run.sh", f"644 {remote}/README.md"]


async def test_include_secrets_and_exclude(session: AsyncSandboxSession, tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    _tree(root)
    remote = "relative-upload"  # resolved against the working directory

    report = await session.files.upload_dir(
        root, remote, include_secrets=True, exclude=["data/", "*.md"], concurrency=3
    )

    arrived = await _remote_files(session, f"/workspace/{remote}")
    assert arrived == {
        rel for rel in {*PLAIN, *SECRET, "settings.env"} if not rel.endswith(".md")
    } - {"data/big.bin"}
    assert report.skipped == {
        "README.md": "excluded",
        "notes/key-points.md": "excluded",
        "readme-link.md": "excluded",
        "data/": "excluded",
        "dangling": "broken symlink",
        "escape.txt": "symlink outside the directory",
        "src-link": "symlink to a directory",
    }
    assert (await session.files.read_bytes(f"/workspace/{remote}/.env")) == SECRET[".env"]
    assert (
        "outside the tree"
        not in (await session.commands.run(f"grep -r outside /workspace/{remote} || true")).stdout
    )


async def test_bad_arguments_are_refused(session: AsyncSandboxSession, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="existing directory"):
        await session.files.upload_dir(tmp_path / "nope", "/workspace/x")
    with pytest.raises(ConfigurationError, match="list of patterns"):
        await session.files.upload_dir(tmp_path, "/workspace/x", exclude="*.log")
    assert ".env" in SECRET_PATTERNS and ".ssh/" in SECRET_PATTERNS


async def test_the_session_method_and_its_blocking_twin(
    session: AsyncSandboxSession, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / ".env").write_text("SECRET=1")
    report = await session.files.upload_dir(tmp_path, "/workspace/flat")
    assert (report.uploaded, dict(report.skipped)) == (
        ("/workspace/flat/a.txt",),
        {".env": "secret"},
    )
    assert session.id is not None
    with SandboxSession.attach(session.id) as blocking:
        report = blocking.files.upload_dir(tmp_path, "/workspace/blocking", include_secrets=True)
    assert report.uploaded == ("/workspace/blocking/.env", "/workspace/blocking/a.txt")
