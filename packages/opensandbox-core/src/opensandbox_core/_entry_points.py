"""The adapters installed beside the core, found by their entry points (no list of them here).

An adapter package declares itself in its `pyproject.toml`, one entry per name it writes in
the `opensandbox-agents.adapter` label, pointing at its top-level package:

```toml
[project.entry-points."opensandbox.adapters"]
my-framework = "my_framework_opensandbox"
```

The core never imports them: it reads the entry points' names, modules and distributions (the
doctor's `--version`, and which stack frames are the packages' own when a warning names the
caller's line).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from importlib import metadata
from typing import Final

__all__ = ["ADAPTER_GROUP", "InstalledAdapter", "installed_adapters", "own_packages"]

logger = logging.getLogger(__name__)

ADAPTER_GROUP: Final = "opensandbox.adapters"
"""The entry point group where adapter packages declare themselves."""


@dataclass(frozen=True)
class InstalledAdapter:
    """One entry point of `ADAPTER_GROUP`: the adapter `name` (its `adapter` label value), its
    top-level `package`, and the `distribution` and `version` that declare it (None when the
    entry point has no distribution)."""

    name: str
    package: str
    distribution: str | None
    version: str | None


def installed_adapters() -> list[InstalledAdapter]:
    """The adapters declared in `ADAPTER_GROUP`, by name (an unreadable installation is skipped
    with a log line)."""
    try:
        points = metadata.entry_points(group=ADAPTER_GROUP)
    except Exception as exc:  # a broken installation must not break the caller
        logger.warning("Could not read the %s entry points: %s", ADAPTER_GROUP, exc)
        return []
    found = set()
    for point in points:
        dist = point.dist
        found.add(
            InstalledAdapter(
                name=point.name,
                package=point.module.partition(".")[0],
                distribution=dist.name if dist is not None else None,
                version=dist.version if dist is not None else None,
            )
        )
    return sorted(found, key=lambda adapter: (adapter.name, adapter.package))


@functools.cache
def own_packages() -> tuple[str, ...]:
    """The core's package and every installed adapter's (read once per process)."""
    return ("opensandbox_core", *sorted({adapter.package for adapter in installed_adapters()}))
