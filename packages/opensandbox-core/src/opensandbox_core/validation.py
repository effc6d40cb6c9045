"""The argument checks of opensandbox-core, for code built on the core. No I/O.

Each check raises `ConfigurationError` (a `ValueError`) for a wrong value and
`ArgumentTypeError` (a `ConfigurationError` that is also a `TypeError`) for a wrong type; checks
that normalise a value return it. The adapters use these so that one rule gives one message in
every package. The functions and their messages stay the same within a minor version.
"""

from ._validate import *  # noqa: F403  (the names and `__all__` are the private module's)
from ._validate import __all__ as __all__
