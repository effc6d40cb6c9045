"""The defaults of opensandbox-core, each defined once, for code built on the core.

The adapters (`deepagents-opensandbox-backend`, `pydantic-ai-opensandbox`) take their documented
defaults from here instead of repeating the literals, so a value changes in one place. Every
name is a plain constant (see each one's docstring in the source); they stay the same within a
minor version.
"""

from ._defaults import *  # noqa: F403  (the names and `__all__` are the private module's)
from ._defaults import __all__ as __all__
