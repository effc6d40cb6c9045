"""The defaults of opensandbox-core, each defined once, for code built on the core.

The adapters (`deepagents-opensandbox-backend`, `pydantic-ai-opensandbox`) take their documented
defaults from here instead of repeating the literals, so a value changes in one place. Every
name is a plain constant (see each one's docstring in the source); they stay the same within a
minor version.
"""

from ._defaults import DEFAULT, LIFETIME, MAX_OUTPUT, READY_TIMEOUT, WORKING_DIR

__all__ = ["DEFAULT", "LIFETIME", "MAX_OUTPUT", "READY_TIMEOUT", "WORKING_DIR"]
