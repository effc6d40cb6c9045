"""The defaults of opensandbox-core and its adapters, each defined once.

What is here (all plain constants, no I/O):

- connection: `DOMAIN` (`localhost:8080`), `ENV_DOMAIN`, `ENV_API_KEY`, `REQUEST_TIMEOUT` (30 s);
- sandboxes: `LIFETIME` (1800 s idle lifetime, the same 30 minutes in every package),
  `READY_TIMEOUT` (60 s), `RECOVER_TIMEOUT` (30 s);
- commands: `WORKING_DIR` (`/workspace`), `COMMAND_TIMEOUT` (1800 s), `MAX_COMMAND_TIMEOUT`
  (one week), `MAX_OUTPUT` (16 MiB per stream), `MIN_MAX_OUTPUT` (1 KiB), `MAX_COMMAND_CHARS`;
- transfers: `CHUNK_SIZE` (1 MiB per streamed read or upload slice).

The core's parameter defaults and each adapter's documented defaults are these values; the
adapters import them (through the public `opensandbox_core.defaults`) instead of repeating the
literals.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CHUNK_SIZE",
    "COMMAND_TIMEOUT",
    "DEFAULT",
    "DOMAIN",
    "ENV_API_KEY",
    "ENV_DOMAIN",
    "LIFETIME",
    "MAX_COMMAND_CHARS",
    "MAX_COMMAND_TIMEOUT",
    "MAX_OUTPUT",
    "MIN_MAX_OUTPUT",
    "READY_TIMEOUT",
    "RECOVER_TIMEOUT",
    "REQUEST_TIMEOUT",
    "WORKING_DIR",
]

# -- connection ----------------------------------------------------------------------------------
DOMAIN: Final = "localhost:8080"
"""The server address used when neither `domain=` nor `OPEN_SANDBOX_DOMAIN` is given."""
ENV_DOMAIN: Final = "OPEN_SANDBOX_DOMAIN"
ENV_API_KEY: Final = "OPEN_SANDBOX_API_KEY"
REQUEST_TIMEOUT: Final = 30.0
"""Seconds one request to the server may take."""

# -- sandboxes -----------------------------------------------------------------------------------
LIFETIME: Final = 1800.0
"""Seconds a created sandbox may stay unused before the server deletes it (30 minutes).

The core's `lifetime`, the Deep Agents backend's `timeout` and the Pydantic AI backend's
`sandbox_timeout` all default to it; see the lifetime table in `docs/architecture.md`.
"""
READY_TIMEOUT: Final = 60.0
"""Seconds to wait for a new sandbox's daemon to answer."""
RECOVER_TIMEOUT: Final = 30.0
"""Seconds a session looks for the sandbox of a create whose response was lost (by its tag)."""

# -- commands ------------------------------------------------------------------------------------
WORKING_DIR: Final = "/workspace"
"""The directory commands start in and relative paths resolve against."""
COMMAND_TIMEOUT: Final = 1800.0
"""Seconds a command may run unless the caller says otherwise."""
MAX_COMMAND_TIMEOUT: Final = 7 * 24 * 3600.0
"""The longest command timeout accepted (one week)."""
MAX_OUTPUT: Final = 16 * 1024 * 1024
"""Bytes of stdout (and, separately, stderr) a command result keeps (16 MiB)."""
MIN_MAX_OUTPUT: Final = 1024
"""The smallest `max_output` a session accepts."""
MAX_COMMAND_CHARS: Final = 1_000_000
"""The longest command line sent to the daemon; longer ones belong in a script file."""

# -- transfers -----------------------------------------------------------------------------------
CHUNK_SIZE: Final = 1 << 20
"""Bytes per streamed download chunk and per upload slice (1 MiB)."""


# -- the "use the session's default" sentinel ------------------------------------------------------
class _Default:
    """The type of `DEFAULT`."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = _Default()
"""Sentinel for a parameter whose default is the session's (e.g. its default command timeout)."""
