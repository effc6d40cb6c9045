"""The metadata every sandbox this project creates carries: one set of keys, for every package.

| key                            | value                               | on                               |
|--------------------------------|-------------------------------------|----------------------------------|
| `opensandbox-agents.library`   | `opensandbox-core`                  | every sandbox (how it is found)  |
| `opensandbox-agents.owner`     | a token of the creating session     | every sandbox (lost creates)     |
| `opensandbox-agents.adapter`   | `core`, `deepagents`, `pydantic-ai`, `deepagents-code`, `doctor` | every sandbox |
| `opensandbox-agents.namespace` | the thread backend's namespace      | Deep Agents thread sandboxes     |
| `opensandbox-agents.thread`    | digest of (namespace, thread id)    | Deep Agents thread sandboxes     |
| `opensandbox-agents.fork-of`   | the thread key it was forked from   | Deep Agents time-travel copies   |
| `opensandbox-agents.provider`  | `deepagents-code`                   | the deepagents-code provider's   |
| `opensandbox-agents.doctor`    | a token of the doctor run           | `opensandbox-doctor`'s probes    |
| `pydantic-ai-create`           | `true`                              | Pydantic AI's (seed 004's key)   |

The core's create writes the first three (`adapter` from the spec's metadata, else `core`); each
adapter adds its own labels through `adapter_labels`. The adapters' published constants
(`THREAD_METADATA_KEY`, `CREATE_METADATA_KEY`, ...) are these keys. `adapter_of` reads a sandbox's
labels, older ones too: a sandbox made before the `adapter` label existed is told by the keys
its package wrote then (`pydantic-ai-create`, `provider`, `thread`, `doctor`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = [
    "ADAPTERS",
    "ADAPTER_KEY",
    "DOCTOR_KEY",
    "FORK_OF_KEY",
    "LIBRARY_KEY",
    "LIBRARY_VALUE",
    "NAMESPACE_KEY",
    "OWNER_KEY",
    "PROVIDER_KEY",
    "PYDANTIC_AI_CREATE_KEY",
    "THREAD_KEY",
    "adapter_labels",
    "adapter_of",
]

LIBRARY_KEY: Final = "opensandbox-agents.library"
"""On every sandbox this project creates, with `LIBRARY_VALUE`: `list_sandboxes` finds them by it."""
LIBRARY_VALUE: Final = "opensandbox-core"
OWNER_KEY: Final = "opensandbox-agents.owner"
"""A token unique to the session object that created the sandbox (lost creates, `--owner`)."""
ADAPTER_KEY: Final = "opensandbox-agents.adapter"
"""Which package created the sandbox: one of `ADAPTERS`."""
NAMESPACE_KEY: Final = "opensandbox-agents.namespace"
THREAD_KEY: Final = "opensandbox-agents.thread"
FORK_OF_KEY: Final = "opensandbox-agents.fork-of"
PROVIDER_KEY: Final = "opensandbox-agents.provider"
DOCTOR_KEY: Final = "opensandbox-agents.doctor"
PYDANTIC_AI_CREATE_KEY: Final = "pydantic-ai-create"
"""Seed 004's entry on every sandbox the Pydantic AI capability creates (value `true`)."""

ADAPTERS: Final = ("core", "deepagents", "deepagents-code", "pydantic-ai", "doctor")

_EXTRA: Final[Mapping[str, Mapping[str, str]]] = {
    # adapter  ->  the labels it writes besides ADAPTER_KEY (documented keys kept working)
    "pydantic-ai": {PYDANTIC_AI_CREATE_KEY: "true"},
    "deepagents-code": {PROVIDER_KEY: "deepagents-code"},
}

_OLD_LABELS: Final = (
    # a key written before ADAPTER_KEY existed  ->  the adapter that wrote it, in this order
    (PYDANTIC_AI_CREATE_KEY, "pydantic-ai"),
    (PROVIDER_KEY, "deepagents-code"),
    (THREAD_KEY, "deepagents"),
    (DOCTOR_KEY, "doctor"),
)


def adapter_labels(adapter: str) -> dict[str, str]:
    """The labels `adapter` (one of `ADAPTERS`) puts on every sandbox it creates."""
    from . import _validate

    _validate.choice(adapter, "adapter", ADAPTERS)
    return {ADAPTER_KEY: adapter, **_EXTRA.get(adapter, {})}


def adapter_of(metadata: Mapping[str, str]) -> str | None:
    """The package that created a sandbox with these labels (older labels read too), or None for
    one whose labels do not say (the core's, from before the `adapter` label)."""
    if ADAPTER_KEY in metadata:
        return metadata[ADAPTER_KEY]
    return next((adapter for key, adapter in _OLD_LABELS if key in metadata), None)
