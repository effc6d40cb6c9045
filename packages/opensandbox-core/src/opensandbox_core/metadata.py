"""The metadata keys every sandbox of this project carries, and what they say (no I/O).

`ADAPTER_KEY`, `LIBRARY_KEY`, `OWNER_KEY`, the Deep Agents thread keys, `DOCTOR_KEY` and seed
004's `PYDANTIC_AI_CREATE_KEY`; `adapter_labels(adapter)` (what a package writes on a sandbox it
creates) and `adapter_of(metadata)` (which package created one, older labels read too). The
table is in `docs/core.md#sandbox-metadata`. The names stay the same within a minor version.
"""

from ._metadata import *  # noqa: F403  (the names and `__all__` are the private module's)
from ._metadata import __all__ as __all__
