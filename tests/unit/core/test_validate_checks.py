"""`_validate`: the argument checks shared by the core and the adapters, and `_defaults`."""

from __future__ import annotations

import math
from collections import Counter
from datetime import timedelta
from typing import Any, Literal

import pytest

from opensandbox_core import AsyncSandboxSession, ConfigurationError, SandboxSpec
from opensandbox_core import _defaults as defaults
from opensandbox_core import _validate as check
from opensandbox_core._validate import ArgumentTypeError
from opensandbox_core.testing import FakeOpenSandbox


@pytest.mark.parametrize(
    ("call", "kind", "fragment"),
    [
        (lambda: check.timeout("5"), ArgumentTypeError, "number of seconds or None"),
        (lambda: check.timeout(True), ArgumentTypeError, "number of seconds"),
        (lambda: check.timeout(0), ConfigurationError, "positive, finite"),
        (lambda: check.timeout(math.inf), ConfigurationError, "positive, finite"),
        (lambda: check.timeout(8 * 24 * 3600), ConfigurationError, "maximum of one week"),
        (lambda: check.timeout(None, allow_none=False), ArgumentTypeError, "number of seconds"),
        (lambda: check.seconds(0.5, "lifetime", minimum=1), ConfigurationError, ">= 1"),
        (lambda: check.seconds("1", "lifetime", minimum=1), ArgumentTypeError, "got str"),
        (lambda: check.duration(-1, "timeout"), ConfigurationError, "non-negative"),
        (lambda: check.duration("1m", "timeout"), ArgumentTypeError, "timedelta"),
        (lambda: check.idle_lifetime(0.5), ConfigurationError, "at least one second"),
        (lambda: check.command_text("  "), ConfigurationError, "must not be empty"),
        (lambda: check.command_text("a\0b"), ConfigurationError, "NUL"),
        (lambda: check.command_text(b"ls"), ArgumentTypeError, "argv"),
        (lambda: check.command_text([]), ConfigurationError, "argv must not be empty"),
        (lambda: check.command_text(["a", 1]), ArgumentTypeError, "got int"),
        (lambda: check.command_text(["x" * 1_000_001]), ConfigurationError, "script file"),
        (lambda: check.command_form("ls", False), ArgumentTypeError, "requires shell=True"),
        (lambda: check.command_form(["ls"], True), ArgumentTypeError, "cannot be combined"),
        (lambda: check.command_form(b"ls", False), ArgumentTypeError, "bytes command"),
        (lambda: check.env({"A": 1}), ArgumentTypeError, "string pair"),
        (lambda: check.env(["A"]), ArgumentTypeError, "mapping"),
        (lambda: check.env({"A=B": "x"}), ConfigurationError, "invalid name"),
        (lambda: check.env({"A": "x\0"}), ConfigurationError, "NUL"),
        (lambda: check.working_dir("rel"), ConfigurationError, "absolute path"),
        (lambda: check.path(3), ArgumentTypeError, "must be a string"),
        (lambda: check.path(""), ConfigurationError, "must not be empty"),
        (lambda: check.path("a\ud800"), ConfigurationError, "lone surrogate"),
        (lambda: check.mode(0o10000), ConfigurationError, "0o644"),
        (lambda: check.port(0), ConfigurationError, "between 1 and 65535"),
        (lambda: check.max_output(1023), ConfigurationError, "at least 1024"),
        (lambda: check.output_cap(-1), ConfigurationError, "non-negative"),
        (lambda: check.non_negative_int(True, "offset"), ConfigurationError, "offset"),
        (lambda: check.positive_int(0, "max_bytes"), ConfigurationError, "max_bytes"),
        (lambda: check.int_between(65, "size", 1, 64), ConfigurationError, "between 1 and 64"),
        (lambda: check.image(" "), ConfigurationError, "image reference"),
        (lambda: check.entrypoint("tail -f"), ArgumentTypeError, "list of strings"),
        (lambda: check.entrypoint([]), ConfigurationError, "must not be empty"),
        (lambda: check.sandbox_id(""), ConfigurationError, "sandbox_id"),
        (lambda: check.byte_data("text"), ArgumentTypeError, "must be bytes"),
        (lambda: check.request_timeout(0), ConfigurationError, "request_timeout"),
        (lambda: check.domain(""), ConfigurationError, "localhost:8080"),
        # The core's own checks (not in `opensandbox_core.validation`).
        (lambda: check.flag(1, "plain_lines"), ConfigurationError, "plain_lines must be a bool"),
        (lambda: check.choice("x", "framing", ("a", "b")), ConfigurationError, "'a' or 'b'"),
        (lambda: check.instance(1, str, "spec", "a SandboxSpec"), ConfigurationError, "a Sand"),
        (lambda: check.sequence_of("ab", str, "volumes", "V"), ConfigurationError, "sequence"),
        (lambda: check.sequence_of([1], str, "volumes", "V"), ConfigurationError, "of V"),
        (lambda: check.int_at_least(0, "attempts", 1), ConfigurationError, "at least 1, got 0"),
        (lambda: check.volume("A", "/m", "/h", None, False, None), ConfigurationError, "DNS"),
        (lambda: check.volume("a", "m", "/h", None, False, None), ConfigurationError, "absolute"),
        (lambda: check.volume("a", "/m", None, None, False, None), ConfigurationError, "one of"),
        (lambda: check.volume("a", "/m", "/h", None, 1, None), ConfigurationError, "read_only"),
        (lambda: check.volume("a", "/m", "/h", None, False, "../x"), ConfigurationError, "'..'"),
        (lambda: check.egress_rule("drop", "x.org"), ConfigurationError, "'allow' or 'deny'"),
        (lambda: check.egress_rule("allow", "a b"), ConfigurationError, "such as 'pypi.org'"),
        (lambda: check.write_data("text"), ConfigurationError, "async iterable of bytes"),
        (lambda: check.replacement("", "x"), ConfigurationError, "old must be a non-empty"),
        (lambda: check.remote_dir(""), ConfigurationError, "remote_dir must be"),
        (lambda: check.exclude_patterns("*.log"), ConfigurationError, "not one string"),
        (lambda: check.exclude_patterns(["/"]), ConfigurationError, "non-empty strings"),
        (lambda: check.keep_running(" ", "/dev/null"), ConfigurationError, "shell command line"),
        (lambda: check.keep_running("x", ""), ConfigurationError, "log must be"),
        (lambda: check.started_session(None), ConfigurationError, "no sandbox yet"),
        (lambda: check.snapshot_source(" "), ConfigurationError, "non-empty sandbox id"),
        (lambda: check.snapshot_id(""), ConfigurationError, "snapshot_id must be"),
        (lambda: check.restore_lifetime(59), ConfigurationError, "at least 60 seconds"),
        (lambda: check.restore_lifetime("1h"), ConfigurationError, "at least 60 seconds"),
        (lambda: check.removal_selectors(None, None, None, False), ConfigurationError, "ids="),
        (
            lambda: check.one_of(None, None, create_name="image=", attach_name="ref="),
            ConfigurationError,
            "not neither",
        ),
        (
            lambda: check.one_of(1, 2, create_name="image=", attach_name="ref="),
            ConfigurationError,
            "not both",
        ),
    ],
)
def test_bad_values_raise_the_documented_type_and_say_why(
    call: Any, kind: type[Exception], fragment: str
) -> None:
    with pytest.raises(kind) as info:
        call()
    assert type(info.value) is kind
    assert fragment in str(info.value)
    assert str(info.value)[-1] in ".)'"  # a whole sentence


def test_type_errors_are_configuration_errors_and_builtin_type_errors() -> None:
    # The core's callers catch ConfigurationError; the adapters' callers TypeError or ValueError.
    with pytest.raises(TypeError):
        check.env({"A": 1})
    with pytest.raises(ValueError):
        check.env({"A": 1})
    with pytest.raises(ConfigurationError):
        check.env({"A": 1})


def test_good_values_come_back_normalised() -> None:
    assert check.timeout(5) == 5.0 and isinstance(check.timeout(5), float)
    assert check.timeout(None) is None
    assert check.duration(timedelta(minutes=2), "t") == 120.0
    assert check.idle_lifetime(0) is None and check.idle_lifetime(None) is None
    assert check.idle_lifetime(timedelta(hours=1)) == 3600.0
    assert check.zero_is_none(0, "timeout") is None
    assert check.command_text(["echo", "a b"]) == "echo 'a b'"
    assert check.command_text("echo $HOME") == "echo $HOME"
    assert check.command_form(["ls", "-l"], False) == ["ls", "-l"]
    assert check.command_form("ls | wc", True) == "ls | wc"
    assert check.env(None) == {} and check.env({"A": "1"}) == {"A": "1"}
    assert check.env({"app.kubernetes.io/x=y": "1"}, what="metadata") == {
        "app.kubernetes.io/x=y": "1"
    }
    assert check.working_dir(None) is None and check.working_dir("/w") == "/w"
    assert check.sandbox_id("  sb-1 ") == "sb-1"
    assert check.mode(None) is None and check.mode(0o4755) == 0o4755
    assert check.byte_data(bytearray(b"x")) == b"x"
    assert check.entrypoint(("a", "b")) == ["a", "b"]
    assert check.write_data(memoryview(b"x")) == b"x"
    assert check.exclude_patterns(None) == () and check.exclude_patterns(["*.log"]) == ("*.log",)
    assert check.snapshot_source(" sb-1 ") == "sb-1" and check.snapshot_id(" s ") == "s"
    assert check.restore_lifetime(None) is None and check.restore_lifetime(60) == 60.0
    assert check.int_at_least(3, "n", 1) == 3 and check.choice("a", "x", ("a",)) == "a"


def test_the_spec_uses_the_same_checks_and_defaults() -> None:
    spec = SandboxSpec(image="img")
    assert spec.lifetime == defaults.LIFETIME == 1800.0
    assert spec.ready_timeout == defaults.READY_TIMEOUT
    with pytest.raises(ArgumentTypeError):
        SandboxSpec(image="img", container_env={"A": 1})  # type: ignore[dict-item]


def test_defaults_are_the_documented_values() -> None:
    assert defaults.WORKING_DIR == "/workspace"
    assert defaults.MAX_OUTPUT == 16 * 1024 * 1024
    assert defaults.COMMAND_TIMEOUT == 1800.0
    assert defaults.DOMAIN == "localhost:8080"
    assert set(defaults.__all__) <= set(vars(defaults))
    assert set(check.__all__) <= set(vars(check))


@pytest.mark.parametrize("framing", ["legacy", "modern"])
async def test_a_command_checks_each_argument_once(
    monkeypatch: pytest.MonkeyPatch, framing: Literal["legacy", "modern"]
) -> None:
    # One check per argument on each path: `run` used to check its command text twice.
    calls: Counter[str] = Counter()

    def counting(name: str) -> Any:
        real = getattr(check, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        return counted

    for name in ("command_text", "timeout", "env", "output_cap"):
        monkeypatch.setattr(check, name, counting(name))
    fake = FakeOpenSandbox(framing=framing)
    async with AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as sb:
        await sb.start()
        calls.clear()
        result = await sb.commands.run(["echo", "a b"], env={"A": "1"}, timeout=5)
        assert result.stdout == "a b\n"
        assert dict(calls) == {"command_text": 1, "timeout": 1, "env": 1, "output_cap": 1}
        calls.clear()
        await sb.commands.start_background("true", timeout=5)
        assert dict(calls) == {"command_text": 1, "timeout": 1, "env": 1}
