"""opensandbox-doctor without a server: durations, verdicts from canned answers, output, exit."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

import httpx
import pytest

from opensandbox_core._doctor import (
    FOREIGN_ORIGIN,
    CheckResult,
    DoctorOptions,
    format_text,
    main,
    parse_duration,
    run_doctor,
)

KEY = "secret-key-9f8e7d6c5b4a"


@pytest.fixture(autouse=True)
def _no_server_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A testbed's settings in the environment (e.g. when the live tests ran first in the same
    # process) must not change what these fake-server tests see.
    monkeypatch.delenv("OPEN_SANDBOX_API_KEY", raising=False)
    monkeypatch.delenv("OPEN_SANDBOX_DOMAIN", raising=False)


EMPTY_LIST = {
    "items": [],
    "pagination": {"page": 1, "pageSize": 100, "totalItems": 0, "totalPages": 0,
                   "hasNextPage": False},
}  # fmt: skip


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400), ("1w", 604800), ("1h30m", 5400),
     ("0s", 0), ("1.5h", 5400), (" 2H ", 7200)],
)  # fmt: skip
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "2", "h", "2x", "-1h", "2h and", "1e3s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


class FakeServer:
    """Canned answers of an opensandbox-server; records every request."""

    def __init__(
        self,
        *,
        key: str | None,
        cors: bool = True,
        create: tuple[int, dict[str, object]] = (400, {"code": "VOLUME::HOST_PATH_NOT_ALLOWED"}),
    ) -> None:
        self.key = key
        self.cors = cors
        self.create = create
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if path == "/health":
            return httpx.Response(200, json={"status": "healthy"})
        if request.method == "OPTIONS":
            origin = request.headers.get("origin", "")
            headers = {"access-control-allow-origin": origin} if self.cors else {}
            return httpx.Response(200 if self.cors else 400, headers=headers)
        if "/proxy/" in path:
            return httpx.Response(404, json={"code": "DOCKER::SANDBOX_NOT_FOUND"})
        given = request.headers.get("open-sandbox-api-key")
        if self.key is not None and given != self.key:
            return httpx.Response(401, json={"code": "MISSING_API_KEY"})
        if path == "/v1/sandboxes" and request.method == "GET":
            return httpx.Response(200, json=EMPTY_LIST)
        if path == "/v1/sandboxes" and request.method == "POST":
            status, body = self.create
            return httpx.Response(status, json=body)
        if path.startswith("/v1/sandboxes/") and request.method == "DELETE":
            return httpx.Response(204)
        return httpx.Response(404, json={"code": "NOT_FOUND"})


async def doctor(
    server: Callable[[httpx.Request], httpx.Response], **options: object
) -> dict[str, CheckResult]:
    transport = httpx.MockTransport(server)
    opts = DoctorOptions(domain="127.0.0.1:9", transport=transport, image="img", **options)  # type: ignore[arg-type]
    results = await run_doctor(opts)
    return {r.name: r for r in results}


def statuses(results: dict[str, CheckResult]) -> dict[str, str]:
    return {name: r.status for name, r in results.items()}


async def test_secure_server() -> None:
    server = FakeServer(key=KEY, cors=False)
    results = await doctor(server, api_key=KEY, skip_sandbox=False)
    # execd-framing etc. need a real sandbox: the fake refuses the create, so they fail.
    got = statuses(results)
    assert {k: got[k] for k in list(got)[:8]} == {
        "reachable": "PASS",
        "api-key": "PASS",
        "authentication": "PASS",
        "cors": "PASS",
        "proxy-routes": "PASS",
        "leftovers": "PASS",
        "docker-socket-mount": "PASS",
        "host-path-mount": "PASS",
    }
    mounts = [json.loads(r.content) for r in server.requests if r.method == "POST"]
    paths = [m["volumes"][0]["host"]["path"] for m in mounts[:2]]
    assert paths == ["/var/run", "/etc"]
    assert all(m["volumes"][0]["readOnly"] is True for m in mounts[:2])
    for r in results.values():
        assert KEY not in r.summary + (r.fix or "")


async def test_insecure_server() -> None:
    server = FakeServer(key=None, create=(202, {"id": "probe-1"}))
    results = await doctor(server, skip_sandbox=False)
    got = statuses(results)
    assert got["authentication"] == "FAIL"
    assert got["api-key"] == "SKIP"
    assert got["cors"] == "FAIL"
    assert results["cors"].data["allow_origin"] == FOREIGN_ORIGIN
    assert got["docker-socket-mount"] == "FAIL"
    assert got["host-path-mount"] == "FAIL"
    deleted = [r.url.path for r in server.requests if r.method == "DELETE"]
    assert deleted.count("/v1/sandboxes/probe-1") >= 2  # each accepted probe deleted at once
    assert "allowed_host_paths" in (results["host-path-mount"].fix or "")


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ((400, {"code": "VOLUME::HOST_PATH_NOT_ALLOWED"}), "PASS"),
        ((400, {"code": "VOLUME::INVALID_HOST_PATH"}), "PASS"),
        ((500, {"code": "VOLUME::HOST_PATH_CREATE_FAILED"}), "FAIL"),
        ((500, {"code": "DOCKER::IMAGE_PULL_FAILED"}), "FAIL"),
        ((400, {"code": "SANDBOX::INVALID_PARAMETER"}), "WARN"),
        ((201, {"id": "x"}), "FAIL"),
    ],
)
async def test_mount_verdicts(answer: tuple[int, dict[str, object]], verdict: str) -> None:
    results = await doctor(FakeServer(key=KEY, create=answer), api_key=KEY)
    assert results["host-path-mount"].status == verdict


async def test_cors_with_auth_is_a_warning() -> None:
    results = await doctor(FakeServer(key=KEY), api_key=KEY, skip_sandbox=True)
    assert results["cors"].status == "WARN"
    assert results["docker-socket-mount"].status == "SKIP"


async def test_wrong_key_and_missing_key() -> None:
    results = await doctor(FakeServer(key=KEY), api_key="wrong", skip_sandbox=True)
    assert results["api-key"].status == "FAIL"
    assert results["leftovers"].status == "SKIP"
    results = await doctor(FakeServer(key=KEY), skip_sandbox=False)
    assert results["docker-socket-mount"].status == "SKIP"


async def test_proxy_routes_warn_beyond_loopback() -> None:
    transport = httpx.MockTransport(FakeServer(key=KEY))
    results = await run_doctor(
        DoctorOptions(domain="sandbox.example.com:8080", api_key=KEY, transport=transport,
                      skip_sandbox=True)
    )  # fmt: skip
    proxy = {r.name: r for r in results}["proxy-routes"]
    assert proxy.status == "WARN"
    assert "127.0.0.1" in (proxy.fix or "")


async def test_unreachable_skips_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    results = await doctor(refuse, api_key=KEY)
    assert results["reachable"].status == "FAIL"
    assert {r.status for n, r in results.items() if n != "reachable"} == {"SKIP"}


def test_human_output_one_line_per_check() -> None:
    results = [
        CheckResult("reachable", "PASS", "ok"),
        CheckResult("authentication", "FAIL", "open", "set api_key"),
    ]
    text = format_text("h:1", results)
    lines = text.splitlines()
    assert lines[1].split()[:2] == ["reachable", "PASS"]
    assert lines[2].split()[1] == "FAIL" and lines[2].endswith("-- fix: set api_key")
    assert lines[-1] == "1 pass, 1 fail"


def test_main_exit_status_and_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPEN_SANDBOX_API_KEY", KEY)
    assert main(["--domain", "127.0.0.1:1", "--json", "--timeout", "2"]) == 1
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert doc["ok"] is False and doc["checks"][0]["status"] == "FAIL"
    assert KEY not in out
    with pytest.raises(SystemExit) as exc:
        main(["--remove-idle-for", "soon"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["--match", "novalue"])
