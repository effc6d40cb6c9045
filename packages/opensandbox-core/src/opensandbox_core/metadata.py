"""The metadata label an adapter puts on the sandboxes it creates (no I/O).

`adapter_labels(name)` is the label naming the adapter (its `opensandbox.adapters` entry point),
which an adapter adds to a spec's metadata, and which finds its sandboxes again:
`fleet.list_sandboxes(metadata=adapter_labels("deepagents"))`. The table of every label the core
writes is in `docs/core.md#sandbox-metadata`. The names stay the same within a minor version.
"""

from ._metadata import adapter_labels

__all__ = ["adapter_labels"]
