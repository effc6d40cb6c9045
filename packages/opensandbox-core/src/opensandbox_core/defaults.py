"""`DEFAULT`: the sentinel for "the session's default" (such as its default command timeout),
for code that forwards an optional argument to the core (`commands.run(..., timeout=DEFAULT)`).

The core's default values are its parameters' defaults (`SandboxSpec`, `AsyncSandboxSession`);
each adapter documents and passes its own (tests/unit/test_lifetimes.py holds the idle lifetime
equal in every package).
"""

from ._defaults import DEFAULT

__all__ = ["DEFAULT"]
