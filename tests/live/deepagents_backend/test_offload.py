"""`execute_with_offload` live: the same answer as BaseSandbox's own (its capture wrapper,
through the same backend's `execute`), and the same bytes left at `capture_path`, on every execd
generation profile; a timeout, a capture path that cannot be written, and names a shell would
expand."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from deepagents.backends.sandbox import BaseSandbox

from deepagents_opensandbox_backend import DEFAULT_IMAGE, OpenSandboxBackend
from opensandbox_core import SandboxSpec
from opensandbox_core.adapters import run_blocking

ROOT = "/workspace/offload"

# (command, max_inline_bytes, max_capture_bytes)
CASES = [
    ("printf 'small'", 1000, None),
    ("printf 'out\\n'; printf 'err\\n' >&2; exit 7", 1000, None),
    ("seq 1 20000", 1000, None),
    ("head -c 9000 /dev/zero | tr '\\0' x", 1000, None),
    ("for i in 1 2 3; do head -c 3000 /dev/zero | tr '\\0' y; echo; done", 1000, None),
    ("seq 1 100000", 1000, 50_000),
    ("printf 'a\\r\\nb\\377\\376\\n\\n\\n'; seq 1 40; printf 'no newline'", 20, None),
    ("yes 'a line of output' | head -n 300000", 80_000, None),
]


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(p, marks=pytest.mark.testbed_daemon(p)) for p in ("1.0.19", "1.0.18", "1.1")
    ],
)
def offload_backend(
    request: pytest.FixtureRequest, testbed_env: dict[str, str]
) -> Iterator[OpenSandboxBackend]:
    # The profile is the container's environment (`env` is every command's, not the daemon's).
    spec = SandboxSpec(image=DEFAULT_IMAGE, container_env={"OSB_EXECD_PROFILE": request.param})
    with OpenSandboxBackend.create(spec=spec) as backend:
        yield backend


def _file(backend: OpenSandboxBackend, path: str) -> bytes | None:
    (got,) = backend.download_files([path])
    return got.content


def test_offload_matches_base_sandbox(offload_backend: OpenSandboxBackend) -> None:
    for i, (command, inline, cap) in enumerate(CASES):
        ours_path, theirs_path = f"{ROOT}/ours/{i}", f"{ROOT}/theirs/{i}"
        ours = offload_backend.execute_with_offload(
            command, ours_path, max_inline_bytes=inline, max_capture_bytes=cap
        )
        theirs = BaseSandbox.execute_with_offload(
            offload_backend, command, theirs_path, max_inline_bytes=inline, max_capture_bytes=cap
        )
        assert ours == theirs, command
        assert _file(offload_backend, ours_path) == _file(offload_backend, theirs_path), command
        assert (_file(offload_backend, ours_path) is not None) == ours.offloaded


async def test_aexecute_with_offload(offload_backend: OpenSandboxBackend) -> None:
    path = f"{ROOT}/async-{uuid.uuid4().hex}"
    result = await offload_backend.aexecute_with_offload("seq 1 50000", path, max_inline_bytes=100)
    assert result.offloaded and result.preview_has_truncation_marker
    assert result.response.exit_code == 0 and not result.response.truncated
    assert result.response.output.startswith("1\n2\n3\n4\n5\n... [49990 lines truncated] ...\n")
    whole = "".join(f"{n}\n" for n in range(1, 50001)).encode()
    assert _file(offload_backend, path) == whole


def test_edge_cases(offload_backend: OpenSandboxBackend) -> None:
    # A timed-out command: reported like execute() reports one, its output kept in the file
    # (but for what `head` still buffered when it was stopped: at most a few KiB).
    path = f"{ROOT}/timeout"
    stopped = offload_backend.execute_with_offload(
        "seq 1 10000; sleep 30", path, max_inline_bytes=10, timeout=2
    )
    assert not stopped.offloaded and stopped.response.exit_code == 124
    assert path in stopped.response.output
    printed = "".join(f"{n}\n" for n in range(1, 10001)).encode()
    kept = _file(offload_backend, path) or b""
    assert printed.startswith(kept) and len(kept) >= len(printed) - 8192
    # A capture path that cannot be written (a directory): the output comes back whole.
    run_blocking(offload_backend.session.files.make_dir(f"{ROOT}/a-dir"))
    whole = offload_backend.execute_with_offload("seq 1 1000", f"{ROOT}/a-dir", max_inline_bytes=10)
    assert not whole.offloaded and whole.response.output == "".join(
        f"{n}\n" for n in range(1, 1001)
    )
    # Names that a shell would expand are taken literally.
    odd = f"{ROOT}/$HOME and `id` 'q'"
    kept = offload_backend.execute_with_offload("seq 1 1000", odd, max_inline_bytes=10)
    assert (
        kept.offloaded
        and _file(offload_backend, odd) == "".join(f"{n}\n" for n in range(1, 1001)).encode()
    )


def test_a_small_output_leaves_the_path_free_at_once(offload_backend: OpenSandboxBackend) -> None:
    # A small output's file is deleted before the call returns, never later: the same path
    # reused at once (the next command's output, or a file the agent writes there) is kept.
    path = f"{ROOT}/reused-{uuid.uuid4().hex}"
    for i in range(5):
        small = offload_backend.execute_with_offload(f"echo small {i}", path, max_inline_bytes=100)
        assert not small.offloaded and small.response.output == f"small {i}\n"
        assert _file(offload_backend, path) is None
    offload_backend.execute_with_offload("echo small", path, max_inline_bytes=100)
    (written,) = offload_backend.upload_files([(path, b"kept")])
    assert written.error is None
    big = offload_backend.execute_with_offload("seq 1 1000", path + ".big", max_inline_bytes=10)
    assert big.offloaded  # another round trip: a late delete of `path` would have landed by now
    assert _file(offload_backend, path) == b"kept"
