"""`start`, `stop` and `status`: the testbed's lifecycle, with its state in `.testbed/state.json`."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import time
from typing import Any

from testbed import _busybox, _docker, _execd_python, _images, _jupyter, _server
from testbed._paths import ENV_FILE, SERVER_CONFIG, STATE_DIR, STATE_FILE, cache_lock
from testbed._proc import TestbedError, run, say

SANDBOX_ID_LABEL = "opensandbox.io/id"
EGRESS_SIDECAR_LABEL = "opensandbox.io/egress-sidecar-for"
EXECD_CACHE_PREFIX = "sandbox-execd-"  # the server's throwaway containers of the execd image


def load_state() -> dict[str, Any]:
    try:
        data = json.loads(STATE_FILE.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def save_state(state: dict[str, Any]) -> None:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    STATE_FILE.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")


def _write_env(values: dict[str, str]) -> None:
    lines = ["# Written by `python -m testbed start`: the testbed's connection settings."]
    lines += [f"export {key}={shlex.quote(value)}" for key, value in values.items()]
    ENV_FILE.unlink(missing_ok=True)
    fd = os.open(ENV_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def is_running(state: dict[str, Any] | None = None) -> bool:
    state = load_state() if state is None else state
    port = state.get("port")
    return bool(_server.server_pid() and isinstance(port, int) and _server.healthy(port))


def start(profile: str | None = None) -> int:
    """Start the testbed whose sandboxes run the execd `profile` (None: env, else the default).

    A running testbed of another profile gets its server restarted with the new one (Docker and
    the images stay as they are). A `prepare` under way is waited for."""
    with cache_lock():
        return _start(profile)


def prepare() -> int:
    """Start Docker and make every image and cache the testbed and the replay need, without
    starting a server: `.ci/run` runs it in the background while lint and the unit tests run.
    Docker starts first, at the caller's priority (the sandboxes run under it later); the rest
    runs at the lowest CPU priority, so that the work beside it keeps the cores. Each cache is
    made under the cache lock, the ones needed first first (the unit tests' busybox, the
    replay's Jupyter venv), so a session that asks for one waits at most for the step under
    way. `stop` stops the Docker daemon it started."""
    t0 = time.monotonic()
    with cache_lock():
        state = load_state()
        _engine_into(state)
        save_state(state)
    os.nice(19)  # this process and what it starts from now on (debootstrap, pip), not dockerd
    _busybox.busybox_binary()  # each takes the cache lock itself
    _jupyter.host_venv()
    for ensure in (
        _images.ensure_sandbox_image,
        _images.ensure_execd_image,
        _execd_python.ensure_execd_python,
        _busybox.ensure_busybox_image,
        _jupyter.ensure_code_image,
    ):
        with cache_lock():
            ensure()
    say(f"testbed prepared after {time.monotonic() - t0:.1f}s (no server started)")
    return 0


def _engine_into(state: dict[str, Any]) -> None:
    """Make sure Docker answers (starting our dockerd if none does) and record in `state` who
    started it: a dockerd an earlier `start` or `prepare` started stays ours, for `stop`."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    STATE_DIR.chmod(0o700)
    engine = _docker.ensure_engine()
    if not engine["dockerd_started"] and state.get("dockerd_started") and _docker.our_dockerd_pid():
        return  # still the dockerd the state names
    state.update(engine)


def _start(profile: str | None) -> int:
    t0 = time.monotonic()
    state = load_state()
    wanted = _server.requested_profile(profile)
    if is_running(state) and ENV_FILE.is_file():
        current = state.get("profile", _server.PROFILES[0])
        other_image = _execd_image_change(state)
        if current == wanted and other_image is None:
            say(
                f"already running on 127.0.0.1:{state['port']}, execd profile {current} "
                f"(settings in {ENV_FILE})"
            )
            _warn_if_stale(state)
            return 0
        if other_image is not None:
            say(f"{other_image}: restarting the server")
        else:
            say(f"running with execd profile {current}: restarting the server for {wanted}")
        _server.stop_server()
    if _server.server_pid():
        say("a server of a previous start runs but is not healthy: stopping it")
        _server.stop_server()

    _engine_into(state)
    # Sandboxes of an earlier run that was never stopped keep this marker, so reuse it.
    state.setdefault("instance", secrets.token_hex(8))
    save_state(state)

    sandbox_image = _images.ensure_sandbox_image()
    execd_image = _images.ensure_execd_image()
    execd_python = _execd_python.ensure_execd_python()
    busybox_image = _busybox.ensure_busybox_image()
    code_image = _jupyter.ensure_code_image()

    port = _server.pick_port()
    api_key = secrets.token_urlsafe(32)
    _server.write_config(
        port=port,
        api_key=api_key,
        execd_image=execd_image,
        instance=state["instance"],
        profile=wanted,
        sandbox_binds=_execd_python.binds(execd_python),
    )
    say(f"starting opensandbox-server on 127.0.0.1:{port} (config {SERVER_CONFIG})")
    pid = _server.start_server(port=port, api_key=api_key)
    state.update(
        port=port,
        server_pid=pid,
        sandbox_image=sandbox_image,
        execd_image=execd_image,
        execd_asked=os.environ.get("OSB_EXECD_IMAGE", "").strip(),
        profile=wanted,
    )
    save_state(state)
    _write_env(
        {
            "OPEN_SANDBOX_DOMAIN": f"127.0.0.1:{port}",
            "OPEN_SANDBOX_API_KEY": api_key,
            "OPEN_SANDBOX_PROTOCOL": "http",
            "OPENSANDBOX_DISABLE_METRICS": "1",
            "OSB_TESTBED_IMAGE": sandbox_image,
            "OSB_TESTBED_EXECD_IMAGE": execd_image,
            _execd_python.ENV: str(execd_python),
            "OSB_TESTBED_BUSYBOX_IMAGE": busybox_image,
            "OSB_TESTBED_CODE_IMAGE": code_image,
            "OSB_TESTBED_INSTANCE": state["instance"],
            "OSB_TESTBED_SERVER_PID": str(pid),
            _server.PROFILE_ENV: wanted,
        }
    )
    say(f"execd profile: {wanted} (every sandbox gets {_server.PROFILE_ENV}={wanted})")
    say(f"testbed running after {time.monotonic() - t0:.1f}s; settings in {ENV_FILE}")
    return 0


def _execd_image_change(state: dict[str, Any]) -> str | None:
    """How OSB_EXECD_IMAGE now differs from the one the running server was started with (it
    chose the sandboxes' execd image), or None."""
    before = str(state.get("execd_asked") or "")
    asked = os.environ.get("OSB_EXECD_IMAGE", "").strip()
    if asked == before:
        return None
    return (
        f"the server was started with OSB_EXECD_IMAGE={before or '(unset)'}, "
        f"now it is {asked or '(unset)'}"
    )


def _warn_if_stale(state: dict[str, Any]) -> None:
    """Say so when the execd sources changed since the running server's image was built."""
    if state.get("execd_image") != _images.EXECD_TAG:
        return
    with contextlib.suppress(TestbedError, OSError):
        labels = _images.image_labels(_images.EXECD_TAG) or {}
        if labels.get(_images.HASH_LABEL) != _images.execd_hash():
            say("NOTE: the execd sources changed since this server started: `restart` to rebuild")


def restart(profile: str | None = None) -> int:
    stop()
    return start(profile)


def our_sandbox_containers(instance: str) -> list[dict[str, Any]]:
    """Containers that carry a sandbox id label and this testbed's instance marker."""
    ids = run(
        ["docker", "ps", "-aq", "--no-trunc", "--filter", f"label={SANDBOX_ID_LABEL}"], timeout=60
    ).stdout.split()
    marker = f"{_server.INSTANCE_ENV}={instance}"
    found = []
    for item in _docker.inspect("container", *ids):
        config = item.get("Config") or {}
        if marker in (config.get("Env") or []):
            found.append(item)
    return found


def _remove_containers(ids: list[str], what: str) -> None:
    if ids:
        say(f"removing {len(ids)} {what}")
        run(["docker", "rm", "-f", "-v", *ids], check=False, timeout=300)


def cleanup_containers(state: dict[str, Any]) -> None:
    instance = state.get("instance")
    if instance:
        sandboxes = our_sandbox_containers(str(instance))
        _remove_containers([str(c["Id"]) for c in sandboxes], "sandbox container(s)")
        sidecars: list[str] = []
        for c in sandboxes:
            sid = ((c.get("Config") or {}).get("Labels") or {}).get(SANDBOX_ID_LABEL)
            if sid:
                sidecars += run(
                    ["docker", "ps", "-aq", "--filter", f"label={EGRESS_SIDECAR_LABEL}={sid}"],
                    check=False,
                    timeout=60,
                ).stdout.split()
        _remove_containers(sidecars, "egress sidecar(s)")
    execd_image = state.get("execd_image")
    image = _images.image_id(str(execd_image)) if execd_image else None
    if image:
        leftovers = []
        for status in ("created", "exited"):
            for row in _docker.docker_json(
                "ps", "-a", "--no-trunc", "--filter", f"status={status}",
                "--filter", f"name={EXECD_CACHE_PREFIX}",
            ):  # fmt: skip
                if str(row.get("Names", "")).startswith(EXECD_CACHE_PREFIX):
                    leftovers.append(str(row["ID"]))
        details = _docker.inspect("container", *leftovers)
        _remove_containers(
            [str(c["Id"]) for c in details if c.get("Image") == image],
            "leftover execd container(s)",
        )


def stop() -> int:
    state = load_state()
    _server.stop_server()
    if _docker.docker_answers(timeout=10):
        cleanup_containers(state)
        _docker.stop_engine(state)
    ENV_FILE.unlink(missing_ok=True)
    keep = {"instance": state["instance"]} if state.get("instance") else {}
    if _docker.docker_answers(timeout=5) and state.get("instance"):
        with contextlib.suppress(TestbedError):
            if not our_sandbox_containers(str(state["instance"])):
                keep = {}
    else:
        keep = {}
    save_state(keep)
    say("testbed stopped")
    return 0


def status(quiet: bool) -> int:
    state = load_state()
    running = is_running(state)
    if quiet:
        print("running" if running else "stopped")
        return 0 if running else 3
    engine = _docker.docker_answers(timeout=10)
    ours = _docker.our_dockerd_pid()
    print(
        "docker engine: "
        + ("answers" if engine else "not answering")
        + (f" (dockerd pid {ours}, started by the testbed)" if ours else "")
    )
    pid = _server.server_pid()
    if pid:
        health = "healthy" if running else "NOT healthy"
        print(f"opensandbox-server: pid {pid} on 127.0.0.1:{state.get('port')} ({health})")
    else:
        print("opensandbox-server: not running")
    if engine and state.get("instance"):
        boxes = our_sandbox_containers(str(state["instance"]))
        live = sum(1 for c in boxes if (c.get("State") or {}).get("Running"))
        print(f"sandbox containers: {len(boxes)} ({live} running)")
    if running:
        print(f"execd profile: {state.get('profile', _server.PROFILES[0])}")
    for key in ("sandbox_image", "execd_image"):
        if state.get(key):
            print(f"{key.replace('_', ' ')}: {state[key]}")
    if running:
        print(f"settings: {ENV_FILE}")
        _warn_if_stale(state)
    print("running" if running else "stopped")
    return 0 if running else 3
