"""Awkward paths and sizes through the backend's file API."""

from __future__ import annotations

import hashlib
import os
import shlex

import pytest
from deepagents.backends.sandbox import BaseSandbox

from deepagents_opensandbox_backend import OpenSandboxBackend

ROOT = "/workspace/bad-input"


def test_relative_and_traversing_paths_fail_alone(backend: OpenSandboxBackend) -> None:
    good = f"{ROOT}/good.txt"
    up = backend.upload_files(
        [("rel.txt", b"a"), (good, b"ok"), ("../etc/x", b"b"), ("./x", b"c"), ("", b"d")]
    )
    assert [r.error for r in up] == [
        "invalid_path",
        None,
        "invalid_path",
        "invalid_path",
        "invalid_path",
    ]
    assert [r.path for r in up] == ["rel.txt", good, "../etc/x", "./x", ""]
    down = backend.download_files(["rel.txt", good, "../../etc/passwd", f"{ROOT}/nul\0.txt"])
    assert [(d.error, d.content) for d in down] == [
        ("invalid_path", None),
        (None, b"ok"),
        ("invalid_path", None),
        ("invalid_path", None),
    ]
    # Nothing was written relative to the working directory.
    assert backend.execute("test -e /workspace/rel.txt").exit_code == 1
    assert (
        backend.write("relative.txt", "x").error
        == "Failed to write file 'relative.txt': invalid_path"
    )


def test_absolute_paths_with_dot_dot_resolve_like_the_kernel(backend: OpenSandboxBackend) -> None:
    assert backend.upload_files([(f"{ROOT}/sub/../up.txt", b"up")])[0].error is None
    assert backend.download_files([f"{ROOT}/up.txt"])[0].content == b"up"
    assert backend.download_files([f"{ROOT}/sub/../up.txt"])[0].content == b"up"


@pytest.mark.parametrize(
    "name",
    [
        "with space.txt",
        "single'quote.txt",
        'double"quote.txt',
        "tab\there.txt",
        "héllo wörld 世界 🎉.txt",
        "$(touch pwned).txt",
        "-leading-dash.txt",
        "back\\slash.txt",
    ],
)
def test_awkward_names_round_trip(backend: OpenSandboxBackend, name: str) -> None:
    path = f"{ROOT}/names/{name}"
    data = name.encode() + b"\x00\xff"
    assert backend.upload_files([(path, data)])[0].error is None
    assert backend.download_files([path])[0].content == data
    assert backend.write(path, "text " + name).error is None
    read = backend.read(path)
    assert read.error is None and read.file_data is not None
    assert read.file_data["content"] == "text " + name
    assert backend.execute("test -e /workspace/pwned").exit_code == 1


def test_newline_in_a_name(backend: OpenSandboxBackend) -> None:
    path = f"{ROOT}/names/new\nline.txt"
    assert backend.upload_files([(path, b"\x00nl\xff")])[0].error is None
    assert backend.execute(f"base64 {shlex.quote(path)}").output == "AG5s/w==\n"
    assert backend.write(path, "text").error is None
    assert backend.execute(f"cat {shlex.quote(path)}").output == "text"


def test_newline_in_a_name_download(backend: OpenSandboxBackend) -> None:
    path = f"{ROOT}/names/new\nline2.txt"
    backend.upload_files([(path, b"x")])
    assert backend.download_files([path])[0].content == b"x"


def test_directories_where_files_are_expected(backend: OpenSandboxBackend) -> None:
    backend.execute(f"mkdir -p {ROOT}/adir")
    assert backend.upload_files([(f"{ROOT}/adir", b"x")])[0].error == "is_directory"
    assert backend.download_files([f"{ROOT}/adir"])[0].error == "is_directory"
    assert (
        backend.write(f"{ROOT}/adir", "x").error
        == f"Failed to write file '{ROOT}/adir': is_directory"
    )
    assert backend.read(f"{ROOT}/adir").error == f"File '{ROOT}/adir': not_a_file"
    assert backend.read(f"{ROOT}/adir") == BaseSandbox.read(backend, f"{ROOT}/adir")
    # A regular file where a directory is expected.
    backend.upload_files([(f"{ROOT}/afile", b"x")])
    assert backend.upload_files([(f"{ROOT}/afile/child", b"x")])[0].error == "invalid_path"
    assert backend.download_files([f"{ROOT}/afile/child"])[0].error == "invalid_path"


def test_missing_and_unreadable(backend: OpenSandboxBackend) -> None:
    missing = f"{ROOT}/missing.txt"
    assert backend.download_files([missing])[0].error == "file_not_found"
    assert backend.read(missing) == BaseSandbox.read(backend, missing)
    assert backend.read(missing).error == f"File '{missing}': file_not_found"


def test_read_pages_match_base_sandbox(backend: OpenSandboxBackend) -> None:
    path = f"{ROOT}/pages.txt"
    text = "".join(f"line {i}\r\n" if i % 3 else f"línea {i}\n" for i in range(3000))
    backend.write(path, text)
    for offset, limit in [(0, 2000), (10, 5), (2999, 10), (3000, 1), (5000, 2), (-1, 3), (0, 0)]:
        assert backend.read(path, offset, limit) == BaseSandbox.read(backend, path, offset, limit)


def test_big_file_reads_are_paged_in_the_sandbox(backend: OpenSandboxBackend) -> None:
    path = f"{ROOT}/big.log"
    backend.execute(f"seq 1 2000000 > {path}")  # ~14 MB: over the native read limit
    page = backend.read(path, 1_999_990, 5)
    assert page == BaseSandbox.read(backend, path, 1_999_990, 5)
    assert (
        page.file_data is not None
        and page.file_data["content"] == "1999991\n1999992\n1999993\n1999994\n1999995"
    )


def test_hundred_mib_round_trip(backend: OpenSandboxBackend) -> None:
    data = os.urandom(1 << 20) * 100
    digest = hashlib.sha256(data).hexdigest()
    path = f"{ROOT}/big.bin"
    assert backend.upload_files([(path, data)])[0].error is None
    assert backend.execute(f"sha256sum {path}").output.split()[0] == digest
    [down] = backend.download_files([path])
    assert down.error is None and down.content is not None
    assert len(down.content) == len(data)
    assert hashlib.sha256(down.content).hexdigest() == digest
    backend.execute(f"rm -f {path}")
