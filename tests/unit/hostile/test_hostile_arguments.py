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
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from deepagents_opensandbox_backend._mapping import check_transfer_path, execute_timeout
from opensandbox_core import AsyncSandboxSession, ConfigurationError, Connection, Framing
from opensandbox_core._config import validate_env
from opensandbox_core._execd import ExecdEndpoint
from opensandbox_core._session import _check_timeout, _command_text, _Ready
from pydantic_ai_opensandbox._backend import _check_timeout as pydantic_check_timeout
from pydantic_ai_opensandbox._backend import _command_line, check_env

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
    session._ready = _Ready(
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


@given(value=st.one_of(st.none(), st.integers(), st.floats(), st.booleans(), ANY_TEXT))
def test_timeout_is_a_positive_finite_number_or_refused(value: Any) -> None:
    try:
        got = _check_timeout(value, allow_none=True)
    except ConfigurationError:
        assert (
            isinstance(value, bool | str)
            or (isinstance(value, int | float) and (not math.isfinite(value) or value <= 0))
            or (isinstance(value, int | float) and value > 7 * 24 * 3600)
        )
        return
    if value is None:
        assert got is None
    else:
        assert got == float(value) and 0 < got <= 7 * 24 * 3600


@given(path=STRINGS)
def test_path_resolves_to_what_it_names_or_is_refused(path: str) -> None:
    try:
        resolved = SESSION._resolve(path)
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
        SESSION._resolve(path)


ENV_ITEMS = st.one_of(STRINGS, st.integers(), st.none(), st.binary(max_size=5))


@given(env=st.dictionaries(ENV_ITEMS, ENV_ITEMS, max_size=5))
def test_env_is_kept_exactly_or_refused(env: dict[Any, Any]) -> None:
    try:
        got = validate_env(env)
    except ConfigurationError:
        assert any(
            not isinstance(k, str)
            or not isinstance(v, str)
            or not k
            or "=" in k
            or "\0" in k
            or "\0" in v
            for k, v in env.items()
        )
        return
    assert got == env


# -- the adapters' own argument checks ---------------------------------------------------------


@given(command=st.one_of(STRINGS, st.lists(STRINGS, max_size=5)), shell=st.booleans())
def test_pydantic_command_line_is_exact_or_type_or_value_error(command: Any, shell: bool) -> None:
    try:
        got = _command_line(command, shell)
    except (TypeError, ValueError):
        return
    if isinstance(command, str):
        assert shell and got == command
    else:
        assert not shell and got == command and command


@given(value=st.one_of(st.none(), st.integers(), st.floats(), st.booleans(), ANY_TEXT))
def test_pydantic_timeout_checks(value: Any) -> None:
    try:
        pydantic_check_timeout(value)
    except ValueError:
        assert value is not None
        return
    assume(value is not None)
    assert isinstance(value, int | float) and math.isfinite(value) and value > 0


@given(env=st.dictionaries(ENV_ITEMS, ENV_ITEMS, max_size=4))
def test_pydantic_env_checks(env: dict[Any, Any]) -> None:
    try:
        check_env(env)
    except (TypeError, ValueError):
        return
    assert all(
        type(k) is str and type(v) is str and k and "=" not in k and "\0" not in k + v
        for k, v in env.items()
    )


@given(path=st.one_of(STRINGS, st.integers(), st.none()))
def test_deepagents_transfer_path_check(path: Any) -> None:
    problem = check_transfer_path(path)
    if problem is None:
        assert isinstance(path, str) and path.startswith("/") and "\0" not in path
    else:
        assert problem == "invalid_path"


@given(value=st.one_of(st.integers(), st.floats(), st.booleans(), ANY_TEXT, st.none()))
def test_deepagents_execute_timeout(value: Any) -> None:
    try:
        got = execute_timeout(value)
    except ValueError:
        return
    if got is None:
        assert value == 0
    else:
        assert isinstance(value, int | float) and math.isfinite(value) and value > 0
