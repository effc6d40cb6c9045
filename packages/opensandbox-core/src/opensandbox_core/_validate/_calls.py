"""The checks of the core's own calls, beyond single values: create options (volumes, egress
policy, extensions), file writes and edits, directory uploads, background processes, snapshots
and sandbox removal. Used by the core only (not part of `opensandbox_core.validation`).
"""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterable, Callable, Collection, Iterable, Mapping
from typing import Any

from opensandbox_core._errors import ConfigurationError

from ._values import (
    ArgumentTypeError,
    choice,
    flag,
    instance,
    int_between,
    seconds,
    sequence_of,
    unicode,
)

__all__ = [
    "create_options",
    "egress_rule",
    "exclude_patterns",
    "glob_pattern",
    "keep_running",
    "network_policy",
    "remote_dir",
    "removal_selectors",
    "replacement",
    "restore_lifetime",
    "snapshot_id",
    "snapshot_source",
    "spec_keywords",
    "spec_table",
    "started_session",
    "terminal_command",
    "terminal_id",
    "terminal_input",
    "terminal_pattern",
    "terminal_size",
    "terminal_wait",
    "volume",
    "write_data",
]

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_EGRESS_ACTIONS = ("allow", "deny")


# -- create options ------------------------------------------------------------------------------


def _dns_label(value: object, longest: int) -> bool:
    return isinstance(value, str) and len(value) <= longest and bool(_DNS_LABEL.fullmatch(value))


def _absolute(value: object, what: str) -> None:
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
        raise ConfigurationError(f"{what} must be an absolute path, got {value!r}.")


def volume(
    name: object,
    mount_path: object,
    host_path: object,
    claim_name: object,
    read_only: object,
    sub_path: object,
) -> None:
    """The fields of one `Volume`: a DNS-label name, an absolute mount path, exactly one source."""
    if not _dns_label(name, 63):
        raise ConfigurationError(
            f"Volume name {name!r} is not a DNS label: use lowercase letters, digits "
            "and '-', at most 63 characters, e.g. 'data'."
        )
    _absolute(mount_path, f"Volume {name!r}: mount_path")
    if (host_path is None) == (claim_name is None):
        raise ConfigurationError(
            f"Volume {name!r}: give exactly one of host_path (a host directory) and "
            "claim_name (a named volume)."
        )
    if host_path is not None:
        _absolute(host_path, f"Volume {name!r}: host_path")
    if claim_name is not None and not _dns_label(claim_name, 253):
        raise ConfigurationError(f"Volume {name!r}: claim_name {claim_name!r} is not a DNS label.")
    flag(read_only, f"Volume {name!r}: read_only")
    if sub_path is not None and (
        not isinstance(sub_path, str)
        or not sub_path
        or sub_path.startswith("/")
        or ".." in sub_path.split("/")
        or "\0" in sub_path
    ):
        raise ConfigurationError(
            f"Volume {name!r}: sub_path must be a relative path without '..', got {sub_path!r}."
        )


def egress_rule(action: object, target: object) -> None:
    """One `EgressRule`: 'allow' or 'deny' for a domain (no blanks)."""
    choice(action, "EgressRule action", _EGRESS_ACTIONS)
    if not isinstance(target, str) or not target.strip() or " " in target:
        raise ConfigurationError(
            f"EgressRule target must be a domain such as 'pypi.org', got {target!r}."
        )


def network_policy(default_action: object, egress: object, rule: type[Any]) -> None:
    """A `NetworkPolicy`: its default action and a sequence of `rule` (`EgressRule`)."""
    choice(default_action, "NetworkPolicy default_action", _EGRESS_ACTIONS)
    sequence_of(egress, rule, "NetworkPolicy egress", "EgressRule")


def create_options(
    volumes: object,
    policy: object,
    extensions: object,
    allow_internet_access: bool,
    *,
    volume_type: type[Any],
    policy_type: type[Any],
) -> None:
    """The create options of a `SandboxSpec` (`volume_type` and `policy_type` are `Volume` and
    `NetworkPolicy`): volumes with distinct names, one way of limiting egress, string
    extensions."""
    names: set[str] = set()
    for item in sequence_of(volumes, volume_type, "volumes", "opensandbox_core.Volume"):
        if item.name in names:
            raise ConfigurationError(f"Two volumes are named {item.name!r}; names must differ.")
        names.add(item.name)
    if policy is not None:
        instance(policy, policy_type, "network_policy", "an opensandbox_core.NetworkPolicy")
        if not allow_internet_access:
            raise ConfigurationError(
                "Give either allow_internet_access=False (deny all egress) or a network_policy, "
                "not both."
            )
    if not isinstance(extensions, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in extensions.items()
    ):
        raise ConfigurationError("extensions must map non-empty strings to strings.")


def spec_table(
    table: object, fields: Collection[str]
) -> dict[str, tuple[str, Callable[[Any], Any] | None]]:
    """An adapter's keyword table: keyword -> a `SandboxSpec` field (one of `fields`), or
    (that field, a callable converting the keyword's value); as (field, conversion or None)."""
    if not isinstance(table, Mapping):
        raise ArgumentTypeError("the keyword table must be a mapping of keyword -> spec field.")
    entries: dict[str, tuple[str, Callable[[Any], Any] | None]] = {}
    for keyword, entry in table.items():
        if isinstance(entry, tuple) and len(entry) == 2 and callable(entry[1]):
            name, convert = entry
        else:
            name, convert = entry, None
        choice(name, f"the spec field of keyword {keyword!r}", tuple(fields))
        entries[keyword] = (name, convert)
    return entries


def spec_keywords(disagreeing: Mapping[str, str]) -> None:
    """An adapter's keywords beside `spec=`: none that the caller set may describe the sandbox
    differently from the spec (`disagreeing`: keyword -> spec field)."""
    clashes = [f"{kw}= (the spec's {name})" for kw, name in disagreeing.items()]
    if clashes:
        raise ConfigurationError(
            f"Both spec= and {', '.join(clashes)} were given, with different values. Describe "
            "the sandbox in one place: leave the keyword out, or set it in the spec "
            "(dataclasses.replace(spec, ...))."
        )


# -- files ---------------------------------------------------------------------------------------


def write_data(data: object) -> bytes | AsyncIterable[bytes]:
    """What `write_bytes` writes: bytes-like (returned as bytes) or an async iterable of bytes."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    if not isinstance(data, AsyncIterable):
        raise ConfigurationError(
            f"data must be bytes or an async iterable of bytes, got {type(data).__name__}."
        )
    return data


def replacement(old: object, new: object) -> None:
    """The texts of `replace_text`: a non-empty `old` and a string `new`."""
    if not isinstance(old, str) or not old or not isinstance(new, str):
        raise ConfigurationError("old must be a non-empty string and new a string.")


def glob_pattern(value: object) -> str:
    """A pattern of `glob`: a non-empty string without NUL."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise ConfigurationError(
            f"pattern must be a non-empty glob such as '*.py' or 'src/**/*.ts', got {value!r}."
        )
    return value


def remote_dir(value: object) -> str:
    """The target directory of `upload_directory` (relative to the working dir, or absolute)."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise ConfigurationError(
            f"remote_dir must be a non-empty path in the sandbox such as '/workspace/project', "
            f"got {value!r}."
        )
    return value


def exclude_patterns(exclude: Iterable[str] | None) -> tuple[str, ...]:
    """`upload_directory`'s `exclude`: a list of non-empty gitignore-style patterns."""
    if exclude is None:
        return ()
    if isinstance(exclude, str):
        raise ConfigurationError(
            "exclude must be a list of patterns such as ['node_modules/', '*.log'], not one string."
        )
    patterns = tuple(exclude)
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern.strip("/"):
            raise ConfigurationError(
                f"exclude patterns must be non-empty strings such as '*.log', got {pattern!r}."
            )
    return patterns


def grep_patterns(value: object) -> list[str]:
    """`grep`'s pattern: one literal string, or a sequence of them (a line matching any);
    none holds a line break or NUL (a line never does)."""
    patterns = [value] if isinstance(value, str) else value
    if not isinstance(patterns, list | tuple) or not patterns:
        raise ConfigurationError(
            f"pattern must be a string or a non-empty list of strings, got {value!r}."
        )
    for pattern in patterns:
        if not isinstance(pattern, str) or "\n" in pattern or "\0" in pattern:
            raise ConfigurationError(
                f"each pattern must be a string without line breaks or NUL, got {pattern!r}: "
                "a line never holds one (pass several patterns for alternatives)."
            )
    return list(patterns)


def grep_filters(glob: object, exclude_dirs: object, max_matches: object) -> tuple[str, ...]:
    """`grep`'s `glob` (None or a non-empty pattern), `exclude_dirs` (a list of directory names)
    and `max_matches` (None or a positive int); returns the directory names."""
    if glob is not None and (not isinstance(glob, str) or not glob or "\0" in glob):
        raise ConfigurationError(f"glob must be None or a non-empty pattern, got {glob!r}.")
    if isinstance(exclude_dirs, str) or not isinstance(exclude_dirs, list | tuple):
        raise ConfigurationError(
            f"exclude_dirs must be a list of directory names such as ['.git'], got "
            f"{exclude_dirs!r}."
        )
    for name in exclude_dirs:
        if not isinstance(name, str) or not name or "/" in name or "\0" in name:
            raise ConfigurationError(f"exclude_dirs holds {name!r}: not a directory name.")
    if max_matches is not None and (
        isinstance(max_matches, bool) or not isinstance(max_matches, int) or max_matches < 1
    ):
        raise ConfigurationError(
            f"max_matches must be None or a positive int, got {max_matches!r}."
        )
    return tuple(exclude_dirs)


_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def label_value(value: object, name: str) -> str:
    """A metadata label value the server accepts: letters, digits, `-`, `_`, `.`, at most 63
    characters, starting and ending with a letter or digit."""
    if not isinstance(value, str) or not _LABEL_VALUE.fullmatch(value):
        raise ConfigurationError(
            f"{name} must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending with "
            f"a letter or digit, got {value!r}."
        )
    return value


def keyed_factories(spec: object, create: object, attach: object) -> None:
    """`KeyedSandboxes` takes a `SandboxSpec`, or both `create` and `attach` functions."""
    if (spec is None) == (create is None) or (create is None) != (attach is None):
        raise ConfigurationError(
            "KeyedSandboxes needs a SandboxSpec, or both create= and attach= functions "
            "(not both kinds)."
        )


# -- background processes ------------------------------------------------------------------------


def keep_running(command: object, log: object) -> None:
    """`BackgroundProcess.keep_running`'s shell line and log path."""
    if not isinstance(command, str) or not command.strip() or "\0" in command:
        raise ConfigurationError("command must be a non-empty shell command line.")
    if not isinstance(log, str) or not log or "\0" in log:
        raise ConfigurationError("log must be a non-empty path.")


# -- interactive terminals -----------------------------------------------------------------------


def terminal_command(value: object) -> str | None:
    """`open_terminal`'s command: None (an interactive shell) or a non-empty shell line."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ArgumentTypeError(
            f"command must be a shell command line (a str) or None, got {type(value).__name__}."
        )
    if not value.strip() or "\0" in value:
        raise ConfigurationError("command must be a non-empty shell command line without NUL.")
    return value


def terminal_size(cols: object, rows: object) -> tuple[int, int]:
    return int_between(cols, "cols", 1, 10000), int_between(rows, "rows", 1, 10000)


def terminal_id(value: object) -> str:
    """A terminal id (from `Terminal.id`), stripped of surrounding blanks."""
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise ConfigurationError(f"terminal_id must be a non-empty string, got {value!r}.")
    return value.strip()


def terminal_input(data: object) -> bytes:
    """Keystrokes: bytes as they are, a str as UTF-8."""
    if isinstance(data, str):
        return unicode(data, "data", "; pass bytes").encode()
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise ArgumentTypeError(f"data must be str or bytes, got {type(data).__name__}.")


def terminal_pattern(pattern: object) -> re.Pattern[bytes]:
    """What `expect` looks for: a str (as UTF-8) or bytes taken literally, or a compiled
    bytes regular expression."""
    if isinstance(pattern, re.Pattern):
        if not isinstance(pattern.pattern, bytes):
            raise ArgumentTypeError(
                "pattern must be compiled from bytes (re.compile(rb'...')): terminal output "
                "is bytes."
            )
        return pattern
    literal = terminal_input(pattern) if isinstance(pattern, str | bytes) else None
    if not literal:
        raise ConfigurationError(
            "pattern must be a non-empty str or bytes (matched literally) or a compiled bytes "
            f"regular expression, got {pattern!r}."
        )
    return re.compile(re.escape(literal))


def terminal_wait(value: object, *, allow_none: bool) -> float | None:
    """A terminal's `timeout`: seconds >= 0 (None: no limit, where allowed)."""
    if value is None and allow_none:
        return None
    return seconds(value, "timeout", minimum=0)


# -- snapshots and removal -----------------------------------------------------------------------


def started_session(sandbox_id: str | None) -> str:
    """The sandbox id of a session to snapshot, which must have started."""
    if sandbox_id is None:
        raise ConfigurationError(
            "The session has no sandbox yet: start it (await session.start()) before taking "
            "a snapshot."
        )
    return sandbox_id


def snapshot_source(value: object) -> str:
    """A sandbox id given to snapshot instead of a session, stripped."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError("Pass a session or a non-empty sandbox id to snapshot.")
    return value.strip()


def snapshot_id(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"snapshot_id must be a non-empty string, got {value!r}.")
    return value.strip()


def restore_lifetime(value: object) -> float | None:
    """The lifetime of a sandbox restored from a snapshot: None or at least 60 seconds."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 60
    ):
        raise ConfigurationError(f"lifetime must be None or at least 60 seconds, got {value!r}.")
    return float(value)


def removal_selectors(ids: object, owner: object, idle_for: object, all_: object) -> None:
    """At least one selector of `remove_sandboxes` (`metadata` alone is not one)."""
    if ids is None and owner is None and idle_for is None and not all_:
        raise ConfigurationError(
            "remove_sandboxes() was called without a selector, and would delete every sandbox "
            "these packages ever created on the server: pass ids=, owner=, idle_for= or all_=True."
        )
