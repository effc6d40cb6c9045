"""`execute_with_offload` against BaseSandbox's own, offline: the same command, run on this
machine by the core's offload wrapper (`opensandbox_core._commands._offload`) and by
`BaseSandbox.execute_with_offload` (its own capture wrapper, `enable_capture_offload=True`),
must give the same `ExecuteOffloadResult` and leave the same bytes at `capture_path`.

The installed deepagents release is the oracle, so `nox -s deepagents` checks both ends of the
supported range. The core's reading of the file is checked by the live tests and on the fake.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from _local_sandbox import LocalSandbox
from deepagents.backends.protocol import ExecuteOffloadResult
from deepagents.backends.sandbox import BaseSandbox

from deepagents_opensandbox_backend._run import head_lines, offload_view, tail_lines
from deepagents_opensandbox_backend._texts import OFFLOAD_PREVIEW
from opensandbox_core import OffloadedRun
from opensandbox_core._commands._capture import CAPTURE_ENV
from opensandbox_core._commands._offload import _SCRIPT, OFFLOAD_ENV
from opensandbox_core.adapters import decode_output

MARKER = re.compile(r"osb-offload: (-?[0-9]+) +([0-9]+) +([0-9]+)\n")


class OffloadingLocal(LocalSandbox):
    enable_capture_offload = True


def core_offload(command: str, path: Path, *, inline: int, cap: int) -> ExecuteOffloadResult:
    """What `OpenSandboxBackend.execute_with_offload` answers, with the core's wrapper run here
    and the file read as the core reads it (whole when small, else its head and tail)."""
    env = {**os.environ, CAPTURE_ENV: command, OFFLOAD_ENV: str(path)}
    done = subprocess.run(
        ["bash", "-c", _SCRIPT.format(cap=cap)], env=env, capture_output=True, check=False
    )
    marker = MARKER.fullmatch(done.stdout.decode())
    assert marker is not None, done
    exit_code, lines, size = (int(g) for g in marker.groups())
    data = path.read_bytes()
    assert len(data) == size
    if size <= inline:
        path.unlink()
        run = OffloadedRun(exit_code, None, size, size >= cap, lines, decode_output(data))
    else:
        head, tail = data[: OFFLOAD_PREVIEW.read_bytes], data[-OFFLOAD_PREVIEW.read_bytes :]
        run = OffloadedRun(exit_code, str(path), size, size >= cap, lines, None, head, tail)
    return offload_view(run, OFFLOAD_PREVIEW)


# (command, max_inline_bytes, max_capture_bytes)
CASES = [
    ("printf 'small'", 100, 10_000),
    ("true", 100, 10_000),
    ("printf 'out\\n'; printf 'err\\n' >&2; exit 7", 100, 10_000),
    ("seq 1 100", 50, 100_000),  # many short lines: head, marker, tail
    ("seq 1 11", 10, 100_000),  # one line over the head+tail budget
    ("seq 1 10", 10, 100_000),  # exactly head+tail lines: a byte excerpt, no notice
    ("head -c 9000 /dev/zero | tr '\\0' x", 100, 100_000),  # one long line: clip notice
    ("for i in 1 2 3; do head -c 3000 /dev/zero | tr '\\0' y; echo; done", 100, 100_000),
    ("for i in $(seq 1 30); do head -c 900 /dev/zero | tr '\\0' z; echo; done", 100, 100_000),
    ('for i in $(seq 1 30); do echo "line $i"; done; head -c 5000 /dev/zero', 100, 100_000),
    ("seq 1 100000", 1000, 50_000),  # capped, with lines
    ("head -c 80000 /dev/zero | tr '\\0' q", 1000, 50_000),  # capped, one line
    ("printf 'a\\r\\nb\\xff\\xfe\\n'; seq 1 40; printf 'no newline'", 20, 100_000),
    ("printf 'x%.0s\\n' $(seq 1 12); exit 3", 5, 100_000),
    ("seq 1 100", 292, 100_000),  # output exactly the inline budget
    ("seq 1 100", 291, 100_000),  # one byte over it
]


@pytest.mark.parametrize(("command", "inline", "cap"), CASES)
def test_the_result_and_the_file_are_base_sandboxs(
    tmp_path: Path, command: str, inline: int, cap: int
) -> None:
    ours_path, theirs_path = tmp_path / "ours" / "out", tmp_path / "theirs" / "out"
    theirs = BaseSandbox.execute_with_offload(
        OffloadingLocal(),
        command,
        str(theirs_path),
        max_inline_bytes=inline,
        max_capture_bytes=cap,
    )
    ours = core_offload(command, ours_path, inline=inline, cap=cap)
    assert ours == theirs
    assert ours_path.exists() == theirs_path.exists() == ours.offloaded
    if ours.offloaded:
        assert ours_path.read_bytes() == theirs_path.read_bytes()


def test_the_cases_cover_every_shape() -> None:
    results = [
        core_offload(c, Path(f"/tmp/osb-shape-{os.getpid()}-{i}"), inline=n, cap=m)
        for i, (c, n, m) in enumerate(CASES)
    ]
    assert any(not r.offloaded for r in results)
    assert any(r.preview_has_truncation_marker for r in results)
    assert any(r.offloaded and not r.preview_has_truncation_marker for r in results)
    assert any(r.response.truncated for r in results)
    assert any("byte-capped" in r.response.output for r in results)
    assert any("bytes total" in r.response.output for r in results)
    assert any("byte limit" in r.response.output for r in results)


@pytest.mark.parametrize(
    "data", [b"", b"\n", b"a", b"a\n", b"a\nb", b"a\nb\n", b"\n\n\n", b"1\n2\n3\n4\n5\n6\n7"]
)
@pytest.mark.parametrize("count", [0, 1, 2, 5])
def test_line_excerpts_are_head_and_tails(tmp_path: Path, data: bytes, count: int) -> None:
    file = tmp_path / "f"
    file.write_bytes(data)
    head = subprocess.run(["head", "-n", str(count), file], capture_output=True, check=True)
    tail = subprocess.run(["tail", "-n", str(count), file], capture_output=True, check=True)
    assert head_lines(data, count) == head.stdout
    assert tail_lines(data, count) == tail.stdout
