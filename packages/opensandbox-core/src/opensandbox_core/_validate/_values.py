"""The checks of single values, shared by the core and its adapters: time, commands,
environment, places, sizes, sandboxes (`__all__`, public as `opensandbox_core.validation`), and
the generic `flag`, `choice`, `instance`, `sequence_of` and `int_at_least` for the core. See the
package docstring.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TypeVar

from opensandbox_core import _defaults
from opensandbox_core._errors import ConfigurationError

__all__ = [
    "ArgumentTypeError",
    "argv",
    "byte_data",
    "command_form",
    "command_text",
    "domain",
    "duration",
    "entrypoint",
    "env",
    "idle_lifetime",
    "image",
    "int_between",
    "max_output",
    "mode",
    "non_empty_string",
    "non_negative_int",
    "one_of",
    "output_cap",
    "path",
    "port",
    "positive_int",
    "request_timeout",
    "sandbox_id",
    "seconds",
    "timeout",
    "working_dir",
    "zero_is_none",
]

_T = TypeVar("_T")


class ArgumentTypeError(ConfigurationError, TypeError):
    """An argument has the wrong type (a `ConfigurationError` and a `TypeError` at once)."""


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- time ----------------------------------------------------------------------------------------


def seconds(value: object, name: str, *, minimum: float) -> float:
    """A finite number of seconds of at least `minimum` (lifetimes, ready timeouts)."""
    if not _is_number(value):
        raise ArgumentTypeError(f"{name} must be a number of seconds, got {type(value).__name__}.")
    assert isinstance(value, int | float)
    if not math.isfinite(value) or value < minimum:
        raise ConfigurationError(
            f"{name} must be a finite number of seconds >= {minimum}, got {value!r}."
        )
    return float(value)


def timeout(value: object, *, allow_none: bool = True, name: str = "timeout") -> float | None:
    """A command timeout: positive, finite, at most a week; None means no limit if allowed."""
    if value is None:
        if allow_none:
            return None
        raise ArgumentTypeError(f"{name} must be a number of seconds.")
    if not _is_number(value):
        raise ArgumentTypeError(
            f"{name} must be a number of seconds or None, got {type(value).__name__}."
        )
    assert isinstance(value, int | float)
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(
            f"{name} must be a positive, finite number of seconds, got {value!r}."
        )
    if value > _defaults.MAX_COMMAND_TIMEOUT:
        raise ConfigurationError(f"{name} of {value!r} s is over the maximum of one week.")
    return float(value)


def duration(value: object, name: str) -> float:
    """A finite, non-negative duration given as seconds or as a `timedelta`."""
    if isinstance(value, timedelta):
        total = value.total_seconds()
    elif _is_number(value):
        assert isinstance(value, int | float)
        total = float(value)
    else:
        raise ArgumentTypeError(
            f"{name} must be a number of seconds or a timedelta, got {type(value).__name__}."
        )
    if not math.isfinite(total) or total < 0:
        raise ConfigurationError(f"{name} must be a finite, non-negative duration, got {value!r}.")
    return total


def zero_is_none(value: object, name: str) -> float | None:
    """A non-negative duration where 0 means "no limit" (returned as None)."""
    total = duration(value, name)
    return None if total == 0 else total


def idle_lifetime(value: object, name: str = "timeout") -> float | None:
    """A sandbox idle lifetime in seconds; None (or zero) keeps the sandbox until it is killed."""
    if value is None:
        return None
    total = zero_is_none(value, name)
    if total is not None and total < 1:
        raise ConfigurationError(f"{name} must be at least one second, got {value!r}.")
    return total


# -- commands ------------------------------------------------------------------------------------


def argv(command: object) -> list[str]:
    """An argv list: a non-empty sequence of strings without NUL characters."""
    if isinstance(command, str | bytes | bytearray) or not isinstance(command, Sequence):
        raise ArgumentTypeError("command must be a string or a sequence of strings (argv).")
    items = list(command)
    if not items:
        raise ConfigurationError("argv must not be empty.")
    for item in items:
        if not isinstance(item, str):
            raise ArgumentTypeError(f"argv items must be strings, got {type(item).__name__}.")
        if "\0" in item:
            raise ConfigurationError("an argv item contains a NUL character.")
    return items


def command_text(command: object) -> str:
    """The shell command line for a command given as a shell line or an argv list."""
    if isinstance(command, str):
        if not command.strip():
            raise ConfigurationError("command must not be empty.")
        if "\0" in command:
            raise ConfigurationError("command contains a NUL character.")
        return command
    text = shlex.join(argv(command))
    if len(text) > _defaults.MAX_COMMAND_CHARS:
        raise ConfigurationError(
            "the command line is over 1,000,000 characters; write a script file instead."
        )
    return text


def command_form(command: object, shell: bool) -> str | list[str]:
    """A command of an adapter with a `shell` flag: a string needs `shell=True`, argv does not."""
    if isinstance(command, str):
        if not shell:
            raise ArgumentTypeError(
                "a string command requires shell=True; pass an argv sequence otherwise."
            )
        command_text(command)
        return command
    if isinstance(command, bytes | bytearray):
        raise ArgumentTypeError(
            "a bytes command is not supported; pass a string or an argv sequence."
        )
    if shell:
        raise ArgumentTypeError(
            "an argv sequence cannot be combined with shell=True; pass a single command string."
        )
    items = argv(command)
    command_text(items)
    return items


# -- environment ---------------------------------------------------------------------------------


def env(value: object, *, what: str = "env") -> dict[str, str]:
    """A copy of a mapping of string names to string values usable as environment (or labels)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ArgumentTypeError(f"{what} must be a mapping of strings to strings.")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise ArgumentTypeError(
                f"{what} must map strings to strings; the entry for {key!r} is not a string pair."
            )
        if not key or "\0" in key or (what.endswith("env") and "=" in key):
            raise ConfigurationError(f"{what} has an invalid name {key!r} (empty, '=' or NUL).")
        if "\0" in item:
            raise ConfigurationError(f"{what} value for {key!r} contains a NUL character.")
        out[key] = item
    return out


# -- places --------------------------------------------------------------------------------------


def working_dir(value: object) -> str | None:
    """An absolute POSIX directory, or None (the image's own)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
        raise ConfigurationError(
            f"working_dir must be an absolute path such as '/workspace', got {value!r}."
        )
    return value


def path(value: object) -> str:
    """A path in the sandbox: a non-empty string of valid Unicode without NUL."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"path must be a string, got {type(value).__name__}.")
    if not value:
        raise ConfigurationError("path must not be empty.")
    if "\0" in value:
        raise ConfigurationError(f"path {value!r} contains a NUL character.")
    return unicode(value, f"path {value!r}")


def mode(value: object) -> int | None:
    """A file mode such as 0o644 (permission, setuid, setgid and sticky bits), or None."""
    if value is None:
        return None
    if not _is_int(value) or not 0 <= value <= 0o7777:  # type: ignore[operator]
        raise ConfigurationError(f"mode must be an int such as 0o644, got {value!r}.")
    assert isinstance(value, int)
    return value


def port(value: object) -> int:
    """A TCP port number."""
    if not _is_int(value) or not 1 <= value <= 65535:  # type: ignore[operator]
        raise ConfigurationError(f"port must be an int between 1 and 65535, got {value!r}.")
    assert isinstance(value, int)
    return value


# -- sizes and counts ----------------------------------------------------------------------------


def max_output(value: object) -> int:
    """A session's per-stream output cap: an int of at least `MIN_MAX_OUTPUT` bytes."""
    if not _is_int(value) or value < _defaults.MIN_MAX_OUTPUT:  # type: ignore[operator]
        raise ConfigurationError("max_output must be an int of at least 1024 bytes.")
    assert isinstance(value, int)
    return value


def output_cap(value: object) -> int:
    """One command's output cap: a non-negative int."""
    if not _is_int(value) or value < 0:  # type: ignore[operator]
        raise ConfigurationError("max_output must be a non-negative int.")
    assert isinstance(value, int)
    return value


def non_negative_int(value: object, name: str) -> int:
    if not _is_int(value) or value < 0:  # type: ignore[operator]
        raise ConfigurationError(f"{name} must be a non-negative int, got {value!r}.")
    assert isinstance(value, int)
    return value


def positive_int(value: object, name: str) -> int:
    return int_at_least(value, name, 1, wording="a positive int")


def int_at_least(value: object, name: str, minimum: int, *, wording: str = "") -> int:
    """An int of at least `minimum` (bools are not ints here)."""
    if not _is_int(value) or value < minimum:  # type: ignore[operator]
        what = wording or f"an int of at least {minimum}"
        raise ConfigurationError(f"{name} must be {what}, got {value!r}.")
    assert isinstance(value, int)
    return value


def int_between(value: object, name: str, low: int, high: int) -> int:
    if not _is_int(value) or not low <= value <= high:  # type: ignore[operator]
        raise ConfigurationError(f"{name} must be an int between {low} and {high}.")
    assert isinstance(value, int)
    return value


# -- sandboxes -----------------------------------------------------------------------------------


def image(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(
            "image must be a non-empty image reference such as 'python:3.13-slim'."
        )
    return value


def entrypoint(value: object) -> list[str] | None:
    """A container command as a list of strings, or None for the default."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ArgumentTypeError(
            "entrypoint must be a list of strings, e.g. ['tail', '-f', '/dev/null']."
        )
    items = list(value)
    if not all(isinstance(a, str) for a in items):
        raise ArgumentTypeError(
            "entrypoint must be a list of strings, e.g. ['tail', '-f', '/dev/null']."
        )
    if not items:
        raise ConfigurationError("entrypoint must not be empty; use None for the default.")
    return items


def non_empty_string(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{name} must be a non-empty string.")
    return value


def sandbox_id(value: object) -> str:
    """A sandbox id, stripped of surrounding blanks."""
    return non_empty_string(value, "sandbox_id").strip()


def one_of(create: object, attach: object, *, create_name: str, attach_name: str) -> None:
    """Exactly one of a create argument and an attach argument."""
    if (create is None) == (attach is None):
        raise ConfigurationError(
            f"Pass either {create_name} or {attach_name}, not "
            + ("both." if create is not None else "neither.")
        )


def byte_data(value: object, name: str = "data") -> bytes:
    """Bytes-like content, as bytes."""
    if not isinstance(value, bytes | bytearray | memoryview):
        raise ArgumentTypeError(f"{name} must be bytes, got {type(value).__name__}.")
    return bytes(value)


def request_timeout(value: object) -> float:
    if not _is_number(value):
        raise ArgumentTypeError("request_timeout must be a number of seconds.")
    assert isinstance(value, int | float)
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(
            f"request_timeout must be a positive, finite number of seconds, got {value!r}."
        )
    return float(value)


def domain(value: object) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigurationError("domain must be a non-empty string such as 'localhost:8080'.")
    return value


# -- generic -------------------------------------------------------------------------------------


def unicode(value: str, name: str, hint: str = "") -> str:
    """A string that encodes as UTF-8: no lone surrogate (half of a UTF-16 pair)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigurationError(
            f"{name} is not valid Unicode (it contains a lone surrogate){hint}."
        ) from None
    return value


def flag(value: object, name: str) -> bool:
    """A bool (not merely a truthy value)."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be a bool.")
    return value


def choice(value: object, name: str, choices: Sequence[str]) -> str:
    """One of a few strings, such as `'allow'` or `'deny'`."""
    if not isinstance(value, str) or value not in choices:
        allowed = " or ".join(repr(c) for c in choices)
        raise ConfigurationError(f"{name} must be {allowed}, got {value!r}.")
    return value


def instance(value: object, kind: type[_T], name: str, described: str) -> _T:
    """An instance of `kind`; `described` names it in the message ("a SandboxSpec")."""
    if not isinstance(value, kind):
        raise ConfigurationError(f"{name} must be {described}.")
    return value


def sequence_of(value: object, kind: type[_T], name: str, described: str) -> list[_T]:
    """A sequence (not a string) of instances of `kind`, as a list."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigurationError(f"{name} must be a sequence of {described}.")
    items = list(value)
    if not all(isinstance(item, kind) for item in items):
        raise ConfigurationError(f"{name} must be a sequence of {described}.")
    return items
