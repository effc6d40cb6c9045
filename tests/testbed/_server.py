"""The opensandbox-server process: its config, start, health and stop."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from testbed._paths import (
    HOST_VOLUMES,
    SERVER_CONFIG,
    SERVER_LOG,
    SERVER_PIDFILE,
    STORE_PATH,
)
from testbed._proc import (
    TestbedError,
    pid_alive,
    proc_cmdline,
    read_pidfile,
    say,
    spawn_detached,
    tail,
    terminate,
)

HOST = "127.0.0.1"
PREFERRED_PORT = 8080
PORT_RANGE = (40000, 40999)
API_KEY_HEADER = "OPEN-SANDBOX-API-KEY"
# Injected into every sandbox this server creates (`[docker] sandbox_env`): how `stop` tells the
# testbed's sandbox containers from those of other OpenSandbox servers on the same engine.
INSTANCE_ENV = "OSB_TESTBED_INSTANCE"
# Also injected into every sandbox: which execd generation the testbed daemon behaves like.
PROFILE_ENV = "OSB_EXECD_PROFILE"
# The generations the live suite runs on, in `nox -s integration` order; the first is the default.
# `1.0.16` (blank lines dropped) is modelled too, for the tests of the refusal only.
PROFILES = ("1.0.19", "1.0.18", "1.1")
MODELLED_ONLY = ("1.0.16",)


def requested_profile(value: str | None = None) -> str:
    """The profile asked for (argument, else env OSB_EXECD_PROFILE, else the default), checked."""
    profile = (value or os.environ.get(PROFILE_ENV, "") or PROFILES[0]).strip()
    if profile not in PROFILES + MODELLED_ONLY:
        raise TestbedError(
            f"unknown execd profile {profile!r}: choose one of {', '.join(PROFILES + MODELLED_ONLY)}"
        )
    return profile


def server_executable() -> str:
    """`opensandbox-server` from the running interpreter's environment (else PATH)."""
    here = Path(sys.executable).parent / "opensandbox-server"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("opensandbox-server")
    if found:
        return found
    raise TestbedError(
        "opensandbox-server not found next to "
        f"{sys.executable} nor on PATH (it is in the `test` dependency group)"
    )


def _port_free(port: int) -> bool:
    for host in (HOST, "0.0.0.0"):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            # Like uvicorn: a port in TIME_WAIT after the previous server is reusable.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def pick_port() -> int:
    if _port_free(PREFERRED_PORT):
        return PREFERRED_PORT
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def write_config(
    *,
    port: int,
    api_key: str | None,
    execd_image: str,
    instance: str,
    config_path: Path = SERVER_CONFIG,
    store_path: Path = STORE_PATH,
    allowed_host_paths: list[str] | None = None,
    port_range: tuple[int, int] = PORT_RANGE,
    profile: str = PROFILES[0],
    sandbox_binds: list[str] | None = None,
) -> None:
    """Write a server config. The defaults are the testbed's own server; other values serve
    extra servers that tests start (`api_key=None` leaves the key out: an insecure server).
    `sandbox_binds` are bound into every sandbox (the execd stand-in's interpreter)."""
    if allowed_host_paths is None:
        HOST_VOLUMES.mkdir(parents=True, exist_ok=True)
        allowed_host_paths = [str(HOST_VOLUMES)]
    key_line = f"api_key = {_toml_str(api_key)}\n" if api_key is not None else ""
    allowed = ", ".join(_toml_str(p) for p in allowed_host_paths)
    binds = ", ".join(_toml_str(b) for b in sandbox_binds or [])
    text = f"""# Written by `python -m testbed start`; rewritten on every start. Everything on loopback.
[server]
host = {_toml_str(HOST)}
port = {port}
{key_line}
[log]
level = "INFO"

[runtime]
type = "docker"
execd_image = {_toml_str(execd_image)}

[docker]
network_mode = "bridge"
publish_host = {_toml_str(HOST)}
port_range_min = {port_range[0]}
port_range_max = {port_range[1]}
sandbox_env = {{ {INSTANCE_ENV} = {_toml_str(instance)}, {PROFILE_ENV} = {_toml_str(profile)} }}
sandbox_binds = [{binds}]

[proxy]
resolve_internal = false

[storage]
allowed_host_paths = [{allowed}]

[store]
type = "sqlite"
path = {_toml_str(str(store_path))}
"""
    config_path.touch(mode=0o600)
    config_path.chmod(0o600)
    config_path.write_text(text)
    _validate_config(config_path)


def _validate_config(config_path: Path = SERVER_CONFIG) -> None:
    """Check every key against the installed server's config model (it ignores unknown keys)."""
    try:
        import tomllib

        from opensandbox_server.config import AppConfig
    except ImportError:
        return  # the server is not importable here: it validates the file itself at start
    data = tomllib.loads(config_path.read_text())
    AppConfig(**data)
    fields = AppConfig.model_fields
    for section, values in data.items():
        if section not in fields:
            raise TestbedError(f"server config: unknown section [{section}]")
        model = fields[section].annotation
        sub = getattr(model, "model_fields", None)
        if sub is None:  # Optional[...]: look inside
            for arg in getattr(model, "__args__", ()):
                sub = getattr(arg, "model_fields", None) or sub
        if sub is None:
            continue
        unknown = sorted(set(values) - set(sub))
        if unknown:
            raise TestbedError(f"server config: unknown keys in [{section}]: {unknown}")


def _get(url: str, api_key: str | None = None, timeout: float = 3) -> tuple[int, bytes]:
    req = urllib.request.Request(url)  # noqa: S310 - always http://127.0.0.1
    if api_key:
        req.add_header(API_KEY_HEADER, api_key)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def healthy(port: int) -> bool:
    try:
        status, _ = _get(f"http://{HOST}:{port}/health", timeout=2)
    except OSError:
        return False
    return status == 200


def server_pid() -> int | None:
    """The pid of the testbed's server if it still runs."""
    pid = read_pidfile(SERVER_PIDFILE)
    if pid and pid_alive(pid) and any("opensandbox-server" in a for a in proc_cmdline(pid)[:2]):
        return pid
    return None


def start_server(
    *,
    port: int,
    api_key: str | None,
    config_path: Path = SERVER_CONFIG,
    log_path: Path = SERVER_LOG,
    pidfile: Path = SERVER_PIDFILE,
    extra_env: dict[str, str] | None = None,
) -> int:
    """Start the server detached and wait until /health answers; return its pid.

    The defaults are the testbed's own server; tests pass other paths for extra servers. A
    server without a key (`api_key=None`, a config without one) gets OPENSANDBOX_INSECURE_SERVER=YES,
    since only test code starts one deliberately."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENSANDBOX_SERVER_API_KEY", "SANDBOX_CONFIG_PATH")
    }
    if api_key is None:
        env["OPENSANDBOX_INSECURE_SERVER"] = "YES"
    env.update(extra_env or {})
    exe = server_executable()
    log_path.write_text("")
    pid = spawn_detached([exe, "--config", str(config_path)], log_path, env=env)
    pidfile.write_text(f"{pid}\n")
    start = time.monotonic()
    while time.monotonic() - start < 90:
        if not pid_alive(pid):
            raise TestbedError(f"opensandbox-server exited; {log_path}:\n{tail(log_path, 40)}")
        if healthy(port):
            break
        time.sleep(0.3)
    else:
        terminate(pid, group=True, grace=5, name="opensandbox-server")
        raise TestbedError(
            f"opensandbox-server not healthy after 90s; {log_path}:\n{tail(log_path, 40)}"
        )
    status, body = _get(f"http://{HOST}:{port}/v1/sandboxes", api_key=api_key, timeout=10)
    if status != 200:
        raise TestbedError(f"server answers /v1/sandboxes with {status}: {body[:300]!r}")
    say(
        f"opensandbox-server healthy on {HOST}:{port} (pid {pid}) in {time.monotonic() - start:.1f}s"
    )
    return pid


def stop_server() -> None:
    pid = server_pid()
    if pid is None:
        SERVER_PIDFILE.unlink(missing_ok=True)
        return
    say(f"stopping opensandbox-server (pid {pid})")
    terminate(pid, group=True, grace=15, name="opensandbox-server")
    SERVER_PIDFILE.unlink(missing_ok=True)
