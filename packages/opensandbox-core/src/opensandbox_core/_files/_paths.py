"""What a path given to a session names in its sandbox (pure: no I/O).

The files facet resolves every path it is given here (`FileSystem.resolve`), and the commands
facet a command's `cwd`, against the canonical working directory the probe found.
"""

from __future__ import annotations

import posixpath

from opensandbox_core import _validate

__all__ = ["resolve"]


def resolve(path: str, working_dir: str) -> str:
    """The absolute path that `path` names: relative paths start at `working_dir`.

    Any text is taken literally: `$` and a leading `~` are never expanded (paths that execd
    would expand go through commands, see `_fallback`). An empty path, a NUL byte or a path
    that is not a string raises ConfigurationError.
    """
    _validate.path(path)
    if path.startswith("/"):
        return path
    return posixpath.join(working_dir, path)
