"""The argument checks of opensandbox-core, for code built on the core. No I/O.

Each check raises `ConfigurationError` (a `ValueError`) for a wrong value and
`ArgumentTypeError` (a `ConfigurationError` that is also a `TypeError`) for a wrong type; checks
that normalise a value return it. The adapters use these to check their own arguments before any
I/O (a bad call must not start a sandbox), so that one rule gives one message in every package.
The functions and their messages stay the same within a minor version.
"""

from ._validate import (
    ArgumentTypeError,
    byte_data,
    command_form,
    env,
    idle_lifetime,
    seconds,
    timeout,
    working_dir,
    zero_is_none,
)

__all__ = [
    "ArgumentTypeError",
    "byte_data",
    "command_form",
    "env",
    "idle_lifetime",
    "seconds",
    "timeout",
    "working_dir",
    "zero_is_none",
]
