"""What peers offer, on the Pydantic AI backend and capability, live: the create options passed
through, pause and resume (backend and capability by ref), and a directory upload that leaves
secrets behind unless told otherwise."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic_ai.workspaces import WorkspaceUnavailableError

from opensandbox_core import Volume
from opensandbox_core.fleet import list_sandboxes
from pydantic_ai_opensandbox import CREATE_METADATA_KEY, OpenSandbox, OpenSandboxBackend

_ALLOWED = Path(__file__).resolve().parents[3] / ".testbed" / "volumes"  # sandbox.toml's prefix


@pytest.mark.long
async def test_create_options_pause_resume_and_upload(
    make_backend: Callable[..., OpenSandboxBackend], tmp_path: Path
) -> None:
    if not _ALLOWED.is_dir():
        pytest.fail("the testbed has no allowed host path for volumes (.testbed/volumes)")
    with tempfile.TemporaryDirectory(dir=_ALLOWED) as host_dir:
        Path(host_dir, "from-host.txt").write_text("host side\n")
        Path(host_dir).chmod(0o777)
        backend = make_backend(
            entrypoint=["sleep", "infinity"],
            metadata={"peer-features": "pydantic"},
            volumes=[Volume("data", "/mnt/data", host_path=host_dir)],
            env={"PEER_OPTION": "passed"},
        )
        try:
            result = await backend.run(
                [
                    "sh",
                    "-c",
                    "echo $PEER_OPTION; cat /mnt/data/from-host.txt; tr '\\0' ' ' < /proc/1/cmdline",
                ]
            )
            env, volume, cmdline = result.stdout.splitlines()
            assert (env, volume) == ("passed", "host side")
            assert "sleep infinity" in cmdline
            assert backend.ref is not None
            found = await list_sandboxes(
                metadata={"peer-features": "pydantic", CREATE_METADATA_KEY: "true"}
            )
            assert [s.id for s in found] == [backend.ref.id]

            # pause and resume, on the backend and through the capability by ref
            await backend.write_bytes("kept.txt", b"before the pause")
            await backend.pause()
            with pytest.raises(WorkspaceUnavailableError, match="resume"):
                await backend.run(["true"])
            await backend.resume()
            assert await backend.read_bytes("kept.txt") == b"before the pause"
            capability = OpenSandbox()
            await capability.pause(backend.ref)
            with pytest.raises(WorkspaceUnavailableError, match="paused"):
                await backend.read_bytes("kept.txt")
            await capability.resume(backend.ref)
            fresh = capability.backend(backend.ref)
            try:
                assert (await fresh.run(["echo", "back"])).stdout == "back\n"
            finally:
                await fresh.aclose()
            await backend.resume()  # this backend saw the pause: its own resume (quiet) clears it

            # directory upload: secrets stay behind by default
            for rel, text in {
                "src/app.py": "print('app')\n",
                ".env.local": "TOKEN=secret\n",
                ".aws/credentials": "[default]\n",
                "id_rsa": "key\n",
            }.items():
                (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / rel).write_text(text)
            report = await backend.upload_dir(tmp_path, "proj")
            assert report.uploaded == ("proj/src/app.py",)
            assert report.skipped == {".aws/": "secret", ".env.local": "secret", "id_rsa": "secret"}
            listed = await backend.run(["sh", "-c", "cd proj && find . -type f | sort"])
            assert listed.stdout.split() == ["./src/app.py"]
            report = await backend.upload_dir(tmp_path, "/workspace/all", include_secrets=True)
            assert report.skipped == {}
            listed = await backend.run(["sh", "-c", "cd /workspace/all && find . -type f | sort"])
            assert listed.stdout.split() == [
                "./.aws/credentials",
                "./.env.local",
                "./id_rsa",
                "./src/app.py",
            ]
        finally:
            await backend.aclose()
