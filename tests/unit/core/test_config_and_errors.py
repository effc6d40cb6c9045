"""Connection and spec validation, the error tree, and the translation of foreign exceptions."""

from __future__ import annotations

import math
import warnings

import httpx
import pytest
from opensandbox.exceptions import SandboxApiException, SandboxConnectionException

import opensandbox_core
from opensandbox_core import (
    CommandTimeoutError,
    ConfigurationError,
    Connection,
    InsecureSandboxWarning,
    SandboxSpec,
    SandboxUnavailableError,
    ServerError,
)
from opensandbox_core._errors import is_lost_response as _is_lost_response
from opensandbox_core._errors import path_error
from opensandbox_core._files._filesystem import octal_digits as _octal_digits
from opensandbox_core._validate import command_text as _command_text

SECRET = "sk-test-very-secret-key-123456"


def test_all_lists_public_names() -> None:
    for name in opensandbox_core.__all__:
        assert hasattr(opensandbox_core, name), name
    assert "AsyncSandboxSession" in opensandbox_core.__all__


def test_connection_reads_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPEN_SANDBOX_DOMAIN", "sandbox.example:9000")
    monkeypatch.setenv("OPEN_SANDBOX_API_KEY", SECRET)
    conn = Connection()
    assert conn.resolved_domain() == "sandbox.example:9000"
    assert conn.resolved_api_key() == SECRET
    assert conn.resolved_protocol() == "http"
    assert SECRET not in repr(conn)


def test_default_domain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPEN_SANDBOX_DOMAIN", raising=False)
    assert Connection().resolved_domain() == "localhost:8080"


def test_https_domain_makes_every_request_https(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = Connection(domain="https://sandbox.example", api_key=SECRET)
    assert conn.resolved_protocol() == "https"
    config = conn.build_sdk_config()
    assert config.protocol == "https"
    assert config.get_base_url().startswith("https://")


def test_explicit_sdk_config_is_used_as_given() -> None:
    from opensandbox.config import ConnectionConfig

    given = ConnectionConfig(domain="https://x.example", protocol="http", api_key=SECRET)
    conn = Connection.from_sdk_config(given)
    assert conn.build_sdk_config() is given
    assert conn.resolved_protocol() == "http"


def test_insecure_warning_once_per_call_site_and_only_without_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPEN_SANDBOX_API_KEY", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            Connection().check_security()
    insecure = [w for w in caught if issubclass(w.category, InsecureSandboxWarning)]
    assert len(insecure) == 1
    assert "OPEN_SANDBOX_API_KEY" in str(insecure[0].message)
    assert insecure[0].filename == __file__  # points at the caller, not at library code
    with pytest.warns(InsecureSandboxWarning):
        Connection().check_security()
    monkeypatch.setenv("OPEN_SANDBOX_API_KEY", SECRET)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InsecureSandboxWarning)
        Connection().check_security()


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "30", True])
def test_connection_rejects_bad_timeouts(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        Connection(request_timeout=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"image": ""},
        {"image": "img", "entrypoint": "tail -f /dev/null"},
        {"image": "img", "entrypoint": []},
        {"image": "img", "container_env": {"A=B": "x"}},
        {"image": "img", "container_env": {"A": 1}},
        {"image": "img", "container_env": {"A": "x\0y"}},
        {"image": "img", "lifetime": 0},
        {"image": "img", "lifetime": math.nan},
    ],
)
def test_spec_rejects_bad_input(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        SandboxSpec(**kwargs)  # type: ignore[arg-type]


def test_spec_env_kept_out_of_repr() -> None:
    spec = SandboxSpec(image="img", container_env={"TOKEN": SECRET})
    assert SECRET not in repr(spec)


def test_error_tree_matches_builtins() -> None:
    assert issubclass(ConfigurationError, ValueError)
    assert issubclass(CommandTimeoutError, TimeoutError)
    assert issubclass(opensandbox_core.UnsupportedDaemonError, SandboxUnavailableError)
    for cls in (ConfigurationError, CommandTimeoutError, SandboxUnavailableError, ServerError):
        assert issubclass(cls, opensandbox_core.OpenSandboxError)


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("open /x/y: no such file or directory", FileNotFoundError),
        ("mkdir /x/f/c: not a directory", NotADirectoryError),
        ("read /x: is a directory", IsADirectoryError),
        ("open /root/x: permission denied", PermissionError),
        ("mkdir /x: file exists", FileExistsError),
    ],
)
def test_go_error_texts_map_to_builtins(text: str, cls: type[OSError]) -> None:
    err = path_error(text, "/x")
    assert type(err) is cls
    assert err is not None
    assert err.filename == "/x"
    assert path_error("something else entirely", "/x") is None


def test_lost_create_detection() -> None:
    assert _is_lost_response(httpx.ReadTimeout("slow"))
    assert _is_lost_response(SandboxApiException("bad gateway", status_code=502))
    assert not _is_lost_response(SandboxApiException("bad request", status_code=400))
    refused = SandboxConnectionException("down")
    refused.__cause__ = httpx.ConnectError("refused")
    assert not _is_lost_response(refused)


def test_octal_digits_quirk() -> None:
    assert _octal_digits(0o644) == 644
    assert _octal_digits(0o755) == 755
    assert _octal_digits(0o7) == 7


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["echo", "a b"], "echo 'a b'"),
        (["printf", "%s", "$(touch /tmp/x)"], "printf %s '$(touch /tmp/x)'"),
    ],
)
def test_argv_is_quoted_literally(argv: list[str], expected: str) -> None:
    assert _command_text(argv) == expected


@pytest.mark.parametrize("bad", ["", "   ", "a\0b", [], ["a", 1], [b"x"], b"ls", None, ["x\0"]])
def test_bad_commands_are_configuration_errors(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        _command_text(bad)  # type: ignore[arg-type]


def test_a_trailing_slash_in_the_domain_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Connection(domain="127.0.0.1:8080/").resolved_domain() == "127.0.0.1:8080"
    assert Connection(domain="https://sandbox.example.com//").resolved_domain() == (
        "https://sandbox.example.com"
    )
    monkeypatch.setenv("OPEN_SANDBOX_DOMAIN", "localhost:9000/")
    assert Connection().resolved_domain() == "localhost:9000"


def test_an_html_page_is_named_not_pasted() -> None:
    from opensandbox_core._failures import body_message

    page = "<!DOCTYPE html><html><body>" + "x" * 5000 + "</body></html>"
    message = body_message(httpx.Response(404, text=page))
    assert "HTML page" in message and "domain" in message
    assert "<html" not in message and len(message) < 200
