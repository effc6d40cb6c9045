"""What opensandbox-doctor says for each common mistake, and how soon (the CLI, as a user runs it).

Server down, a hung server (progress printed before the timeout), no key, a wrong key, https:// to
the plain-HTTP testbed, an image the server cannot pull.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from opensandbox_core._doctor import DOCTOR_KEY, DoctorOptions, run_doctor

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral

SANDBOX_CHECKS = ("execd-framing", "latency", "throughput", "docker-socket-mount", "leftovers")


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPEN_SANDBOX_")}
    env.update(extra)
    return env


def doctor(*args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "opensandbox_core._doctor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return proc, time.monotonic() - started


def lines_by_check(stdout: str) -> dict[str, str]:
    return {line.split()[0]: line for line in stdout.splitlines()[1:-1]}


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture
def hung_server() -> Iterator[str]:
    """Accepts TCP connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def test_server_down_names_the_address_and_the_fix(free_port: int) -> None:
    proc, took = doctor("--domain", f"127.0.0.1:{free_port}", env=cli_env())
    assert proc.returncode == 1
    line = lines_by_check(proc.stdout)["reachable"]
    assert f"connection refused at http://127.0.0.1:{free_port}" in line
    assert "start the server" in line and "OPEN_SANDBOX_DOMAIN" in line
    assert "image" not in proc.stdout
    assert proc.stderr == ""  # no SDK retry lines doubling the report
    assert took < 30


def test_hung_server_prints_progress_before_the_timeout(hung_server: str) -> None:
    timeout = 6.0
    proc = subprocess.Popen(
        [sys.executable, "-m", "opensandbox_core._doctor", "--domain", hung_server,
         "--timeout", str(timeout)],
        stdout=subprocess.PIPE, env=cli_env(),
    )  # fmt: skip
    assert proc.stdout is not None
    seen: list[tuple[float, bytes]] = []
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if not selector.select(timeout=1):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            seen.append((time.monotonic(), chunk))
    assert proc.wait(timeout=30) == 1
    output = b"".join(c for _, c in seen).decode()
    name_at = next(t for t, _ in _prefixes(seen) if "reachable" in _)
    result_at = next(t for t, _ in _prefixes(seen) if "sent no answer" in _)
    # The check's name is on screen while the request waits, the result once it timed out.
    assert result_at - name_at >= timeout * 0.8, output
    line = lines_by_check(output)["reachable"]
    assert f"http://{hung_server} accepted the connection but sent no answer within 6 s" in line
    assert "restart" in line and " s)" in line  # the slow check shows its time


def _prefixes(seen: list[tuple[float, bytes]]) -> Iterator[tuple[float, str]]:
    text = b""
    for moment, chunk in seen:
        text += chunk
        yield moment, text.decode(errors="replace")


def test_https_to_a_plain_http_server(testbed_env: dict[str, str]) -> None:
    domain = testbed_env["OPEN_SANDBOX_DOMAIN"]
    proc, took = doctor("--domain", f"https://{domain}", "--skip-sandbox", env=cli_env())
    assert proc.returncode == 1
    line = lines_by_check(proc.stdout)["reachable"]
    assert "the server answers plain HTTP on that port" in line
    assert f"drop https:// (set --domain / OPEN_SANDBOX_DOMAIN to {domain})" in line
    assert took < 30


def test_wrong_key(testbed_env: dict[str, str]) -> None:
    env = cli_env(OPEN_SANDBOX_DOMAIN=testbed_env["OPEN_SANDBOX_DOMAIN"])
    proc, _ = doctor("--api-key", "wrong-key-77aa", "--match", "osb-doctor-test=none", env=env)
    assert proc.returncode == 1
    lines = lines_by_check(proc.stdout)
    assert "refuses the API key given (HTTP 401)" in lines["api-key"]
    assert "[server] api_key" in lines["api-key"]
    for name in SANDBOX_CHECKS:
        assert lines[name].split()[1] == "SKIP", lines[name]
    assert "wrong-key-77aa" not in proc.stdout + proc.stderr


@pytest.mark.usefixtures("no_env_key")
async def test_no_key_does_not_blame_the_image(testbed_env: dict[str, str]) -> None:
    results = await run_doctor(
        DoctorOptions(domain=testbed_env["OPEN_SANDBOX_DOMAIN"], image="python:3.13-slim",
                      match={"osb-doctor-test": "none"})
    )  # fmt: skip
    by_name = {r.name: r for r in results}
    assert by_name["api-key"].status == "SKIP"
    assert by_name["authentication"].status == "PASS"
    for name in SANDBOX_CHECKS:
        assert by_name[name].status == "SKIP"
        assert "needs an API key and none was given" in by_name[name].summary
    assert not any("image" in r.summary + (r.fix or "") for r in results)


def test_image_the_server_cannot_pull(testbed_env: dict[str, str]) -> None:
    env = cli_env(OPEN_SANDBOX_DOMAIN=testbed_env["OPEN_SANDBOX_DOMAIN"],
                  OPEN_SANDBOX_API_KEY=testbed_env["OPEN_SANDBOX_API_KEY"])  # fmt: skip
    image = "nonexistent.invalid/osb-doctor:1"
    proc, took = doctor("--image", image, "--match", "osb-doctor-test=none", env=env)
    assert proc.returncode == 1
    lines = lines_by_check(proc.stdout)
    assert f"could not pull the image '{image}'" in lines["execd-framing"]
    assert f"docker pull {image}" in lines["execd-framing"]
    assert lines["latency"].split()[1] == "SKIP"
    assert took < 120


def test_ctrl_c_while_creating_the_test_sandbox_leaves_nothing(
    testbed_env: dict[str, str], sandbox_image: str
) -> None:
    env = cli_env(OPEN_SANDBOX_DOMAIN=testbed_env["OPEN_SANDBOX_DOMAIN"],
                  OPEN_SANDBOX_API_KEY=testbed_env["OPEN_SANDBOX_API_KEY"])  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "opensandbox_core._doctor", "--image", sandbox_image,
         "--match", "osb-doctor-test=none"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a test runner may ignore it
    )  # fmt: skip
    assert proc.stdout is not None
    seen = b""
    while b"execd-framing" not in seen:
        chunk = os.read(proc.stdout.fileno(), 4096)
        assert chunk, seen.decode()
        seen += chunk
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert b"interrupted" in err
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={DOCTOR_KEY}"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()  # fmt: skip
    assert left == []
