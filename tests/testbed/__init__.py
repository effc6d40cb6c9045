"""The local OpenSandbox testbed: Docker, locally built images and an opensandbox-server.

`python -m testbed start|stop|status [--quiet]` (with PYTHONPATH=tests) brings it up and down.
Everything it owns lives in `.testbed/` at the repository root; `.testbed/env` holds the
connection settings as shell `export` lines once it runs.
"""

from __future__ import annotations

from testbed._paths import ENV_FILE, ROOT, STATE_DIR, read_env_file

__all__ = ["ENV_FILE", "ROOT", "STATE_DIR", "read_env_file"]
