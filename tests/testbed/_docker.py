"""The Docker engine: use the one that answers, or start Debian's dockerd (unix socket only)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from testbed._paths import DOCKERD_CONFIG, DOCKERD_LOG, DOCKERD_PIDFILE, STATE_DIR
from testbed._proc import (
    TestbedError,
    pid_alive,
    proc_cmdline,
    read_pidfile,
    run,
    say,
    spawn_detached,
    step,
    tail,
    terminate,
)

SOCKET = "/var/run/docker.sock"
# Tried in order until dockerd comes up: the defaults first, then without iptables (published
# ports still work through docker-proxy), then the vfs storage driver (no overlayfs).
_FALLBACKS: list[list[str]] = [
    [],
    ["--iptables=false"],
    ["--iptables=false", "--storage-driver=vfs"],
]


def docker_answers(timeout: float = 15) -> bool:
    """Whether `docker info` reaches an engine."""
    if shutil.which("docker") is None:
        return False
    try:
        proc = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (subprocess.TimeoutExpired, OSError):
        return False
    return proc.returncode == 0 and bool(proc.stdout.strip())


def _find_dockerd() -> str | None:
    return shutil.which("dockerd") or next(
        (p for p in ("/usr/sbin/dockerd", "/usr/bin/dockerd") if os.access(p, os.X_OK)), None
    )


def apt_install(*packages: str) -> None:
    """Install Debian packages non-interactively (apt-get update first)."""
    if os.geteuid() != 0:
        raise TestbedError(f"need root to install {', '.join(packages)} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Keep maintainer scripts from starting services (docker.io would start its own dockerd).
    policy = Path("/usr/sbin/policy-rc.d")
    added_policy = not policy.exists()
    if added_policy:
        policy.write_text("#!/bin/sh\n# temporary, from the testbed's apt-get install\nexit 101\n")
        policy.chmod(0o755)
    try:
        with step(f"apt-get install {' '.join(packages)}..."):
            run(["apt-get", "update", "-q"], timeout=600, env=env)
            run(
                ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
                timeout=1200,
                env=env,
            )
    finally:
        if added_policy:
            policy.unlink(missing_ok=True)


def our_dockerd_pid() -> int | None:
    """The pid of the dockerd this testbed started, if it still runs."""
    pid = read_pidfile(DOCKERD_PIDFILE)
    if pid and pid_alive(pid) and any("dockerd" in a for a in proc_cmdline(pid)[:1]):
        return pid
    return None


def ensure_engine() -> dict[str, object]:
    """Make sure a Docker engine answers; return what was done (for the state file)."""
    if docker_answers():
        ours = our_dockerd_pid()
        say("docker engine answers" + (f" (our dockerd, pid {ours})" if ours else ""))
        return {"dockerd_started": bool(ours), "dockerd_pid": ours}
    dockerd = _find_dockerd()
    if dockerd is None:
        apt_install("docker.io")
        dockerd = _find_dockerd()
        if dockerd is None:
            raise TestbedError("docker.io installed but no dockerd found")
    if shutil.which("docker") is None:
        raise TestbedError("dockerd exists but the docker client is missing")
    if os.path.exists(SOCKET):
        # A stale socket from a dead engine; dockerd refuses to start over a live one itself.
        say(f"removing stale {SOCKET}")
        os.unlink(SOCKET)
    bridge_existed = Path("/sys/class/net/docker0").exists()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    # Our own (empty) daemon config: a host's /etc/docker/daemon.json might add TCP hosts.
    DOCKERD_CONFIG.write_text(json.dumps({}) + "\n")
    last_error = ""
    for extra in _FALLBACKS:
        args = [
            dockerd,
            f"--host=unix://{SOCKET}",
            f"--pidfile={DOCKERD_PIDFILE}",
            f"--config-file={DOCKERD_CONFIG}",
            # Published container ports default to loopback.
            "--ip=127.0.0.1",
            *extra,
        ]
        with step(f"starting dockerd {' '.join(extra) or '(defaults)'}..."):
            DOCKERD_LOG.open("a").write(f"\n==== {time.ctime()} {' '.join(args)}\n")
            pid = spawn_detached(args, DOCKERD_LOG)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if docker_answers(timeout=5):
                    say(f"  dockerd up (pid {pid}), logs in {DOCKERD_LOG}")
                    return {
                        "dockerd_started": True,
                        "dockerd_pid": pid,
                        "dockerd_args": args,
                        "docker0_existed": bridge_existed,
                    }
                if not pid_alive(pid):
                    break
                time.sleep(0.5)
        last_error = tail(DOCKERD_LOG, 15)
        terminate(pid, group=True, grace=10, name="dockerd")
        say(f"  dockerd did not come up with {extra or 'defaults'}; log tail:\n{last_error}")
    raise TestbedError(f"could not start dockerd; see {DOCKERD_LOG}:\n{last_error}")


def stop_engine(state: dict[str, object]) -> None:
    """Stop dockerd only when this testbed started it."""
    if not state.get("dockerd_started"):
        return
    pid = our_dockerd_pid()
    if pid is None:
        return
    with step(f"stopping dockerd (pid {pid})..."):
        terminate(pid, group=False, grace=30, name="dockerd")
        # containerd started by dockerd exits with it; the bridge interface stays behind.
        bridge = Path("/sys/class/net/docker0")
        if not state.get("docker0_existed") and bridge.exists() and shutil.which("ip"):
            run(["ip", "link", "delete", "docker0"], check=False, timeout=10)


def docker_json(*args: str) -> list[dict[str, object]]:
    """`docker <args> --format '{{json .}}'`, one object per line."""
    proc = run(["docker", *args, "--format", "{{json .}}"], timeout=60)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def inspect(kind: str, *names: str) -> list[dict[str, object]]:
    """`docker <kind> inspect` of the given objects; missing ones are skipped."""
    if not names:
        return []
    proc = run(["docker", kind, "inspect", *names], check=False, timeout=60)
    try:
        data = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        return []
    return data if isinstance(data, list) else []
