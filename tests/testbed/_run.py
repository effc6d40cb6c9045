"""`python -m testbed run --profile P -- COMMAND...`: run a command against a server of its own.

The server is an extra `opensandbox-server` (see `_extra`) whose sandboxes run the execd
generation profile `P` from an execd image rebuilt from the work tree when its sources changed, so
that a change to the daemon (`tests/testbed/execd/daemon`) can be tested without restarting the
testbed's own server (which keeps the daemon it copied when it served its first sandbox). The command gets the
same environment as the testbed's `.testbed/env` gives, pointed at the extra server.
"""

from __future__ import annotations

import os
import secrets
import subprocess

from testbed import _busybox, _docker, _execd_python, _images, _jupyter, _server
from testbed._extra import extra_server
from testbed._paths import HOST_VOLUMES, read_env_file
from testbed._proc import TestbedError, say


def run(command: list[str], profile: str | None) -> int:
    if not command:
        raise TestbedError("nothing to run: give a command after `--`")
    wanted = _server.requested_profile(profile)
    if not _docker.docker_answers(timeout=10):
        raise TestbedError("no Docker engine answers: start the testbed first (`testbed start`)")
    sandbox_image = _images.ensure_sandbox_image()
    execd_image = _images.ensure_execd_image(pinned=True)
    execd_python = _execd_python.ensure_execd_python()
    busybox_image = _busybox.ensure_busybox_image()
    code_image = _jupyter.ensure_code_image()
    api_key = secrets.token_urlsafe(32)
    # A port block of its own, so that several runs at once do not publish the same ports.
    low = 42000 + 500 * secrets.randbelow(16)
    HOST_VOLUMES.mkdir(parents=True, exist_ok=True)
    with extra_server(
        api_key=api_key,
        allowed_host_paths=[str(HOST_VOLUMES)],
        port_range=(low, low + 499),
        profile=wanted,
        execd_image=execd_image,
        execd_python=execd_python,
    ) as server:
        env = {**os.environ, **read_env_file()}
        env.update(
            OPEN_SANDBOX_DOMAIN=server.domain,
            OPEN_SANDBOX_API_KEY=api_key,
            OPEN_SANDBOX_PROTOCOL="http",
            OPENSANDBOX_DISABLE_METRICS="1",
            OSB_TESTBED_IMAGE=sandbox_image,
            OSB_TESTBED_EXECD_IMAGE=execd_image,
            OSB_TESTBED_EXECD_PYTHON=str(execd_python),
            OSB_TESTBED_BUSYBOX_IMAGE=busybox_image,
            OSB_TESTBED_CODE_IMAGE=code_image,
            OSB_TESTBED_INSTANCE=server.instance,
            OSB_TESTBED_SERVER_PID=str(server.pid),
            **{_server.PROFILE_ENV: wanted},
        )
        say(f"running {command[0]!r} against {server.domain} (execd profile {wanted})")
        return subprocess.run(command, env=env, check=False).returncode
