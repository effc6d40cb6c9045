"""Framework-neutral file and command tools for agent loops, built on a session (no framework)."""
