"""Smoke tests of the testbed itself, through the raw `opensandbox` SDK."""

from __future__ import annotations

import glob
import ipaddress
import os
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from opensandbox import Sandbox
from opensandbox.config import ConnectionConfig
from opensandbox.models.execd import ExecutionHandlers, OutputMessage, RunCommandOpts

# printf output with an empty line in the middle: its framing tells execd generations apart.
PRINTF = r"printf 'one\n\nthree\n'"
EXPECTED_EVENTS = {
    # execd v1.0.17-v1.0.19: one event per line, ending stripped, a blank line is "\n"
    "1.0.19": ["one", "\n", "three"],
    "1.0.18": ["one", "\n", "three"],
    # v1.0.16 and older (modelled): blank lines dropped
    "1.0.16": ["one", "three"],
}


def _config(testbed_env: dict[str, str]) -> ConnectionConfig:
    return ConnectionConfig(
        domain=testbed_env["OPEN_SANDBOX_DOMAIN"],
        api_key=testbed_env["OPEN_SANDBOX_API_KEY"],
        request_timeout=timedelta(seconds=60),
    )


async def _create(
    testbed_env: dict[str, str], image: str, env: dict[str, str] | None = None
) -> Sandbox:
    return await Sandbox.create(
        image,
        timeout=timedelta(minutes=5),
        ready_timeout=timedelta(seconds=60),
        env=env or {},
        metadata={"purpose": "testbed-smoke"},
        connection_config=_config(testbed_env),
    )


async def _dispose(sandbox: Sandbox) -> None:
    try:
        await sandbox.kill()
    finally:
        await sandbox.close()


async def test_command_and_binary_file_round_trip(
    testbed_env: dict[str, str], sandbox_image: str
) -> None:
    sandbox = await _create(testbed_env, sandbox_image, env={"SMOKE_MARK": "hello testbed"})
    try:
        execution = await sandbox.commands.run(
            'echo "$SMOKE_MARK"; python3 -c "import sys; print(sys.version_info[0])"',
            opts=RunCommandOpts(timeout=timedelta(seconds=60)),
        )
        assert execution.error is None
        stdout = "".join(m.text for m in execution.logs.stdout)
        assert "hello testbed" in stdout
        assert "3" in stdout

        payload = bytes(range(256)) * 4
        await sandbox.files.write_file("/tmp/all-bytes.bin", payload)
        assert await sandbox.files.read_bytes("/tmp/all-bytes.bin") == payload

        check = await sandbox.commands.run(
            "python3 -c \"import sys; d=open('/tmp/all-bytes.bin','rb').read(); "
            'sys.exit(0 if d == bytes(range(256))*4 else 1)"',
            opts=RunCommandOpts(timeout=timedelta(seconds=60)),
        )
        assert check.error is None, check.error
    finally:
        await _dispose(sandbox)


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param(m, marks=pytest.mark.testbed_daemon(m))
        for m in ("1.1", "1.0.19", "1.0.18", "1.0.16")
    ],
)
async def test_output_framing_modes(
    testbed_env: dict[str, str], sandbox_image: str, mode: str
) -> None:
    """A sandbox's env picks its daemon's generation profile, whatever the testbed's default."""
    sandbox = await _create(testbed_env, sandbox_image, env={"OSB_EXECD_PROFILE": mode})
    try:
        texts: list[str] = []

        async def on_stdout(message: OutputMessage) -> None:
            texts.append(message.text)

        execution = await sandbox.commands.run(
            PRINTF,
            opts=RunCommandOpts(timeout=timedelta(seconds=60)),
            handlers=ExecutionHandlers(on_stdout=on_stdout),
        )
        assert execution.error is None
        if mode == "1.1":
            # Newer execd: texts carry their own line endings, chunked as the output arrives.
            assert "".join(texts) == "one\n\nthree\n"
        else:
            assert texts == EXPECTED_EVENTS[mode]
    finally:
        await _dispose(sandbox)


def _listening_sockets() -> list[tuple[str, str]]:
    """(local address, process info) of every listening TCP socket: `ss -ltnpH`, else /proc."""
    if shutil.which("ss") is None:
        return _listening_sockets_from_proc()
    out = subprocess.run(
        ["ss", "-ltnpH"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    rows = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            rows.append((fields[3], " ".join(fields[5:])))
    return rows


def _listening_sockets_from_proc() -> list[tuple[str, str]]:
    """The same as `ss -ltnpH` prints, from /proc/net/tcp{,6} and /proc/<pid>/fd."""
    owners: dict[str, str] = {}
    for fd_dir in glob.glob("/proc/[0-9]*/fd"):
        pid = fd_dir.split("/")[2]
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            for fd in os.listdir(fd_dir):
                target = os.readlink(f"{fd_dir}/{fd}")
                if target.startswith("socket:["):
                    owners[target[8:-1]] = f'users:(("{comm}",pid={pid},fd={fd}))'
        except OSError:
            continue
    rows = []
    for table, family in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A":  # LISTEN
                continue
            hex_addr, hex_port = fields[1].split(":")
            raw = bytes.fromhex(hex_addr)
            if family == 4:
                host = str(ipaddress.IPv4Address(raw[::-1]))
            else:
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                host = f"[{ipaddress.IPv6Address(words)}]"
            rows.append((f"{host}:{int(hex_port, 16)}", owners.get(fields[9], "")))
    return rows


def _host(address: str) -> str:
    host = address.rsplit(":", 1)[0].strip("[]")
    return host.split("%", 1)[0]


async def test_listening_sockets_are_loopback_only(
    testbed_env: dict[str, str], sandbox_image: str
) -> None:
    # A live sandbox makes docker publish its ports: they must be on loopback too.
    sandbox = await _create(testbed_env, sandbox_image)
    try:
        server_pid = testbed_env.get("OSB_TESTBED_SERVER_PID", "")
        ours = ("dockerd", "docker-proxy", "containerd")
        offenders = []
        checked = 0
        for address, process in _listening_sockets():
            is_ours = any(f'(("{name}"' in process for name in ours) or (
                server_pid and f"pid={server_pid}," in process
            )
            if not is_ours:
                continue
            checked += 1
            host = _host(address)
            if host == "*" or not ipaddress.ip_address(host).is_loopback:
                offenders.append(f"{address} {process}")
        assert checked >= 1, "the testbed's server socket was not found in `ss -ltnp`"
        assert not offenders, f"non-loopback listeners: {offenders}"
    finally:
        await _dispose(sandbox)


def test_environment_names_the_testbed(testbed_env: dict[str, str]) -> None:
    assert testbed_env["OPEN_SANDBOX_DOMAIN"].startswith("127.0.0.1:")
    assert os.environ.get("OPENSANDBOX_DISABLE_METRICS") == "1"
