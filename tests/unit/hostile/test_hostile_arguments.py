"""Property tests: command building and path/argument validation on any input.

Each input either works exactly (the command a shell runs is the argv given, a path resolves to
what it names) or fails with the documented error: `ConfigurationError` (a `ValueError`) in the
core, `ValueError`/`TypeError` in the Pydantic AI backend, `ValueError` or `invalid_path` in the
Deep Agents backend. No network: sessions are built and never started.
"""

from __future__ import annotations

import math
import posixpath
import shlex
import subprocess
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepagents_opensandbox_backend._filesystem import check_transfer_path, execute_timeout
from deepagents_opensandbox_backend._options import SandboxOptions
from opensandbox_core import AsyncSandboxSession, ConfigurationError, Connection, validation
from opensandbox_core._lifecycle._sandbox import Ready as _Ready
from opensandbox_core._validate import command_text as _command_text
from opensandbox_core._validate import env as _check_env
from opensandbox_core._validate import timeout as _check_timeout
from opensandbox_core._wire._execd import ExecdEndpoint
from opensandbox_core._wire._framing import Framing

# Any string at all: control characters, NUL, newlines, quotes, lone surrogates (non-UTF-8).
ANY_TEXT = st.text(st.characters(), max_size=200)
NASTY = st.sampled_from(
    [
        "",
        " ",
        "\0",
        "a\0b",
        "\n",
        "a\nb",
        "'",
        '"',
        "$(touch /tmp/pwned)",
        "`touch /tmp/pwned`",
        "; rm -rf /",
        "..",
        "../../etc/passwd",
        "-rf",
        "--",
        "\udcff",
        "\ud800x",
        "é/ü",
        "x" * 5000,
        "a\\",
        "*",
        "~",
        "$HOME",
        "${HOME}",
        "/tmp/$PATH/x",
        "$(id)",
        "$1",
    ]
)
STRINGS = st.one_of(ANY_TEXT, NASTY)
BASH_SAFE = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\0"), max_size=80)


def _session() -> AsyncSandboxSession:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = AsyncSandboxSession.attach(
            "sbx-offline", connection=Connection(domain="127.0.0.1:9", api_key="k" * 20)
        )
    session._life.ready = _Ready(
        endpoint=ExecdEndpoint(base_url="http://127.0.0.1:9", headers={}),
        framing=Framing.MODERN,
        working_dir="/workspace",
    )
    return session


SESSION = _session()


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@given(command=STRINGS)
def test_string_command_is_kept_verbatim_or_refused(command: str) -> None:
    try:
        text = _command_text(command)
    except ConfigurationError:
        assert not command.strip() or "\0" in command
        return
    assert text == command


@given(argv=st.lists(STRINGS, max_size=8))
def test_argv_quotes_back_to_itself_or_is_refused(argv: list[str]) -> None:
    try:
        text = _command_text(argv)
    except ConfigurationError:
        assert not argv or any("\0" in a for a in argv)
        return
    assert shlex.split(text) == argv


@settings(max_examples=150, deadline=None)
@given(argv=st.lists(BASH_SAFE, min_size=1, max_size=6))
def test_argv_reaches_a_real_bash_as_the_same_words(argv: list[str]) -> None:
    """What execd does: `bash -c <text>`. Printing each word NUL-terminated gives argv back, and
    no `$(...)`, backtick or `;` in an item runs."""
    text = _command_text(["printf", "%s\\0", *argv])
    done = subprocess.run(["bash", "-c", text], capture_output=True, check=True, timeout=10)
    words = done.stdout.split(b"\0")[:-1]
    assert [w.decode("utf-8") for w in words] == argv


@given(argv=st.integers(min_value=1, max_value=3))
def test_huge_argv_is_refused(argv: int) -> None:
    with pytest.raises(ConfigurationError):
        _command_text(["echo", *(["y" * 400_000] * (argv + 2))])


@given(path=STRINGS)
def test_path_resolves_to_what_it_names_or_is_refused(path: str) -> None:
    try:
        resolved = SESSION.files._fs.resolve(path)
    except ConfigurationError:
        assert not path or "\0" in path or not _utf8(path)
        return
    assert _utf8(resolved)  # `$` and `~` are kept: paths execd would expand go through commands
    assert resolved.startswith("/")
    assert "\0" not in resolved
    if path.startswith("/"):
        assert resolved == path
    else:
        assert resolved == posixpath.join("/workspace", path)


@given(path=st.one_of(st.integers(), st.binary(), st.none(), st.lists(st.text())))
def test_non_string_path_is_refused(path: Any) -> None:
    with pytest.raises(ConfigurationError):
        SESSION.files._fs.resolve(path)


ENV_ITEMS = st.one_of(STRINGS, st.integers(), st.none(), st.binary(max_size=5))


# -- the adapters' argument checks -----------------------------------------------------------


@given(command=st.one_of(STRINGS, st.lists(STRINGS, max_size=5)), shell=st.booleans())
def test_pydantic_command_form_is_exact_or_type_or_value_error(command: Any, shell: bool) -> None:
    try:
        got = validation.command_form(command, shell)
    except (TypeError, ValueError):
        return
    if isinstance(command, str):
        assert shell and got == command
    else:
        assert not shell and got == command and command


@given(path=st.one_of(STRINGS, st.integers(), st.none()))
def test_deepagents_transfer_path_check(path: Any) -> None:
    problem = check_transfer_path(path)
    if problem is None:
        assert isinstance(path, str) and path.startswith("/") and "\0" not in path
    else:
        assert problem == "invalid_path"


# -- one body per check, run for the core and each adapter ---------------------------------------

WEEK = 7 * 24 * 3600


@dataclass(frozen=True)
class _TimeoutRule:
    """How one package takes a command timeout: its checker and what it does with None, 0 and
    values over a week (everything else: a positive finite number is kept as a float, any other
    value is refused with a `ValueError`)."""

    check: Callable[[Any], float | None]
    none: str  # "default" (None is kept) or "refused"
    zero: str  # "refused" or "no limit" (0 gives None)
    over_a_week: str  # "refused" or "kept"


TIMEOUT_RULES = {
    "core": _TimeoutRule(
        lambda v: _check_timeout(v, allow_none=True), "default", "refused", "refused"
    ),
    # The Pydantic AI backend checks with the core's public `validation.timeout` (before it
    # starts the sandbox): the same rule, through the name the backend calls.
    "pydantic_ai": _TimeoutRule(validation.timeout, "default", "refused", "refused"),
    # The execute tool's seconds: 0 means no limit; no upper bound of its own.
    "deepagents": _TimeoutRule(execute_timeout, "refused", "no limit", "kept"),
}


@pytest.mark.parametrize("package", list(TIMEOUT_RULES))
@given(value=st.one_of(st.none(), st.integers(), st.floats(), st.booleans(), ANY_TEXT))
def test_timeout_is_a_positive_finite_number_or_refused(package: str, value: Any) -> None:
    rule = TIMEOUT_RULES[package]
    if value is None:
        expected: Any = None if rule.none == "default" else ValueError
    elif isinstance(value, bool | str):
        expected = ValueError
    elif value == 0:
        expected = None if rule.zero == "no limit" else ValueError
    elif not math.isfinite(value) or value < 0 or (value > WEEK and rule.over_a_week == "refused"):
        expected = ValueError
    else:
        expected = float(value)
    try:
        got = rule.check(value)
    except ValueError:
        assert expected is ValueError, (package, value)
        return
    assert expected is not ValueError, (package, value, got)
    assert got == expected and (got is None or isinstance(got, float)), (package, value, got)


def _deep_env(env: Any) -> Any:
    """The Deep Agents backend checks its options (env among them) when they are built, before
    any I/O; its env is every command's, as everywhere (the session's `env`)."""
    return SandboxOptions(image="x", env=env).create(connection=Connection(api_key="k")).env


ENV_CHECKS: dict[str, Callable[[Any], Any]] = {
    "core": _check_env,
    "pydantic_ai": validation.env,
    "deepagents": _deep_env,
}


@pytest.mark.parametrize("package", list(ENV_CHECKS))
@given(env=st.dictionaries(ENV_ITEMS, ENV_ITEMS, max_size=5))
def test_env_is_kept_exactly_or_refused(package: str, env: dict[Any, Any]) -> None:
    valid = all(
        type(k) is str and type(v) is str and k and "=" not in k and "\0" not in k + v
        for k, v in env.items()
    )
    try:
        got = ENV_CHECKS[package](env)
    except (TypeError, ValueError):
        assert not valid, (package, env)
        return
    assert valid, (package, env)
    if got is not None:
        assert got == env
