"""The core's grep (`_files._grep`) cut in the sandbox at `max_matches`, on this machine: the
script runs with the system's GNU tools and with busybox's applets alone (`OSB_BUSYBOX`, else
`busybox` on PATH). Five matches in a 3,000,000-line file cost one command and a few hundred
bytes of output; a capped search answers exactly what the uncapped one cut at the cap answers,
whatever globs, `include` and the locale drop afterwards; an output over the session's cap
raises `OutputLimitError`; the glob is the core's one dialect (`compile_glob`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from opensandbox_core import CommandResult, OutputLimitError
from opensandbox_core._files._grep import GrepResult, grep
from opensandbox_core.adapters import decode_output

APPLETS = ("sh", "find", "grep", "base64", "echo", "printf", "rm", "head")


class LocalRunner:
    """`CommandRunner.run` for the grep, on this machine (output capped like the session's)."""

    def __init__(self, bin_dir: Path | None, max_output: int = 16 << 20) -> None:
        path = os.environ.get("PATH", "")
        self.env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{path}" if bin_dir else path}
        self.max_output = max_output
        self.commands: list[list[str]] = []
        self.bytes = 0

    async def run(
        self, command: Sequence[str], *, cwd: str | None, env: dict[str, str] | None, **_: Any
    ) -> CommandResult:
        self.commands.append(list(command))
        done = subprocess.run(
            list(command),
            cwd=cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            check=False,
        )
        self.bytes += len(done.stdout)
        cut = len(done.stdout) > self.max_output
        stdout = decode_output(done.stdout[: self.max_output])
        return CommandResult(done.returncode, stdout, decode_output(done.stderr), truncated=cut)


@pytest.fixture(scope="module", params=["gnu", "busybox"])
def bin_dir(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path | None:
    if request.param == "gnu":
        return None
    binary = os.environ.get("OSB_BUSYBOX") or shutil.which("busybox")
    if not binary:
        pytest.skip("no busybox binary here (set OSB_BUSYBOX); the live busybox tests cover it")
    found = tmp_path_factory.mktemp("busybox-bin")
    for applet in APPLETS:
        (found / applet).symlink_to(binary)
    return found


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("grep-cap") / "t"
    for relative in ("a", "src/x", "src/y/z", "lib", "src/q"):
        (root / relative).mkdir(parents=True)
    for i in range(6):
        (root / "lib" / f"m{i}.txt").write_text("".join(f"needle lib {i} {n}\n" for n in range(4)))
        (root / "src/y/z" / f"d{i}.py").write_text(f"needle deep {i}\nno\nneedle again {i}\n")
    (root / "a/first.txt").write_text("needle a\n" * 9)
    (root / "src/x/one.py").write_text("x needle\n")
    (root / "src/q/mixed.py").write_bytes(b"needle ok\n\xff needle bad\n" * 4 + b"needle end\n")
    (root / "src/q/a:1:b.py").write_text("needle risky\n" * 3)
    (root / "src/q/nl\nname.py").write_text("needle newline\n" * 3)
    (root / "bin.dat").write_bytes(b"\0needle\n")
    (root / "top.py").write_text("needle top\n")
    return root


def _grep(runner: LocalRunner, root: Path, **kwargs: Any) -> GrepResult:
    options: dict[str, Any] = dict(
        glob=None, include=None, exclude_dirs=(), max_matches=None, env=None, timeout=None
    )
    options.update(kwargs)
    return asyncio.run(grep(runner, "needle", str(root), **options))  # type: ignore[arg-type]


def test_five_matches_in_three_million_lines_cost_one_small_command(
    bin_dir: Path | None, tmp_path: Path
) -> None:
    big = tmp_path / "big.txt"
    subprocess.run(["sh", "-c", f"yes needle | head -n 3000000 > '{big}'"], check=True)
    for path in (big, tmp_path):  # the file itself, and the directory holding it
        runner = LocalRunner(bin_dir)
        result = _grep(runner, path, max_matches=5)
        assert result.truncated and [m.line for m in result.matches] == [1, 2, 3, 4, 5]
        assert len(runner.commands) == 1
        assert runner.bytes < 1000, runner.bytes  # not 3,000,000 records


def test_the_cut_stops_across_files_too(bin_dir: Path | None, tmp_path: Path) -> None:
    for i in range(200):
        (tmp_path / f"f{i:03}.txt").write_text("needle\n" * 50)
    runner = LocalRunner(bin_dir)
    result = _grep(runner, tmp_path, max_matches=3)
    assert result.truncated and len(result.matches) == 3 and result.files == 200
    assert len(runner.commands) == 1 and runner.bytes < 8000, runner.bytes  # names + 4 records


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"glob": "*.py"},
        {"glob": "*.{py,txt}"},
        {"glob": "src/**/*.py"},
        {"glob": "[!m]*.txt"},
        {"glob": "**/d[0-3].py"},
        {"include": lambda relative: relative.endswith("1.txt") or "z/" in relative},
        {"env": {"LC_ALL": "C.UTF-8"}},
        {"env": {"LC_ALL": "C.UTF-8"}, "glob": "src/q/*"},
        {"exclude_dirs": ("lib", "y")},
    ],
)
def test_a_capped_search_equals_the_uncapped_one_cut(
    bin_dir: Path | None, tree: Path, options: dict[str, Any]
) -> None:
    whole = _grep(LocalRunner(bin_dir), tree, **options)
    assert not whole.truncated
    for cap in (1, 2, 3, 5, 8, 13, 40):
        capped = _grep(LocalRunner(bin_dir), tree, max_matches=cap, **options)
        assert capped.matches == whole.matches[:cap], (cap, options)
        assert capped.truncated == (len(whole.matches) > cap), (cap, options)


def test_the_glob_is_the_core_dialect(bin_dir: Path | None, tree: Path) -> None:
    runner = LocalRunner(bin_dir)
    names = {Path(m.path).name for m in _grep(runner, tree, glob="*.{py,txt}").matches}
    assert {"top.py", "first.txt", "m0.txt", "one.py"} <= names and "bin.dat" not in names
    deep = {m.path for m in _grep(runner, tree, glob="src/**/*.py").matches}
    assert f"{tree}/src/x/one.py" in deep and f"{tree}/top.py" not in deep
    # A searched file passes a glob without `/` when its name matches, one with `/` always.
    assert _grep(runner, tree / "top.py", glob="*.{txt,py}").matches
    assert not _grep(runner, tree / "top.py", glob="*.txt").matches
    assert _grep(runner, tree / "top.py", glob="lib/*.txt").matches


def test_an_output_over_the_session_cap_is_an_output_limit_error(
    bin_dir: Path | None, tmp_path: Path
) -> None:
    (tmp_path / "many.txt").write_text("needle\n" * 5000)
    with pytest.raises(OutputLimitError) as info:
        _grep(LocalRunner(bin_dir, max_output=4096), tmp_path)
    assert info.value.limit == 4096
    capped = _grep(LocalRunner(bin_dir, max_output=4096), tmp_path, max_matches=10)
    assert capped.truncated and len(capped.matches) == 10


NAMES = ["a.py", "b.tsx", "a.ts", ".hidden.py", "x", "ab", "bx.txt", "ax.txt", "it's [", "a\\b"]
NAMES += ["a*b", "a?b", "{a,b", "q]", "é.py", "c.PY", "[x]", "a{b"]


WRITTEN = ["*.py", "*.{ts,tsx}", "it's [", "a\\b", "{a,b", "a{b,c}{x,y}", "a*b", "a\\*b", "*["]
LEFT_TO_PYTHON = ["\\[x]", "[!a]?.txt", "[ab]*", "?.py", "[]q]", "[^a]*", "[x]", "*.{p?,t}"]


@pytest.mark.parametrize("pattern", [*WRITTEN, "{,a}b", "a{b", *LEFT_TO_PYTHON])
def test_the_shell_patterns_of_a_name_glob_match_what_compile_glob_does(
    bin_dir: Path | None, pattern: str
) -> None:
    """`name_patterns` (what `find -name` and `case` get) against `compile_glob`, in sh; a glob
    with `?` or a set is left to Python (byte-wise shells read one byte as one character)."""
    from opensandbox_core._files._glob import compile_glob, name_patterns

    shell = name_patterns(pattern)
    if pattern in LEFT_TO_PYTHON:
        assert shell is None
        return
    assert shell is not None, pattern
    script = "n=$1; shift; for p; do case $n in $p) echo y; exit;; esac; done; echo n"
    env = LocalRunner(bin_dir).env | {"LC_ALL": "C.UTF-8"}
    for name in NAMES:
        done = subprocess.run(
            ["sh", "-c", script, "sh", name, *shell], env=env, capture_output=True, check=True
        )
        assert (done.stdout == b"y\n") == compile_glob(pattern)(name), (pattern, shell, name)
