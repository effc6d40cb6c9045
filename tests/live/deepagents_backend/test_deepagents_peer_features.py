"""What peers offer, on the Deep Agents backend, live: every create option passed through, stderr
marked on request (default unchanged), pause and resume, and a directory upload without secrets."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepagents_opensandbox_backend import OpenSandboxBackend
from opensandbox_core import SandboxUnavailableError, Volume
from opensandbox_core.fleet import list_sandboxes

_ALLOWED = Path(__file__).resolve().parents[3] / ".testbed" / "volumes"  # sandbox.toml's prefix


@pytest.fixture(scope="module")
def host_dir(testbed_env: dict[str, str]) -> Iterator[Path]:
    if not _ALLOWED.is_dir():
        pytest.fail("the testbed has no allowed host path for volumes (.testbed/volumes)")
    with tempfile.TemporaryDirectory(dir=_ALLOWED) as name:
        Path(name, "from-host.txt").write_text("host side\n")
        Path(name).chmod(0o777)
        yield Path(name)


@pytest.fixture(scope="module")
def marked(sandbox_image: str, host_dir: Path) -> Iterator[OpenSandboxBackend]:
    with OpenSandboxBackend.create(
        image=sandbox_image,
        entrypoint=["sleep", "infinity"],
        env={"PEER_OPTION": "passed"},
        resource={"cpu": "1", "memory": "1Gi"},
        metadata={"peer-features": "deepagents"},
        volumes=[Volume("data", "/mnt/data", host_path=str(host_dir))],
        stderr_prefix="[stderr] ",
    ) as backend:
        yield backend


def test_every_create_option_reaches_the_sandbox(marked: OpenSandboxBackend) -> None:
    found = asyncio.run(list_sandboxes(metadata={"peer-features": "deepagents"}))
    assert [s.id for s in found] == [marked.id]
    result = marked.execute(
        "echo $PEER_OPTION; cat /sys/fs/cgroup/memory.max 2>/dev/null || "
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes; tr '\\0' ' ' < /proc/1/cmdline; echo; "
        "cat /mnt/data/from-host.txt"
    )
    assert result.exit_code == 0, result.output
    env, memory, cmdline, volume = result.output.splitlines()
    assert (env, memory, volume) == ("passed", str(1024**3), "host side")
    assert "sleep infinity" in cmdline


def test_stderr_is_marked_only_when_asked(marked: OpenSandboxBackend) -> None:
    command = "echo out; printf 'no newline'; echo err >&2; printf 'err2' >&2; exit 3"
    result = marked.execute(command)
    assert (result.output, result.exit_code) == ("out\nno newline\n[stderr] err\n[stderr] err2", 3)
    assert marked.execute("echo only-out").output == "only-out\n"
    timed_out = marked.execute("echo before >&2; sleep 5", timeout=1)
    assert timed_out.exit_code == 124
    assert timed_out.output.startswith("[stderr] before\nError: the command timed out")
    with OpenSandboxBackend.connect(marked.id) as plain:  # the default: as printed, unmarked
        assert plain.execute(command).output == "out\nno newlineerr\nerr2"


def test_pause_and_resume(marked: OpenSandboxBackend) -> None:
    marked.write("/workspace/kept.txt", "before the pause")
    marked.pause()
    with pytest.raises(SandboxUnavailableError, match="resume"):
        marked.execute("echo never")
    marked.resume()
    assert marked.execute("cat /workspace/kept.txt").output == "before the pause"

    async def in_async() -> None:
        await marked.apause()
        await marked.aresume()
        assert (await marked.aexecute("echo async")).output == "async\n"

    asyncio.run(in_async())


def _project(root: Path) -> None:
    for rel, text in {
        "src/app.py": "print('app')\n",
        "README.md": "# readme\n",
        ".env": "API_KEY=sk-live-secret\n",
        ".ssh/id_ed25519": "private key\n",
        "certs/server.pem": "pem\n",
        ".npmrc": "//registry.npmjs.org/:_authToken=x\n",
        "build/out.log": "log\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_upload_dir_skips_secrets_unless_told(marked: OpenSandboxBackend, tmp_path: Path) -> None:
    _project(tmp_path)
    report = marked.upload_dir(tmp_path, "/workspace/proj")
    assert report.uploaded == (
        "/workspace/proj/README.md",
        "/workspace/proj/build/out.log",
        "/workspace/proj/src/app.py",
    )
    assert report.skipped == {
        ".env": "secret",
        ".npmrc": "secret",
        ".ssh/": "secret",
        "certs/server.pem": "secret",
    }
    listed = marked.execute("cd /workspace/proj && find . -type f | sort").output.split()
    assert listed == ["./README.md", "./build/out.log", "./src/app.py"]

    report = asyncio.run(
        marked.aupload_dir(tmp_path, "/workspace/all", include_secrets=True, exclude=["build/"])
    )
    assert report.skipped == {"build/": "excluded"}
    listed = marked.execute("cd /workspace/all && find . -type f | sort").output.split()
    assert listed == [
        "./.env",
        "./.npmrc",
        "./.ssh/id_ed25519",
        "./README.md",
        "./certs/server.pem",
        "./src/app.py",
    ]
    assert marked.download_files(["/workspace/all/.env"])[0].content == b"API_KEY=sk-live-secret\n"
    with pytest.raises(ValueError, match="absolute"):
        marked.upload_dir(tmp_path, "relative/dir")
