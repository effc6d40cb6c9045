"""The Deep Agents `grep` on the core's literal grep, against BaseSandbox's own, offline.

The core's grep script runs on this machine (a local stand-in for the session's `run`), once
with the system's GNU tools and once with only busybox's applets on PATH when a busybox binary
is there (`OSB_BUSYBOX`, else `busybox` on PATH); BaseSandbox's `grep` runs its own command on the
same tree with GNU grep (`LocalSandbox`), on the installed deepagents release: the answers must
be equal, for hostile patterns, names and file contents. `nox -s deepagents` runs this at both
ends of the supported range; the live tests do the same on real sandboxes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from _local_sandbox import LocalSandbox
from deepagents.backends.sandbox import BaseSandbox

from deepagents_opensandbox_backend._search import native_grep
from opensandbox_core import CommandResult, FileInfo, GrepResult
from opensandbox_core._files._grep import grep as core_grep
from opensandbox_core.adapters import decode_output, run_blocking

APPLETS = ("sh", "find", "grep", "xargs", "base64", "echo", "cat", "printf", "rm", "head", "env")


def busybox() -> str | None:
    found = os.environ.get("OSB_BUSYBOX") or shutil.which("busybox")
    return found if found and os.access(found, os.X_OK) else None


class LocalCommands:
    """The session's `run` for the core's grep, on this machine, with `bin` first on PATH."""

    def __init__(self, bin_dir: Path | None) -> None:
        path = os.environ.get("PATH", "")
        self.env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{path}" if bin_dir else path}
        self.commands: list[list[str]] = []

    async def run(
        self, command: Sequence[str], *, cwd: str | None, env: dict[str, str], **_: Any
    ) -> CommandResult:
        self.commands.append(list(command))
        done = subprocess.run(
            list(command),
            cwd=cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            check=False,
        )
        return CommandResult(
            done.returncode, decode_output(done.stdout), decode_output(done.stderr)
        )


class LocalSession:
    """The two session methods the Deep Agents grep uses, on this machine."""

    def __init__(self, commands: LocalCommands) -> None:
        self.runner = commands
        self.files = self  # the grep and stat of `session.files`

    async def grep(
        self,
        pattern: str | Sequence[str],
        path: str = ".",
        *,
        glob: str | None = None,
        include: Callable[[str], bool] | None = None,
        exclude_dirs: Sequence[str] = (),
        max_matches: int | None = None,
        env: dict[str, str] | None = None,
        timeout: Any = None,
    ) -> GrepResult:
        return await core_grep(
            self.runner,  # type: ignore[arg-type]
            pattern,
            path,
            glob=glob,
            include=include,
            exclude_dirs=exclude_dirs,
            max_matches=max_matches,
            env=env,
            timeout=None,
        )

    async def stat(self, path: str) -> FileInfo:
        info = os.stat(path)
        is_dir = Path(path).is_dir()
        kind = "directory" if is_dir else "file"
        return FileInfo(path, kind, info.st_size, info.st_mode & 0o777, is_dir=is_dir)


@pytest.fixture(scope="module", params=["gnu", "busybox"])
def session(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> LocalSession:
    if request.param == "gnu":
        return LocalSession(LocalCommands(None))
    binary = busybox()
    if binary is None:
        pytest.skip("no busybox binary here (set OSB_BUSYBOX); the live busybox tests cover it")
    bin_dir = tmp_path_factory.mktemp("busybox-bin")
    for applet in APPLETS:
        (bin_dir / applet).symlink_to(binary)
    return LocalSession(LocalCommands(bin_dir))


SETUP = r"""
set -e
g="$1"
rm -rf -- "$g"; mkdir -p -- "$g/src/deep" "$g/.git" "$g/.hidden-dir" "$g/with space/\$HOME"
printf 'needle one\r\nplain needle\nno match here\n' > "$g/crlf.txt"
printf 'cr\rneedle\rend\n' > "$g/cr.txt"
printf 'x\ry\rz\nafter needle\n' > "$g/lone-cr.txt"
printf 'nel\xc2\x85needle\nsep\xe2\x80\xa8needle\n' > "$g/unicode.txt"
printf 'bad\xff\xfeneedle\n\xffneedle\xff\n' > "$g/bytes.txt"
printf 'ok needle\n\377 needle\nlater needle\n' > "$g/mixed.txt"
printf '\0\1needle\0\2\n' > "$g/binary.bin"
printf 'last needle without newline' > "$g/src/deep/tail.py"
printf 'needle in git\n' > "$g/.git/config"
printf 'needle hidden\n' > "$g/.hidden-dir/h.py"
printf 'needle: colon\n' > "$g/src/a:b.py"
printf 'needle\n' > "$g/src/a"
printf 'needle\n' > "$g/src/a:1:x"
printf 'needle\n' > "$g/src/a:12"
printf 'needle\n' > "$g/src/name$(printf '\r')cr.py"
printf 'needle\n' > "$g/src/nl
name.py"
printf 'needle\n' > "$g/src/bad$(printf '\377')name.py"
printf "it's \$(touch x) \`id\` a\\\\b -e x*y \$HOME needle\n" > "$g/with space/\$HOME/hostile.txt"
ln -s crlf.txt "$g/link-to-file"
ln -s src "$g/link-to-dir"
mkfifo "$g/fifo"
for i in $(seq 1 300); do echo "needle $i"; done > "$g/many.txt"
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("grep-port") / "tree"
    subprocess.run(["bash", "-c", SETUP, "s", str(root)], check=True)
    return str(root)


def cases(root: str) -> list[tuple[str, str | None, str | None, int | None]]:
    return [
        ("needle", root, None, None),
        ("needle", root + "/", None, None),
        ("needle", root, "*.py", None),
        ("needle", root, "*.txt", 3),
        ("needle", root, "src/**/*.py", None),
        ("needle", root, "**/*.txt", None),
        ("needle", root, "**/*.py", 2),
        ("needle", root, "src/*", None),
        ("needle", root, ".*/*", None),
        ("needle", root, None, 10),
        ("needle", root, None, 0),
        ("needle", f"{root}/many.txt", None, None),
        ("needle", f"{root}/many.txt", "*.py", None),
        ("needle", f"{root}/many.txt", "*.txt", None),
        ("needle", f"{root}/binary.bin", None, None),
        ("needle", f"{root}/link-to-dir", None, None),
        ("needle", f"{root}/link-to-file", None, None),
        ("needle", f"{root}/.git", None, None),
        ("needle", f"{root}/missing", None, None),
        ("needle", f"{root}/missing", "a/*.py", None),
        ("needle", root, "../*", None),
        ("needle", root, "[", None),
        ("needle", root, "{a,b", None),
        ("\r", root, None, None),
        ("\u0085needle", root, None, None),
        ("needle\nplain", root, None, None),
        ("needle\n", root, "**/*.txt", None),
        ("", f"{root}/crlf.txt", None, None),
        ("-e", root, None, None),
        ("it's", root, None, None),
        ("$(touch x)", root, None, None),
        ("`id`", root, None, None),
        ("a\\b", root, None, None),
        ("x*y", root, None, None),
        ("$HOME", root, None, None),
        ("$HOME", root, "*.txt", None),
        ("no such text anywhere", root, None, None),
    ]


def test_grep_equals_base_sandboxs(session: LocalSession, tree: str) -> None:
    oracle = LocalSandbox()
    for pattern, path, glob, cap in cases(tree):
        ours = run_blocking(
            native_grep(
                session,  # type: ignore[arg-type]
                pattern,
                path,
                glob,
                max_count=cap,
                exclude_dirs=(".git",),
                timeout=None,
            )
        )
        theirs = BaseSandbox.grep(oracle, pattern, path, glob, max_count=cap)
        assert ours == theirs, (pattern, path, glob, cap)
    assert not Path(tree, "x").exists() and not Path("x").exists()  # `$(touch x)` ran nowhere


def test_the_python_routes_known_differences(session: LocalSession, tree: str) -> None:
    """Documented in `_filesystem.py`: under a glob with `/`, BaseSandbox's script follows symlinks
    (`glob.glob`: the files below `link-to-dir` again, named by their real paths) and reads
    binary files as text; the native grep skips both, and answers the rest alike."""
    oracle = LocalSandbox()
    for glob in ("**/*.bin", "*/*"):  # not "**/*": the script would block on the FIFO
        ours = run_blocking(
            native_grep(
                session,  # type: ignore[arg-type]
                "needle",
                tree,
                glob,
                max_count=None,
                exclude_dirs=(),
                timeout=None,
            )
        )
        theirs = BaseSandbox.grep(oracle, "needle", tree, glob)
        mine = Counter((m["path"], m["line"], m["text"]) for m in ours.matches or [])
        base = Counter((m["path"], m["line"], m["text"]) for m in theirs.matches or [])
        assert mine < base, glob
        extra = {path for path, _, _ in base - mine}
        assert extra <= {f"{tree}/binary.bin"} | {path for path, _, _ in mine}, extra


def test_hostile_patterns_find_exactly_the_literal_lines(session: LocalSession, tree: str) -> None:
    for pattern in ["it's", "$(touch x)", "`id`", "a\\b", "-e", "x*y", "$HOME"]:
        result = run_blocking(session.files.grep(pattern, tree))
        found = {(Path(m.path).name, m.line) for m in result.matches}
        assert found == {("hostile.txt", 1)}, pattern
        assert result.matches[0].path == f"{tree}/with space/$HOME/hostile.txt"
    names = {Path(m.path).name for m in run_blocking(session.files.grep("needle", tree)).matches}
    assert {"a:1:x", "a:12", "a", "a:b.py", "nl\nname.py", "name\rcr.py"} <= names
    # Arguments are never command text: every command is the fixed script or a plain grep.
    for command in session.runner.commands:
        assert command[:2] in (["sh", "-c"], ["grep", "-n"]), command
