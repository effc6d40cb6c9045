"""The checks of the code facet's calls (`session.code`): code text, language, a context given
as a `CodeContext` or its id, and a context's working directory. Core only."""

from __future__ import annotations

import re
from typing import Any, Final

from opensandbox_core._errors import ConfigurationError

from ._values import ArgumentTypeError, path, unicode

__all__ = ["code_context", "code_cwd", "code_language", "code_text"]

_LANGUAGE: Final = re.compile(r"[a-z][a-z0-9_+.-]{0,63}")
_CONTEXT_ID: Final = re.compile(r"[^\x00-\x1f\x7f]{1,256}")


def code_text(value: object) -> str:
    """The code of a run: a string (empty runs nothing), valid Unicode."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"code must be a string, got {type(value).__name__}.")
    return unicode(value, "code")


def code_language(value: object, name: str = "language") -> str:
    """A kernel language as execd names it (`python`, `bash`, ...), lower case. `command` is
    refused: execd runs that as a shell command, which `session.commands.run` does."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a string, got {type(value).__name__}.")
    language = value.strip().lower()
    if not _LANGUAGE.fullmatch(language):
        raise ConfigurationError(
            f"{name} must name a kernel language such as 'python' or 'bash', got {value!r}."
        )
    if language == "command":
        raise ConfigurationError(
            "language 'command' runs a shell command, not code in a kernel: use "
            "session.commands.run for that."
        )
    return language


def code_context(value: object, context_type: type[Any]) -> tuple[str, str | None] | None:
    """A run's `context`: None (the language's default context), a `CodeContext` or its id.
    Returns `(id, language or None)`."""
    if value is None:
        return None
    if isinstance(value, context_type):
        return _context_id(value.id), code_language(value.language, "context.language")
    if isinstance(value, str):
        return _context_id(value), None
    raise ArgumentTypeError(
        f"context must be a CodeContext, a context id (str) or None, got {type(value).__name__}."
    )


def _context_id(value: object) -> str:
    """Any id execd could have given (Jupyter's are UUIDs): unknown ones are execd's to refuse
    (`CodeContextNotFoundError`); only an empty one, or one with control characters, is
    malformed."""
    if not isinstance(value, str) or not _CONTEXT_ID.fullmatch(value.strip()):
        raise ConfigurationError(f"{value!r} is not a code context id.")
    return value.strip()


def code_cwd(value: object) -> str | None:
    """A context's working directory: None, or a path (relative to the working directory)
    without a line break."""
    if value is None:
        return None
    checked = path(value)
    if "\n" in checked or "\r" in checked:
        raise ConfigurationError(f"cwd {value!r} contains a line break.")
    return checked
