"""The metadata labels the core writes on every sandbox, and what they say (no I/O).

`LIBRARY_KEY`, `LIBRARY_VALUE`, `OWNER_KEY`, `ADAPTER_KEY`, `DOCTOR_KEY`; `adapter_labels(name)`
(the label an adapter puts in a spec's metadata to name itself) and `adapter_of(metadata)` (which
package created a sandbox). The default labels of keyed sandboxes and checkpoint copies are
`opensandbox_core`'s `NAMESPACE_METADATA_KEY`, `KEY_METADATA_KEY` and `COPY_OF_METADATA_KEY`. The
table is in `docs/core.md#sandbox-metadata`. The names stay the same within a minor version.
"""

from ._fleet._keyed import NAMESPACE_METADATA_KEY
from ._metadata import ADAPTER_KEY, adapter_labels

__all__ = ["ADAPTER_KEY", "NAMESPACE_METADATA_KEY", "adapter_labels"]
