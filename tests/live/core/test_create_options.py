"""The server's create options, passed through the session's create path, live."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    ConfigurationError,
    EgressRule,
    NetworkPolicy,
    SandboxSpec,
    Volume,
)

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral

_ALLOWED = Path(__file__).resolve().parents[3] / ".testbed" / "volumes"  # sandbox.toml's prefix


async def test_volume_env_resources_and_metadata_reach_the_sandbox(sandbox_image: str) -> None:
    if not _ALLOWED.is_dir():
        pytest.skip("the testbed has no allowed host path for volumes")
    with tempfile.TemporaryDirectory(dir=_ALLOWED) as host_dir:
        Path(host_dir, "from-host.txt").write_text("host side\n")
        Path(host_dir).chmod(0o777)
        spec = SandboxSpec(
            image=sandbox_image,
            container_env={"OSB_OPTION": "passed"},
            resource={"cpu": "1", "memory": "1Gi"},
            metadata={"purpose": "create-options"},
            volumes=[Volume("data", "/mnt/data", host_path=host_dir)],
            entrypoint=["sleep", "infinity"],
        )
        async with AsyncSandboxSession(spec) as sb:
            assert await sb.files.read_bytes("/mnt/data/from-host.txt") == b"host side\n"
            await sb.files.write_bytes("/mnt/data/from-sandbox.txt", b"sandbox side")
            assert Path(host_dir, "from-sandbox.txt").read_bytes() == b"sandbox side"
            result = await sb.commands.run(
                "echo $OSB_OPTION; cat /sys/fs/cgroup/memory.max 2>/dev/null || "
                "cat /sys/fs/cgroup/memory/memory.limit_in_bytes; "
                "tr '\\0' ' ' < /proc/1/cmdline"
            )
            lines = result.stdout.splitlines()
            assert lines[0] == "passed"
            assert lines[1] == str(1024**3)
            assert "sleep infinity" in lines[2]


async def test_read_only_volume_refuses_writes(sandbox_image: str) -> None:
    if not _ALLOWED.is_dir():
        pytest.skip("the testbed has no allowed host path for volumes")
    with tempfile.TemporaryDirectory(dir=_ALLOWED) as host_dir:
        spec = SandboxSpec(
            image=sandbox_image,
            volumes=[Volume("ro", "/mnt/ro", host_path=host_dir, read_only=True)],
        )
        async with AsyncSandboxSession(spec) as sb:
            result = await sb.commands.run("touch /mnt/ro/x")
            assert result.exit_code != 0
            assert "Read-only file system" in result.stderr


def test_invalid_options_fail_before_any_request() -> None:
    with pytest.raises(ConfigurationError, match="DNS label"):
        Volume("Not_A_Label", "/mnt", host_path="/tmp")
    with pytest.raises(ConfigurationError, match="exactly one"):
        Volume("data", "/mnt")
    with pytest.raises(ConfigurationError, match="absolute"):
        Volume("data", "relative", host_path="/tmp")
    with pytest.raises(ConfigurationError, match="not both"):
        SandboxSpec(
            image="x",
            allow_internet_access=False,
            network_policy=NetworkPolicy(egress=[EgressRule("allow", "pypi.org")]),
        )
    with pytest.raises(ConfigurationError, match="named 'a'"):
        SandboxSpec(
            image="x",
            volumes=[Volume("a", "/a", host_path="/x"), Volume("a", "/b", host_path="/y")],
        )
