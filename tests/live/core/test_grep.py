"""The core's literal grep (`AsyncSandboxSession.grep`) live, on every execd generation profile,
on the Debian image and on the busybox one (the same answers): hostile patterns and paths find exactly the literal lines and run nothing; globs, excluded
directories, the match cap, names that look like grep records, binary files, the locale rule,
a missing path."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from opensandbox_core import AsyncSandboxSession, CommandResult, OutputLimitError, SandboxSpec
from opensandbox_core._files._grep import GrepMatch

ROOT = "/workspace/grep-live"
HOSTILE = ["it's", "$(touch x)", "`id`", "a\\b", "-e", "x*y", "$HOME", "'; touch y; '"]
SETUP = r"""
set -e
g="$1"; rm -rf -- "$g"; mkdir -p -- "$g/src/.git" "$g/with space/\$HOME" "$g/-e"
printf "it's \$(touch x) \`id\` a\\\\b -e x*y \$HOME '; touch y; '\n" > "$g/with space/\$HOME/h.txt"
printf 'x*yz\nxy\n' > "$g/-e/star.txt"
printf 'needle 1\nneedle 2\n' > "$g/src/a.py"
printf 'needle in git\n' > "$g/src/.git/config"
printf 'needle\n' > "$g/src/a:1:b.py"
printf 'needle\n' > "$g/src/a"
printf 'needle\n' > "$g/src/nl
name.py"
printf 'ok needle\n\377 needle\nlater needle\n' > "$g/src/bad.txt"
printf '\0needle\n' > "$g/src/bin.dat"
ln -s a.py "$g/src/link.py"
"""


@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=[
        pytest.param((image, p), marks=pytest.mark.testbed_daemon(p), id=f"{image}-{p}")
        for image in ("debian", "busybox")
        for p in ("1.0.19", "1.0.18", "1.1")
    ],
)
async def sandbox(
    request: pytest.FixtureRequest, sandbox_image: str, testbed_env: dict[str, str]
) -> AsyncIterator[AsyncSandboxSession]:
    """A sandbox of the Debian image, or of the busybox one (only busybox's `sh`, `find`,
    `grep`: no bash, no GNU tools, no python3), holding the tree of SETUP."""
    kind, profile = request.param
    image = sandbox_image
    if kind == "busybox":
        image = testbed_env.get("OSB_TESTBED_BUSYBOX_IMAGE") or os.environ.get(
            "OSB_TESTBED_BUSYBOX_IMAGE", ""
        )
        if not image:
            pytest.fail("OSB_TESTBED_BUSYBOX_IMAGE unset: restart the testbed (it builds it)")
    spec = SandboxSpec(image=image, container_env={"OSB_EXECD_PROFILE": profile})
    async with AsyncSandboxSession(spec) as session:
        shell = "bash" if kind == "debian" else "sh"
        done = await session.commands.run([shell, "-c", SETUP, "s", ROOT])
        assert done.exit_code == 0, done.stderr
        if kind == "busybox":
            gnu = await session.commands.run(
                "command -v bash python3; find --version; grep --version"
            )
            assert "GNU" not in gnu.output and "/" not in gnu.stdout, gnu.output
        yield session


pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_hostile_patterns_find_exactly_the_literal_line(
    sandbox: AsyncSandboxSession,
) -> None:
    line = "it's $(touch x) `id` a\\b -e x*y $HOME '; touch y; '"
    for pattern in HOSTILE:
        result = await sandbox.files.grep(pattern, ROOT)
        expected = {GrepMatch(f"{ROOT}/with space/$HOME/h.txt", 1, line)}
        if pattern == "x*y":
            expected.add(GrepMatch(f"{ROOT}/-e/star.txt", 1, "x*yz"))
        assert len(result.matches) == len(expected) and set(result.matches) == expected, pattern
        # Searched where the name says, with the name as the path.
        found = await sandbox.files.grep(pattern, f"{ROOT}/with space/$HOME", glob="*.txt")
        assert [m.path for m in found.matches] == [f"{ROOT}/with space/$HOME/h.txt"]
    look = 'for d in "$@"; do for f in x y; do if [ -e "$d/$f" ]; then echo "$d/$f"; fi; done; done'
    places = [ROOT, f"{ROOT}/with space/$HOME", f"{ROOT}/src", "/workspace", "/", "/root", "/tmp"]
    ran = await sandbox.commands.run(["sh", "-c", look, "s", *places])
    assert ran.stdout == "", "a pattern was run by a shell"


async def test_globs_excluded_dirs_and_the_cap(sandbox: AsyncSandboxSession) -> None:
    src = f"{ROOT}/src"
    every = await sandbox.files.grep("needle", src)
    names = sorted({m.path.rsplit("/", 1)[-1] for m in every.matches})
    assert names == ["a", "a.py", "a:1:b.py", "bad.txt", "config", "nl\nname.py"]
    assert every.files == 7  # the symlink is not searched
    skipped = await sandbox.files.grep("needle", src, exclude_dirs=[".git"])
    assert "config" not in {m.path.rsplit("/", 1)[-1] for m in skipped.matches}
    assert [m.path for m in (await sandbox.files.grep("needle", src, glob="a*.py")).matches] == [
        f"{src}/a.py",
        f"{src}/a.py",
        f"{src}/a:1:b.py",
    ]
    deep = await sandbox.files.grep("needle", ROOT, glob="src/**/config")
    assert [m.path for m in deep.matches] == [f"{src}/.git/config"]
    capped = await sandbox.files.grep("needle", src, glob="a.py", max_matches=1)
    assert capped.matches == [GrepMatch(f"{src}/a.py", 1, "needle 1")] and capped.truncated
    alternatives = await sandbox.files.grep(["needle 2", "x*yz"], ROOT)
    assert {m.text for m in alternatives.matches} == {"needle 2", "x*yz"}


async def test_binary_files_the_locale_and_a_missing_path(sandbox: AsyncSandboxSession) -> None:
    src = f"{ROOT}/src"
    assert (await sandbox.files.grep("needle", f"{src}/bin.dat")).matches == []
    # In a UTF-8 locale, as GNU grep, a line that is not UTF-8 is left out (busybox's too). The
    # Debian image has LANG=C.UTF-8, the busybox one no LANG (the C locale: every line).
    utf8 = await sandbox.files.grep("needle", f"{src}/bad.txt", env={"LC_ALL": "C.UTF-8"})
    assert [m.line for m in utf8.matches] == [1, 3]
    lang = (await sandbox.commands.run("echo ${LANG-}")).stdout.strip()
    default = await sandbox.files.grep("needle", f"{src}/bad.txt")
    assert [m.line for m in default.matches] == ([1, 3] if lang == "C.UTF-8" else [1, 2, 3])
    as_bytes = await sandbox.files.grep("needle", f"{src}/bad.txt", env={"LC_ALL": "C"})
    assert [m.line for m in as_bytes.matches] == [1, 2, 3]
    with pytest.raises(FileNotFoundError):
        await sandbox.files.grep("needle", f"{ROOT}/missing")
    relative = await sandbox.files.grep("needle 1", "grep-live/src")
    assert relative.matches == [GrepMatch("grep-live/src/a.py", 1, "needle 1")]


async def test_max_matches_stops_in_the_sandbox(sandbox: AsyncSandboxSession) -> None:
    """Five matches in a 3,000,000-line file: one command, a few hundred bytes of output (the
    search stops in the sandbox); without a cap the output passes the session's `max_output`
    and raises `OutputLimitError`."""
    big = f"{ROOT}-big/big.txt"
    made = await sandbox.commands.run(
        ["sh", "-c", 'mkdir -p "${1%/*}" && yes needle | head -n 3000000 > "$1"', "s", big]
    )
    assert made.exit_code == 0, made.stderr
    counted = AsyncSandboxSession.attach(str(sandbox.id), max_output=65536)
    outputs: list[int] = []
    run = counted._runner.run

    async def recording(*args: Any, **kwargs: Any) -> CommandResult:
        result = await run(*args, **kwargs)
        outputs.append(len(result.stdout))
        return result

    counted._runner.run = recording  # type: ignore[method-assign]
    async with counted:
        for path in (big, f"{ROOT}-big"):
            outputs.clear()
            result = await counted.files.grep("needle", path, max_matches=5)
            assert result.truncated and [m.line for m in result.matches] == [1, 2, 3, 4, 5]
            assert len(outputs) == 1 and outputs[0] < 1000, outputs
        with pytest.raises(OutputLimitError):
            await counted.files.grep("needle", big)
