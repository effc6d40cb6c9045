"""opensandbox-doctor against the testbed's server (secure) and a second, insecure one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from opensandbox_core._doctor import DOCTOR_KEY, CheckResult, DoctorOptions, run_doctor
from testbed._extra import ExtraServer, extra_server

SECURE = {
    "reachable": "PASS",
    "api-key": "PASS",
    "authentication": "PASS",
    "cors": "WARN",  # 1.1.1 hard-codes allow-all CORS; the key is what stops a web page
    "proxy-routes": "PASS",  # not checked by the server, but loopback only
    "leftovers": "PASS",
    "docker-socket-mount": "PASS",
    "host-path-mount": "PASS",
    "execd-framing": "PASS",
    "latency": "PASS",
    "throughput": "PASS",
}

INSECURE = {
    **SECURE,
    "api-key": "SKIP",
    "authentication": "FAIL",
    "cors": "FAIL",
    "docker-socket-mount": "FAIL",
    "host-path-mount": "FAIL",
}


def outcomes(results: list[CheckResult]) -> dict[str, str]:
    return {r.name: r.status for r in results}


def no_doctor_sandboxes(server_env: dict[str, str]) -> list[str]:
    """Ids of sandboxes still tagged by any doctor run on this server (there must be none)."""
    out = subprocess.run(
        ["docker", "ps", "-aq", "--no-trunc", "--filter", f"label={DOCTOR_KEY}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    return out


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "opensandbox_core._doctor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPEN_SANDBOX_")}
    env.update(extra)
    return env


@pytest.fixture
def match() -> dict[str, str]:
    """A metadata tag that no other test uses: leftovers then depend on this test alone."""
    return {"osb-doctor-test": uuid.uuid4().hex}


async def test_secure_testbed_passes(testbed_env: dict[str, str], sandbox_image: str, match):
    results = await run_doctor(
        DoctorOptions(
            domain=testbed_env["OPEN_SANDBOX_DOMAIN"],
            api_key=testbed_env["OPEN_SANDBOX_API_KEY"],
            image=sandbox_image,
            match=match,
        )
    )
    assert outcomes(results) == SECURE, [(r.name, r.status, r.summary) for r in results]
    by_name = {r.name: r for r in results}
    assert "VOLUME::HOST_PATH_NOT_ALLOWED" in by_name["docker-socket-mount"].summary
    # modern on the 1.1 profile, legacy (line-framed, exact through raw files) on 1.0.18/1.0.19
    assert by_name["execd-framing"].data["framing"] in ("modern", "legacy")
    assert by_name["proxy-routes"].data["loopback"] is True
    for r in results:
        assert testbed_env["OPEN_SANDBOX_API_KEY"] not in r.summary + (r.fix or "")
    assert no_doctor_sandboxes(testbed_env) == []


def test_cli_secure_json_and_exit_status(testbed_env: dict[str, str], sandbox_image: str):
    key = testbed_env["OPEN_SANDBOX_API_KEY"]
    env = cli_env(OPEN_SANDBOX_DOMAIN=testbed_env["OPEN_SANDBOX_DOMAIN"], OPEN_SANDBOX_API_KEY=key)
    proc = run_cli("--json", "--skip-sandbox", "--match", "osb-doctor-test=none", env=env)
    assert proc.returncode == 0, proc.stderr
    assert key not in proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ok"] is True
    got = {c["name"]: c["status"] for c in doc["checks"]}
    assert got == {
        **SECURE,
        "docker-socket-mount": "SKIP",
        "host-path-mount": "SKIP",
        "execd-framing": "SKIP",
        "latency": "SKIP",
        "throughput": "SKIP",
    }
    # A wrong key: the api-key check fails, the exit status says so, the key is not printed.
    proc = run_cli("--skip-sandbox", "--api-key", "wrong-key-5b1c0e", env=env)
    assert proc.returncode == 1
    assert "wrong-key-5b1c0e" not in proc.stdout + proc.stderr
    lines = {line.split()[0]: line.split()[1] for line in proc.stdout.splitlines()[1:-1]}
    assert lines["api-key"] == "FAIL"
    assert "[server] api_key" in proc.stdout


@pytest.mark.daemon_neutral  # the server's configuration only
@pytest.mark.usefixtures("no_env_key")
async def test_insecure_server_fails_check_by_check(
    insecure_server: ExtraServer, sandbox_image: str, match
):
    results = await run_doctor(
        DoctorOptions(domain=insecure_server.domain, api_key=None, image=sandbox_image, match=match)
    )
    assert outcomes(results) == INSECURE, [(r.name, r.status, r.summary) for r in results]
    by_name = {r.name: r for r in results}
    assert "deleted at once" in by_name["docker-socket-mount"].summary
    assert "api_key" in (by_name["authentication"].fix or "")
    assert "allowed_host_paths" in (by_name["host-path-mount"].fix or "")
    assert no_doctor_sandboxes({}) == []


@pytest.mark.daemon_neutral  # the server's configuration only
def test_cli_insecure_exit_status(insecure_server: ExtraServer, sandbox_image: str):
    proc = run_cli(
        "--domain", insecure_server.domain, "--image", sandbox_image,
        "--match", "osb-doctor-test=none", "--skip-sandbox",
        env=cli_env(OPENSANDBOX_DISABLE_METRICS="1"),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = {line.split()[0]: line.split()[1] for line in proc.stdout.splitlines()[1:-1]}
    assert lines["authentication"] == "FAIL"
    assert lines["cors"] == "FAIL"
    assert "fix: " in proc.stdout


@pytest.mark.long
@pytest.mark.daemon_neutral  # the server's configuration only
@pytest.mark.usefixtures("no_env_key")
def test_allow_list_edge_cases(testbed_env: dict[str, str], sandbox_image: str):
    """Server 1.1.1: `allowed_host_paths = []` refuses every host path (not "allow all", as
    older docs say), and a "/" prefix allows no path but "/" itself."""
    import asyncio

    for allowed in ([], ["/"]):
        with extra_server(api_key=None, allowed_host_paths=allowed) as server:
            results = asyncio.run(
                run_doctor(
                    DoctorOptions(domain=server.domain, image=sandbox_image,
                                  match={"osb-doctor-test": "none"})
                )
            )  # fmt: skip
        got = outcomes(results)
        assert (got["docker-socket-mount"], got["host-path-mount"]) == ("PASS", "PASS"), allowed
        assert got["authentication"] == "FAIL"
    assert no_doctor_sandboxes({}) == []
