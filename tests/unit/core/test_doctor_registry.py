"""The doctor's registry and runner offline: declarations, skips, order independence, progress,
and the message and fix for each transport failure."""

from __future__ import annotations

import io
import ssl
from collections.abc import Callable

import httpx
import pytest
from test_doctor_unit import KEY, FakeServer

from opensandbox_core._doctor import (
    CHECKS,
    Check,
    CheckResult,
    DoctorOptions,
    Listener,
    Outcome,
    main,
    run_checks,
    versions,
)
from opensandbox_core._doctor._context import DoctorContext
from opensandbox_core._doctor._diagnose import describe_transport_error
from opensandbox_core._doctor._report import ProgressPrinter

Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture(autouse=True)
def _no_server_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPEN_SANDBOX_API_KEY", raising=False)
    monkeypatch.delenv("OPEN_SANDBOX_DOMAIN", raising=False)


def options(handler: Handler, **extra: object) -> DoctorOptions:
    return DoctorOptions(
        domain="127.0.0.1:9", transport=httpx.MockTransport(handler), image="img", **extra
    )  # type: ignore[arg-type]


class Recorder(Listener):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def started(self, name: str) -> None:
        self.events.append(("start", name))

    def finished(self, result: CheckResult) -> None:
        self.events.append(("end", result.name))


def test_registry_declares_each_check_once() -> None:
    names = [c.name for c in CHECKS]
    assert names == [
        "reachable", "api-key", "authentication", "cors", "proxy-routes", "leftovers",
        "docker-socket-mount", "host-path-mount", "execd-framing", "latency", "throughput",
    ]  # fmt: skip
    assert {c.name for c in CHECKS if c.needs_sandbox} == {
        "docker-socket-mount", "host-path-mount", "execd-framing", "latency", "throughput",
    }  # fmt: skip
    assert {c.name for c in CHECKS if c.needs_key} == {
        "leftovers", "docker-socket-mount", "host-path-mount", "execd-framing", "latency",
        "throughput",
    }  # fmt: skip
    assert [c.name for c in CHECKS if not c.needs_server] == ["reachable"]


async def test_results_do_not_depend_on_order() -> None:
    """Each check asks the context for what it needs: reversed, the verdicts are the same."""
    server_checks = [c for c in CHECKS if not c.needs_sandbox]
    forward = await run_checks(options(FakeServer(key=KEY), api_key=KEY), server_checks)
    backward = await run_checks(options(FakeServer(key=KEY), api_key=KEY), server_checks[::-1])
    verdicts = {r.name: (r.status, r.fix) for r in forward}
    assert verdicts == {r.name: (r.status, r.fix) for r in backward}
    assert verdicts["cors"][0] == "WARN"  # knows the key is enforced without the other check
    assert [r.name for r in backward] == [c.name for c in server_checks[::-1]]


async def test_each_probe_is_made_once() -> None:
    server = FakeServer(key=KEY)
    await run_checks(options(server, api_key=KEY, skip_sandbox=True))
    gets = [(r.url.path, r.headers.get("open-sandbox-api-key")) for r in server.requests
            if r.method == "GET" and r.url.path in ("/health", "/v1/sandboxes")]  # fmt: skip
    assert gets.count(("/health", None)) == 1
    assert gets.count(("/v1/sandboxes", None)) == 1  # authentication and cors share it


async def test_runner_skips_by_declaration_without_calling_the_check() -> None:
    called: list[str] = []

    async def probe(ctx: DoctorContext) -> Outcome:
        called.append("x")
        return Outcome("PASS", "ran")

    checks = [
        Check("sandboxy", probe, needs_sandbox=True),
        Check("keyed", probe, needs_key=True),
        Check("plain", probe),
    ]
    results = await run_checks(options(FakeServer(key=KEY), skip_sandbox=True), checks)
    by_name = {r.name: r for r in results}
    assert by_name["sandboxy"].status == "SKIP" and "--skip-sandbox" in by_name["sandboxy"].summary
    assert by_name["keyed"].status == "SKIP"
    assert "none was given" in by_name["keyed"].summary
    assert "OPEN_SANDBOX_API_KEY" in by_name["keyed"].summary
    assert by_name["plain"].status == "PASS"
    assert called == ["x"]


async def test_no_key_never_blames_the_image() -> None:
    results = await run_checks(options(FakeServer(key=KEY)))
    by_name = {r.name: r for r in results}
    for name in ("execd-framing", "latency", "throughput", "docker-socket-mount", "leftovers"):
        assert by_name[name].status == "SKIP", name
        assert "API key" in by_name[name].summary
    assert not any("image" in r.summary + (r.fix or "") for r in results)


async def test_wrong_key_names_the_fix() -> None:
    results = {r.name: r for r in await run_checks(options(FakeServer(key=KEY), api_key="nope"))}
    assert results["api-key"].status == "FAIL"
    assert "api_key" in (results["api-key"].fix or "")
    assert "refused" in results["execd-framing"].summary
    assert "nope" not in str([r.summary for r in results.values()])


async def test_progress_is_reported_before_each_result() -> None:
    recorder = Recorder()
    await run_checks(options(FakeServer(key=KEY), api_key=KEY, skip_sandbox=True),
                     listener=recorder)  # fmt: skip
    expected = []
    for check in CHECKS:
        expected += [("start", check.name), ("end", check.name)]
    assert recorder.events == expected


def test_printer_writes_the_name_first_and_slow_times() -> None:
    out = io.StringIO()
    printer = ProgressPrinter(out, "http://h:1")
    printer.started("reachable")
    assert out.getvalue().splitlines()[-1].strip() == "reachable"
    printer.finished(CheckResult("reachable", "FAIL", "no answer", "restart it", seconds=5.04))
    last = out.getvalue().splitlines()[-1]
    assert last.split()[:2] == ["reachable", "FAIL"]
    assert "(5.0 s)" in last and last.endswith("-- fix: restart it")
    printer.started("cors")
    printer.finished(CheckResult("cors", "PASS", "fine", seconds=0.2))
    assert "s)" not in out.getvalue().splitlines()[-1]


def _raise(exc: Exception) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return handler


def _tls_error() -> httpx.ConnectError:
    error = httpx.ConnectError("[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)")
    error.__cause__ = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    return error


@pytest.mark.parametrize(
    ("domain", "error", "summary", "fix"),
    [
        ("127.0.0.1:9", httpx.ConnectError("[Errno 111] Connection refused"),
         "connection refused at http://127.0.0.1:9", "OPEN_SANDBOX_DOMAIN"),
        ("nohost.invalid:9", httpx.ConnectError("[Errno -2] Name or service not known"),
         "'nohost.invalid' of http://nohost.invalid:9 could not be resolved", "start the server"),
        ("127.0.0.1:9", httpx.ReadTimeout("timed out"),
         "http://127.0.0.1:9 accepted the connection but sent no answer within 30 s", "hung"),
        ("127.0.0.1:9", httpx.ConnectTimeout("timed out"),
         "could not connect to http://127.0.0.1:9 within 30 s", "firewall"),
        ("https://127.0.0.1:9", _tls_error(),
         "https://127.0.0.1:9 failed: the server answers plain HTTP", "drop https://"),
        ("127.0.0.1:9", httpx.RemoteProtocolError("Server disconnected"),
         "closed the connection without an HTTP answer", "https://127.0.0.1:9"),
    ],
)  # fmt: skip
async def test_transport_failures_name_the_address_and_the_fix(
    domain: str, error: Exception, summary: str, fix: str
) -> None:
    opts = DoctorOptions(domain=domain, transport=httpx.MockTransport(_raise(error)))
    results = await run_checks(opts)
    reachable = results[0]
    assert reachable.status == "FAIL"
    assert summary in reachable.summary
    assert fix in (reachable.fix or "")
    assert {r.status for r in results[1:]} == {"SKIP"}


def test_describe_tls_certificate_problem() -> None:
    error = httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    summary, fix = describe_transport_error(error, "https://h:1", 5)
    assert "certificate of https://h:1 is not trusted" in summary
    assert "CA" in fix


async def test_another_web_server_is_named_not_pasted() -> None:
    page = "<html><body>" + "welcome " * 500 + "</body></html>"

    def nginx(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=page, headers={"content-type": "text/html"})

    results = await run_checks(options(nginx))
    assert results[0].status == "FAIL"
    assert "another web server" in results[0].summary
    assert "welcome" not in results[0].summary
    assert len(results[0].summary) < 200


def test_version_lists_packages_sdk_and_python(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # The core, the adapters' distributions (found by their entry points), the SDK, Python.
    assert [line.split()[0] for line in lines] == [
        "opensandbox-core", "deepagents-opensandbox-backend", "pydantic-ai-opensandbox",
        "opensandbox", "python",
    ], "reinstall the packages (pip install -e) so that their entry points are read"  # fmt: skip
    assert dict(versions())["opensandbox-core"][0].isdigit()


def test_help_documents_the_idle_rule(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--remove-idle-for" in text and "--remove-older-than" not in text
    assert "expiring one (expiresAt in the future) is always kept" in text
    assert "never by age alone" in text
