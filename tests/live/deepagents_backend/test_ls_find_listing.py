"""`ls` where the sandbox's `ls` has no `--quoting-style` (busybox's): the `find` listing
(`_listing.FIND_LISTING`) must give BaseSandbox's own answer (its `python3` `os.scandir` script) on
the same live sandbox, for the hostile tree of `test_native_tools.py`, sync and async.

The sandbox is the Debian testbed image with an `ls` first on PATH that refuses the option
exactly as busybox's does, so only the listing path differs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from deepagents.backends.sandbox import BaseSandbox
from test_native_tools import HOSTILE_NAMES, LS_PATHS, ROOT, SETUP

from deepagents_opensandbox_backend import OpenSandboxBackend
from deepagents_opensandbox_backend._listing import (
    C_LOCALE,
    FIND_LISTING,
    list_directory,
    parse_find_listing,
)
from opensandbox_core.adapters import run_blocking

BUSYBOX_LS = """#!/bin/sh
for a; do case $a in --quoting-style=*) echo "ls: unrecognized option: ${a#--}" >&2; exit 1;; esac; done
exec /bin/ls "$@"
"""


@pytest.fixture(scope="module")
def busybox_ls_backend(testbed_env: dict[str, str]) -> Iterator[OpenSandboxBackend]:
    with OpenSandboxBackend.create() as backend:
        session = backend.session
        run_blocking(
            session.files.write_bytes("/usr/local/bin/ls", BUSYBOX_LS.encode(), mode=0o755)
        )
        done = run_blocking(
            session.commands.run(["bash", "-c", SETUP, "setup", ROOT, *HOSTILE_NAMES])
        )
        assert done.exit_code == 0, done.stderr
        refused = run_blocking(session.commands.run(["ls", "--quoting-style=escape", "/"]))
        assert "unrecognized option" in refused.stderr
        yield backend


def test_find_listing_matches_base_sandbox(busybox_ls_backend: OpenSandboxBackend) -> None:
    backend = busybox_ls_backend
    for path in LS_PATHS:
        assert backend.ls(path) == BaseSandbox.ls(backend, path), path
    session = backend.session
    find = ["sh", "-c", FIND_LISTING, "ls", ROOT]
    done = run_blocking(session.commands.run(find, env=C_LOCALE, plain_lines=True))
    by_find = parse_find_listing(ROOT, done.exit_code, done.stdout, done.stderr)
    assert by_find is not None and by_find.entries  # the `find` listing is what answered
    assert run_blocking(list_directory(session, ROOT)) == by_find
    listed = backend.ls(f"{ROOT}/dir")
    assert listed.error is None and len(listed.entries or []) > 20


async def test_async_find_listing_matches_base_sandbox(
    busybox_ls_backend: OpenSandboxBackend,
) -> None:
    backend = busybox_ls_backend
    for path in LS_PATHS[:6]:
        assert await backend.als(path) == await BaseSandbox.als(backend, path), path
