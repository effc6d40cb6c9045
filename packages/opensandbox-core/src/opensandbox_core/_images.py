"""What an image needs from a new sandbox that the caller did not say: the container's command.

`SandboxSpec(entrypoint=None)` means "the command this image needs": for the
`opensandbox/code-interpreter` images their entrypoint script, whose path moved between releases
(picked from the tag; an unknown tag runs whichever script the image has), and for every other
image `tail -f /dev/null`, which keeps the container alive for the daemon. One rule, applied at
create by the core, so every package gets it.

Verified against the code-interpreter images v1.0.1, v1.0.2 and v1.1.0 (their Dockerfiles
upstream) on 2026-11-29.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = [
    "CODE_INTERPRETER_ENTRYPOINTS",
    "CODE_INTERPRETER_REPOSITORY",
    "KEEP_ALIVE",
    "default_entrypoint",
]

KEEP_ALIVE: Final[tuple[str, ...]] = ("tail", "-f", "/dev/null")
"""The command of a sandbox whose image needs none of its own (also the SDK's default)."""

CODE_INTERPRETER_REPOSITORY: Final = "opensandbox/code-interpreter"

CODE_INTERPRETER_ENTRYPOINTS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        # tag of opensandbox/code-interpreter  ->  its entrypoint script
        "v1.0.1": ("/opt/opensandbox/code-interpreter.sh",),
        "v1.0.2": ("/opt/opensandbox/code-interpreter.sh",),
        "v1.1.0": ("/opt/code-interpreter/code-interpreter.sh",),
    }
)

_PROBING: Final[tuple[str, ...]] = (
    "/bin/sh",
    "-c",
    "for s in /opt/code-interpreter/code-interpreter.sh /opt/opensandbox/code-interpreter.sh; "
    'do if [ -x "$s" ]; then exec "$s"; fi; done; exec tail -f /dev/null',
)
"""For code-interpreter tags not in the table: run whichever script the image has."""


def _repository_and_tag(image: str) -> tuple[str, str | None]:
    """(repository without registry host, tag) of an image reference; a digest counts as no tag."""
    name = image.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    tag: str | None = None
    if ":" in last:
        last, tag = last.split(":", 1)
    parts = [*head.split("/"), last] if head else [last]
    # Drop a registry host ("docker.io", "localhost:5000", "registry.example.com").
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    return "/".join(parts), tag


def default_entrypoint(image: str) -> list[str]:
    """The container command a new sandbox of `image` gets when its spec names none.

    >>> default_entrypoint("opensandbox/code-interpreter:v1.1.0")
    ['/opt/code-interpreter/code-interpreter.sh']
    >>> default_entrypoint("python:3.13-slim")
    ['tail', '-f', '/dev/null']
    """
    repository, tag = _repository_and_tag(image)
    if repository != CODE_INTERPRETER_REPOSITORY:
        return list(KEEP_ALIVE)
    return list(CODE_INTERPRETER_ENTRYPOINTS.get(tag or "", _PROBING))
