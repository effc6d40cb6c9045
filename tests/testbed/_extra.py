"""Extra opensandbox-server processes for tests, next to the testbed's own server.

An extra server uses the testbed's dockerd and images, listens on its own free loopback port, keeps
its config, log and store in a directory of its own, publishes sandbox ports in a range of its own,
and marks its sandbox containers with its own instance id, so that stopping it removes exactly the
containers it created. The testbed's server is never touched.

```python
with extra_server(api_key=None, allowed_host_paths=["/"]) as server:
    ...  # server.domain, server.api_key
```
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from testbed import _control, _execd_python, _server
from testbed._paths import STATE_DIR, read_env_file
from testbed._proc import terminate

__all__ = ["ExtraServer", "extra_server"]


@dataclass(frozen=True)
class ExtraServer:
    port: int
    pid: int
    api_key: str | None
    instance: str
    directory: Path
    profile: str

    @property
    def domain(self) -> str:
        return f"{_server.HOST}:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "server.log"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_server.HOST, 0))
        return int(s.getsockname()[1])


def _execd_image() -> str:
    image = os.environ.get("OSB_TESTBED_EXECD_IMAGE") or read_env_file().get(
        "OSB_TESTBED_EXECD_IMAGE"
    )
    if not image:
        raise RuntimeError("OSB_TESTBED_EXECD_IMAGE unknown: start the testbed first")
    return image


@contextlib.contextmanager
def extra_server(
    *,
    api_key: str | None,
    allowed_host_paths: list[str],
    port_range: tuple[int, int] = (41000, 41999),
    profile: str | None = None,
    execd_image: str | None = None,
    execd_python: Path | None = None,
) -> Iterator[ExtraServer]:
    """Run a second opensandbox-server for the duration of the block.

    `api_key=None` starts it without authentication (with `OPENSANDBOX_INSECURE_SERVER=YES`).
    Its sandboxes run the execd `profile` (default: the testbed's own) from `execd_image`
    (default: the testbed's image), with the daemon's interpreter from `execd_python` (default:
    the testbed's folder, see `_execd_python`).
    On exit the server is stopped and every sandbox container it created is removed.
    """
    chosen = _server.requested_profile(profile or read_env_file().get(_server.PROFILE_ENV))
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="extra-server-", dir=STATE_DIR))
    instance = "extra-" + secrets.token_hex(6)
    port = _free_port()
    config = directory / "sandbox.toml"
    _server.write_config(
        port=port,
        api_key=api_key,
        execd_image=execd_image or _execd_image(),
        instance=instance,
        config_path=config,
        store_path=directory / "opensandbox.db",
        allowed_host_paths=allowed_host_paths,
        port_range=port_range,
        profile=chosen,
        sandbox_binds=_execd_python.binds(execd_python or _execd_python.known_dir()),
    )
    pid: int | None = None
    try:
        pid = _server.start_server(
            port=port,
            api_key=api_key,
            config_path=config,
            log_path=directory / "server.log",
            pidfile=directory / "server.pid",
            extra_env={"OPENSANDBOX_INSECURE_SERVER": "YES"} if api_key is None else None,
        )
        yield ExtraServer(
            port=port,
            pid=pid,
            api_key=api_key,
            instance=instance,
            directory=directory,
            profile=chosen,
        )
    finally:
        if pid is not None:
            terminate(pid, group=True, grace=15, name="extra opensandbox-server")
        # Only this server's containers: they carry its instance marker in their environment.
        _control.cleanup_containers({"instance": instance})
        shutil.rmtree(directory, ignore_errors=True)
