"""The checks of the agent tools (`TerminalTools`, `CodeTool`): the arguments a model sends, and
the tools' own. A model's bad argument becomes a result starting with `Error:` and the message
below, so each message says what to send instead."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeVar

from opensandbox_core._errors import ConfigurationError

from ._values import ArgumentTypeError, instance, unicode

__all__ = [
    "keys_text",
    "rebound_session",
    "run_timeout",
    "tool_arguments",
    "tool_spec",
    "tool_text",
    "tool_wait",
    "wait_pattern",
]

_T = TypeVar("_T")
_S = TypeVar("_S")


def tool_spec(name: object, specs: Mapping[str, _T]) -> _T:
    """The spec of the tool `name` (one of `specs`)."""
    spec = specs.get(name) if isinstance(name, str) else None
    if spec is None:
        known = ", ".join(sorted(specs))
        raise ConfigurationError(f"There is no terminal tool named {name!r}; the tools: {known}.")
    return spec


def tool_arguments(arguments: object, schema: Mapping[str, Any], tool: str) -> dict[str, Any]:
    """The arguments of one tool call as a dict: only names the schema has, the required ones
    present. Their values are checked by the tool itself."""
    if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
        raise ArgumentTypeError(f"{tool} takes its arguments as an object of named values.")
    properties: Mapping[str, Any] = schema.get("properties", {})
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise ConfigurationError(
            f"{tool} has no argument {', '.join(unknown)}; its arguments: {', '.join(properties)}."
        )
    missing = [name for name in schema.get("required", ()) if arguments.get(name) is None]
    if missing:
        raise ConfigurationError(f"{tool} needs {', '.join(missing)}.")
    return {name: value for name, value in arguments.items() if value is not None}


def tool_text(value: object, name: str) -> str:
    """A non-empty string (`terminal_id`, `command`)."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise ArgumentTypeError(f"{name} must be a non-empty string without NUL bytes.")
    return unicode(value, name, ", which cannot be typed")


def keys_text(value: object) -> str:
    """The `keys` of `terminal_send`: a string (empty types nothing)."""
    if not isinstance(value, str):
        raise ArgumentTypeError(
            f"keys must be a string such as 'ls<Enter>', got {type(value).__name__}."
        )
    return unicode(value, "keys", ", which cannot be typed")


def wait_pattern(value: object) -> bytes | None:
    """`wait_for`: a non-empty string, matched literally (as UTF-8 bytes); None: none."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ArgumentTypeError("wait_for must be a non-empty string, such as '>>> ', or left out.")
    return unicode(value, "wait_for", ", which cannot be typed").encode("utf-8")


def tool_wait(value: object, longest: float) -> float:
    """A tool call's `timeout`: a number of seconds from 0 to `longest`."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ArgumentTypeError(f"timeout must be a number of seconds, got {type(value).__name__}.")
    if not math.isfinite(value) or not 0 <= value <= longest:
        raise ConfigurationError(
            f"timeout must be between 0 and {longest:g} seconds, got {value!r}."
        )
    return float(value)


def run_timeout(value: object, longest: float) -> float:
    """A code run's `timeout` (`CodeTool`): a number of seconds above 0, at most `longest`."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ArgumentTypeError(f"timeout must be a number of seconds, got {type(value).__name__}.")
    if not math.isfinite(value) or not 0 < value <= longest:
        raise ConfigurationError(
            f"timeout must be more than 0 and at most {longest:g} seconds, got {value!r}."
        )
    return float(value)


def rebound_session(old: _S, new: object, kind: type[_S]) -> _S:
    """A session to rebind tools to (`kind`: `AsyncSandboxSession`): on the same sandbox."""
    session = instance(new, kind, "session", "an opensandbox_core.AsyncSandboxSession")
    old_id, new_id = getattr(old, "id", None), getattr(session, "id", None)
    if old_id is not None and new_id is not None and old_id != new_id:
        raise ConfigurationError(
            f"These terminal tools work in sandbox {old_id}; a session on sandbox {new_id} "
            "cannot carry them on. Make new TerminalTools for it."
        )
    return session
