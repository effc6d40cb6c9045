"""The core's metadata labels: what it writes on a sandbox, whoever asked for it.

| key                            | value                                  | on                                |
|--------------------------------|----------------------------------------|-----------------------------------|
| `opensandbox-agents.library`   | `opensandbox-core`                     | every sandbox (how it is found)   |
| `opensandbox-agents.owner`     | a token of the creating session        | every sandbox (lost creates)      |
| `opensandbox-agents.adapter`   | `core`, or the name the adapter passes | every sandbox                     |
| `opensandbox-agents.namespace` | the `KeyedSandboxes` namespace         | keyed sandboxes                   |
| `opensandbox-agents.key`       | digest of (namespace, key)             | keyed sandboxes (default label)   |
| `opensandbox-agents.fork-of`   | the key digest it was restored for     | `CheckpointFiles` copies (default)|
| `opensandbox-agents.doctor`    | a token of the doctor run              | `opensandbox-doctor`'s probes     |

The core's create writes the first three: `adapter` from the spec's metadata (an adapter puts
`adapter_labels(name)` there, with any labels of its own), else `core`. `KeyedSandboxes` and
`CheckpointFiles` take the key, namespace and fork labels as parameters; the defaults are the
keys above. An adapter's own labels (its published constants) are its business, not the core's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

# Public through `opensandbox_core.metadata`; the keyed labels' defaults are public as
# `NAMESPACE_METADATA_KEY`, `KEY_METADATA_KEY` and `COPY_OF_METADATA_KEY` (one name each).
__all__ = [
    "ADAPTER_KEY",
    "DOCTOR_KEY",
    "LIBRARY_KEY",
    "LIBRARY_VALUE",
    "OWNER_KEY",
    "adapter_labels",
    "adapter_of",
]

LIBRARY_KEY: Final = "opensandbox-agents.library"
"""On every sandbox this project creates, with `LIBRARY_VALUE`: `list_sandboxes` finds them by it."""
LIBRARY_VALUE: Final = "opensandbox-core"
OWNER_KEY: Final = "opensandbox-agents.owner"
"""A token unique to the session object that created the sandbox (lost creates, `--owner`)."""
ADAPTER_KEY: Final = "opensandbox-agents.adapter"
"""Which package created the sandbox: `core`, or the name an adapter passes (`adapter_labels`)."""
NAMESPACE_KEY: Final = "opensandbox-agents.namespace"
"""The default label of a keyed sandbox's namespace (`KeyedSandboxes`)."""
KEY_KEY: Final = "opensandbox-agents.key"
"""The default label of a keyed sandbox's key digest (`KeyedSandboxes`)."""
FORK_OF_KEY: Final = "opensandbox-agents.fork-of"
"""The default label of a `CheckpointFiles` copy: the key digest it was restored for."""
DOCTOR_KEY: Final = "opensandbox-agents.doctor"
"""On `opensandbox-doctor`'s own test sandboxes: the token of the run."""

_DOCTOR: Final = "doctor"


def adapter_labels(adapter: str) -> dict[str, str]:
    """The label naming `adapter` as a sandbox's creator, for a spec's metadata: the core's
    create keeps it (instead of `core`). `adapter` is a label value: 1 to 63 letters, digits,
    `-`, `_` or `.`, starting and ending with a letter or digit."""
    from . import _validate

    return {ADAPTER_KEY: _validate.label_value(adapter, "adapter")}


def adapter_of(metadata: Mapping[str, str]) -> str | None:
    """The package that created a sandbox with these labels, or None when they do not say (a
    sandbox made before the `adapter` label existed, other than the doctor's probes)."""
    if ADAPTER_KEY in metadata:
        return metadata[ADAPTER_KEY]
    return _DOCTOR if DOCTOR_KEY in metadata else None
