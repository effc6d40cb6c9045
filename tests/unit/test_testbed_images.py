"""The testbed's busybox image layout and the server config that binds the daemon's interpreter.

No Docker here: the root filesystem is checked as the tar `docker import` gets, the config as
the installed opensandbox-server validates it (live tests use both for real).
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

from testbed import _busybox, _execd_python, _paths, _server


def test_the_busybox_root_holds_busybox_its_applets_and_the_users() -> None:
    data = _busybox.rootfs_tar(b"\x7fELF-busybox", ["bin/sh", "usr/bin/tail"], b"notice")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        binary = tar.extractfile("bin/busybox")
        passwd = tar.extractfile("etc/passwd")
        assert binary is not None and passwd is not None
        assert binary.read() == b"\x7fELF-busybox"
        assert passwd.read().startswith(b"root:x:0:0:root:/root:/bin/sh\n")
    assert members["bin/busybox"].mode == 0o755
    for applet in ("bin/sh", "usr/bin/tail"):
        assert members[applet].issym() and members[applet].linkname == "/bin/busybox"
    assert members["tmp"].isdir() and members["tmp"].mode == 0o1777
    assert members["root"].mode == 0o700
    assert "usr/share/doc/busybox-static/copyright" in members
    assert not any("python" in name or "bash" in name for name in members)


def test_the_server_config_binds_the_interpreter_read_only(tmp_path: Path) -> None:
    folder = tmp_path / "execd-python-0123456789abcdef"
    config = tmp_path / "sandbox.toml"
    _server.write_config(
        port=40123,
        api_key="k" * 32,
        execd_image="opensandbox-agents/testbed-execd:local",
        instance="unit",
        config_path=config,
        store_path=tmp_path / "store.db",
        allowed_host_paths=[str(tmp_path)],
        sandbox_binds=_execd_python.binds(folder),
    )  # validated against the installed server's config model
    docker = tomllib.loads(config.read_text())["docker"]
    assert docker["sandbox_binds"] == [f"{folder}:/opt/opensandbox/python:ro"]
    assert _execd_python.binds(None) == []
    _server.write_config(
        port=40123,
        api_key=None,
        execd_image="opensandbox-agents/testbed-execd:local",
        instance="unit",
        config_path=config,
        store_path=tmp_path / "store.db",
        allowed_host_paths=[str(tmp_path)],
    )
    assert tomllib.loads(config.read_text())["docker"]["sandbox_binds"] == []


def test_the_cache_lock_is_reentrant_and_keeps_other_processes_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`testbed prepare` in the background and a session's `testbed busybox` take turns."""
    monkeypatch.setattr(_paths, "CACHE_DIR", tmp_path)
    probe = [
        sys.executable,
        "-c",
        "import fcntl, sys\n"
        "with open(sys.argv[1], 'a') as fh:\n"
        "    try:\n"
        "        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "    except BlockingIOError:\n"
        "        sys.exit(3)\n",
        str(tmp_path / ".lock"),
    ]
    with _paths.cache_lock(), _paths.cache_lock():  # a build that asks for the wheels inside
        assert subprocess.run(probe, check=False).returncode == 3
    assert subprocess.run(probe, check=False).returncode == 0
