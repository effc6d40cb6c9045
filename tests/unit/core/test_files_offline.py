"""The core's file side without a server, on both recorded execd generations.

Two kinds of test:
- replay: execd's recorded answers (`tests/data/execd-recordings/`, v1.0.19 and v1.0.18), served
  byte for byte by an httpx `MockTransport`, and what the core makes of them (FileInfo fields,
  the path error, the file API it detects);
- fallbacks: a stand-in for execd's file routes on a temporary directory of this machine (its
  `/files/info` and `/directories/list` answer like the recorded generation: v1.0.18's are the
  recorded answers), with the session's commands run here for real (GNU find, realpath, mv,
  chmod). Every HTTP request is checked: none may carry a `$`, which execd would expand.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import json
import os
import re
import shutil
import stat as stat_module
import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from opensandbox_core import AsyncSandboxSession, CommandResult, Connection
from opensandbox_core._errors import path_error
from opensandbox_core._files import _fallback as _files
from opensandbox_core._files import _portable
from opensandbox_core._files._filesystem import file_api_cache as _file_api_cache
from opensandbox_core._lifecycle._sandbox import LoopClients as _LoopClients
from opensandbox_core._lifecycle._sandbox import Ready as _Ready
from opensandbox_core._wire._execd import ExecdClient, ExecdEndpoint
from opensandbox_core._wire._framing import Framing

RECORDINGS = Path(__file__).resolve().parents[2] / "data" / "execd-recordings"
VERSIONS = ("v1.0.19", "v1.0.18")
OFFLINE = Connection(domain="offline:1", api_key="offline-test-key")


@cache
def _recording(version: str) -> dict[str, Any]:
    with open(RECORDINGS / f"{version}.json", encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def recorded(version: str, case: str, note: str) -> dict[str, Any]:
    """The recorded exchange of `case` whose note is `note`."""
    for item in _recording(version)["cases"]:
        if item["name"] == case:
            for exchange in item["exchanges"]:
                if exchange.get("note") == note:
                    result: dict[str, Any] = exchange
                    return result
    raise KeyError((version, case, note))


def replay(exchange: Mapping[str, Any]) -> httpx.Response:
    """The recorded response, byte for byte (framing headers are httpx's to set)."""
    answer = exchange["response"]
    if "body_b64" in answer:
        body = base64.b64decode(answer["body_b64"])
    else:
        body = str(answer.get("body_text") or "").encode()
    skip = {"content-length", "transfer-encoding"}
    headers = [(k, v) for k, v in answer["headers"] if k.lower() not in skip]
    return httpx.Response(answer["status"], headers=headers, content=body)


def _upload_parts(body: bytes, content_type: str) -> list[tuple[dict[str, Any], bytes]]:
    """The (metadata, content) pairs of an upload, in order (the core's atomic write may send a
    marker file after the content)."""
    boundary = content_type.split("boundary=", 1)[1].encode()
    parts = body.split(b"--" + boundary)[1:-1]
    pairs = []
    for meta_part, file_part in zip(parts[::2], parts[1::2], strict=True):
        meta = json.loads(meta_part.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n", 1)[0])
        pairs.append((meta, file_part.split(b"\r\n\r\n", 1)[1][: -len(b"\r\n")]))
    return pairs


class FakeExecd:
    """execd's file routes on this machine's file system, answering like `version`."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.requests: list[tuple[str, str, list[tuple[str, str]]]] = []
        self.overrides: dict[
            tuple[str, str, str | None], httpx.Response | list[httpx.Response]
        ] = {}

    @property
    def modern(self) -> bool:
        return self.version == "v1.0.19"

    def count(self, method: str, route: str, path: str | None = None) -> int:
        return sum(
            1
            for m, r, q in self.requests
            if m == method and r == route and (path is None or ("path", path) in q)
        )

    def handler(self, request: httpx.Request) -> httpx.Response:
        url = urlsplit(str(request.url))
        query = parse_qsl(url.query, keep_blank_values=True)
        self.requests.append((request.method, url.path, query))
        paths = [v for k, v in query if k == "path"]
        body = request.read()
        if request.method == "POST" and url.path == "/files/upload":
            pairs = _upload_parts(body, request.headers["content-type"])
            paths += [meta["path"] for meta, _ in pairs]
        elif request.method == "POST" and body:
            text = body.decode()
            assert "$" not in text, f"a `$` reached execd: {text!r}"
        for path in paths:
            assert "$" not in path, f"a `$` reached execd: {path!r}"
        key = (request.method, url.path, paths[0] if paths else None)
        if key in self.overrides:
            answer = self.overrides[key]
            if isinstance(answer, list):  # answered in turn, the last one from then on
                return answer.pop(0) if len(answer) > 1 else answer[0]
            return answer
        if url.path == "/files/info":
            if paths == ["/"]:
                return replay(recorded(self.version, "files_info", "dir"))
            return self._info(paths[0])
        if url.path == "/directories/list":
            if not self.modern:
                return replay(recorded(self.version, "dirs_list", "depth default"))
            return self._list(paths[0])
        if url.path == "/files/upload":
            for meta, content in pairs:  # one after the other, each to its end, as execd does
                target = Path(meta["path"])
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                except (NotADirectoryError, FileExistsError):  # recorded: files_special
                    parent = target.parent
                    message = (
                        f"error creating target directory {parent}. mkdir {parent}: not a directory"
                    )
                    return httpx.Response(500, json={"code": "RUNTIME_ERROR", "message": message})
                target.write_bytes(content)
                os.chmod(target, int(str(meta["mode"]), 8) & 0o777)
            return httpx.Response(200)
        if url.path == "/files/mv":
            (move,) = json.loads(body)
            if os.path.lexists(move["dest"]):
                return httpx.Response(500, json={"code": "RUNTIME_ERROR", "message": "exists"})
            os.rename(move["src"], move["dest"])
            return httpx.Response(200)
        if url.path == "/files/download":
            try:
                return httpx.Response(200, content=Path(paths[0]).read_bytes())
            except FileNotFoundError:
                return httpx.Response(404, json={"code": "FILE_NOT_FOUND", "message": "gone"})
        if url.path == "/directories" and request.method == "POST":
            for path, spec in json.loads(body).items():
                os.makedirs(path, exist_ok=True)
                os.chmod(path, int(str(spec["mode"]), 8))
            return httpx.Response(200)
        if url.path in ("/files", "/directories") and request.method == "DELETE":
            for path in paths:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                elif os.path.lexists(path):
                    os.remove(path)
            return httpx.Response(200)
        raise AssertionError(f"unexpected request {request.method} {request.url}")

    def _entry(self, path: str) -> dict[str, Any]:
        st = os.lstat(path)
        if stat_module.S_ISLNK(st.st_mode):
            kind = "symlink"
        elif stat_module.S_ISDIR(st.st_mode):
            kind = "directory"
        elif stat_module.S_ISREG(st.st_mode):
            kind = "file"
        else:
            kind = "other"
        mtime = datetime.fromtimestamp(st.st_mtime, UTC).isoformat()
        return {
            "path": os.path.normpath(path),
            "type": kind,
            "size": st.st_size,
            "modified_at": mtime,
            "owner": "root",
            "group": "root",
            "mode": int(format(st.st_mode & 0o777, "o")),
        }

    def _info(self, path: str) -> httpx.Response:
        assert self.modern, "v1.0.18's /files/info cannot tell; the core must not ask it"
        try:
            return httpx.Response(200, json={path: self._entry(path)})
        except FileNotFoundError:
            message = f"file not found. file not found: {path}: lstat {path}: no such file"
            return httpx.Response(404, json={"code": "FILE_NOT_FOUND", "message": message})
        except NotADirectoryError:
            message = f"error accessing file: lstat {path}: not a directory"
            return httpx.Response(500, json={"code": "RUNTIME_ERROR", "message": message})

    def _list(self, path: str) -> httpx.Response:
        if os.path.islink(path):
            message = f"path is a symbolic link, refusing to traverse: {path}"
            return httpx.Response(400, json={"code": "INVALID_REQUEST_BODY", "message": message})
        if not os.path.isdir(path):
            message = f"path is not a directory: {path}"
            return httpx.Response(400, json={"code": "INVALID_REQUEST_BODY", "message": message})
        entries = [self._entry(os.path.join(path, n)) for n in sorted(os.listdir(path))]
        return httpx.Response(200, json=entries)


class Commands:
    """The commands facet's `run`, run on this machine: argv commands, and the one shell text
    the files facet sends (the atomic write's rename, `_files._rename`: its paths are quoted
    positional arguments), by bash."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.argvs: list[list[str]] = []

    async def __call__(
        self, command: str | Sequence[str], **kwargs: Any
    ) -> CommandResult:  # same keywords as Commands.run
        if isinstance(command, str):
            assert command.startswith("set -- ") and "exec mv -f" in command, command
            argv = ["bash", "-c", command]
        else:
            argv = list(command)
        self.argvs.append(argv)
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=self.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            stdout, stderr = await process.communicate()
        except BaseException:  # a cancelled command is stopped, as the session's interrupt does
            process.kill()
            await process.wait()
            raise
        done = subprocess.CompletedProcess(argv, process.returncode or 0, stdout, stderr)
        cleanup = kwargs.get("cleanup")
        if cleanup is not None:  # what execd's DELETE does once the upload has ended
            if cleanup.after is not None:
                await asyncio.wait([asyncio.ensure_future(cleanup.after)])
            for path in cleanup.paths:
                Path(path).unlink(missing_ok=True)
        return CommandResult(
            exit_code=done.returncode,
            stdout=done.stdout.decode("utf-8", "replace"),
            stderr=done.stderr.decode("utf-8", "replace"),
        )


Offline = tuple[AsyncSandboxSession, FakeExecd, Commands]


def _session(version: str, workdir: Path, sandbox_id: str) -> Offline:
    daemon = FakeExecd(version)
    commands = Commands(workdir)
    session = AsyncSandboxSession.attach(sandbox_id, connection=OFFLINE)
    endpoint = ExecdEndpoint(base_url="http://execd.offline", headers={})
    execd = ExecdClient(endpoint, transport=httpx.MockTransport(daemon.handler), request_timeout=10)
    session._life.ready = _Ready(
        endpoint=endpoint, framing=Framing.LEGACY, working_dir=str(workdir)
    )
    sdk_config: Any = None
    sandboxes: Any = None
    session._life.loops[asyncio.get_running_loop()] = _LoopClients(
        sdk_config=sdk_config, sandboxes=sandboxes, execd=execd
    )
    session._runner.run = commands  # type: ignore[method-assign]
    return session, daemon, commands


@pytest.fixture(params=VERSIONS)
async def offline(request: pytest.FixtureRequest, tmp_path: Path) -> Offline:
    version: str = request.param
    return _session(version, tmp_path, f"offline-{version}-{os.urandom(4).hex()}")


# -- replay: what the core makes of execd's recorded answers ----------------------------------


@pytest.mark.parametrize(
    ("version", "modern"), [("v1.0.19", True), ("v1.0.18", False)], ids=["1.0.19", "1.0.18"]
)
def test_file_api_detected_from_the_recorded_info_of_a_directory(
    version: str, modern: bool
) -> None:
    body = json.loads(recorded(version, "files_info", "dir")["response"]["body_text"])
    assert _files.FileApi.from_root_info(body) == _files.FileApi(lstat_info=modern, has_list=modern)


@pytest.mark.parametrize(
    ("case", "note"),
    [
        ("files_info", "missing.txt"),
        ("files_info", "dangling"),
        ("files_info", "relative path (to the daemon's cwd)"),
        ("files_mv", "missing source"),
    ],
)
def test_recorded_missing_path_errors_are_file_not_found(case: str, note: str) -> None:
    statuses = []
    for version in VERSIONS:
        answer = recorded(version, case, note)["response"]
        statuses.append(answer["status"])
        if answer["status"] == 200:  # v1.0.19's info of a dangling symlink: the link itself
            continue
        message = json.loads(answer["body_text"])["message"]
        mapped = path_error(message, "/x")
        assert isinstance(mapped, FileNotFoundError), (version, message)
        assert mapped.errno == errno.ENOENT and mapped.filename == "/x"
    assert statuses[1] == 500  # v1.0.18 answers every one of them with a 500


async def test_stat_parses_the_recorded_v1_0_19_info(tmp_path: Path) -> None:
    session, daemon, commands = _session("v1.0.19", tmp_path, "replay-19")
    path = "/tmp/execd-rec/scratch/f/file.txt"
    daemon.overrides[("GET", "/files/info", path)] = replay(
        recorded("v1.0.19", "files_info", "file.txt")
    )
    info = await session.files.stat(path)
    assert (info.kind, info.size, info.mode, info.is_file, info.is_dir) == (
        "file",
        12,
        0o644,
        True,
        False,
    )
    assert (info.owner, info.group) == ("root", "root")
    assert info.modified_at == datetime(2026, 12, 3, 8, 22, 13, 181827, tzinfo=UTC)
    assert commands.argvs == []  # no command: v1.0.19's info says it all
    missing = "/tmp/execd-rec/scratch/f/missing.txt"
    daemon.overrides[("GET", "/files/info", missing)] = replay(
        recorded("v1.0.19", "files_info", "missing.txt")
    )
    with pytest.raises(FileNotFoundError):
        await session.files.stat(missing)
    assert not await session.files.exists(missing)


async def test_v1_0_18_is_detected_once_and_never_asked_for_info(tmp_path: Path) -> None:
    session, daemon, commands = _session("v1.0.18", tmp_path, "replay-18")
    (tmp_path / "file.txt").write_bytes(b"hello\nworld\n")
    os.symlink("file.txt", tmp_path / "link")
    os.symlink("missing.txt", tmp_path / "dangling")
    info = await session.files.stat("file.txt")
    assert (info.kind, info.size, info.mode, info.is_file) == ("file", 12, 0o644, True)
    link = await session.files.stat("link")
    assert (link.kind, link.size, link.mode, link.is_file, link.is_dir) == (
        "symlink",
        8,
        0o777,
        True,
        False,
    )
    dangling = await session.files.stat("dangling")
    assert (dangling.kind, dangling.is_file, dangling.is_dir) == ("symlink", False, False)
    assert await session.files.exists("dangling")
    assert not await session.files.exists("missing.txt")
    assert not await session.files.exists("file.txt/child")
    with pytest.raises(FileNotFoundError):
        await session.files.stat("missing.txt")
    with pytest.raises(NotADirectoryError):
        await session.files.stat("file.txt/child")
    assert daemon.count("GET", "/files/info") == 1  # only the detection, of "/"
    assert daemon.count("GET", "/files/info", "/") == 1
    probes = [argv for argv in commands.argvs if argv[2:] == _portable.GNU_PROBE]
    assert len(probes) == 1  # the tools are asked about once: GNU here
    rest = [argv for argv in commands.argvs if argv[2:] != _portable.GNU_PROBE]
    assert all(argv[:3] == ["env", "LC_ALL=C", "find"] for argv in rest)


async def test_a_missing_list_route_is_learnt_once(tmp_path: Path) -> None:
    session, daemon, _ = _session("v1.0.19", tmp_path, "replay-no-list")
    daemon.overrides[("GET", "/directories/list", str(tmp_path))] = replay(
        recorded("v1.0.18", "dirs_list", "depth default")
    )
    (tmp_path / "a.txt").write_bytes(b"aa")
    (tmp_path / "sub").mkdir()
    for _ in range(2):
        entries = await session.files.list_dir(str(tmp_path))
        assert [(e.name, e.kind, e.is_dir) for e in entries] == [
            ("a.txt", "file", False),
            ("sub", "directory", True),
        ]
    assert daemon.count("GET", "/directories/list") == 1


async def test_an_entry_vanishing_during_a_listing_is_listed_again(tmp_path: Path) -> None:
    """execd fails a whole listing with a 500 when an entry vanishes between its readdir and its
    lstat (the raw output files the session deletes in the background, in /tmp): asked again."""
    session, daemon, _ = _session("v1.0.19", tmp_path, "replay-vanish")
    (tmp_path / "a.txt").write_bytes(b"aa")
    gone = str(tmp_path / "x.stderr")
    vanished = httpx.Response(
        500,
        json={
            "code": "RUNTIME_ERROR",
            "message": f"error listing directory {tmp_path}. lstat {gone}: no such file or directory",
        },
    )
    real = daemon.handler(httpx.Request("GET", f"http://x/directories/list?path={tmp_path}"))
    daemon.overrides[("GET", "/directories/list", str(tmp_path))] = [vanished, real]
    entries = await session.files.list_dir(str(tmp_path))
    assert [e.name for e in entries] == ["a.txt"]
    assert daemon.count("GET", "/directories/list", str(tmp_path)) == 3  # 1 to build `real`
    # A listing of a directory that is itself missing is not retried.
    missing = str(tmp_path / "missing")
    daemon.overrides[("GET", "/directories/list", missing)] = httpx.Response(
        404, json={"code": "FILE_NOT_FOUND", "message": f"lstat {missing}: no such file"}
    )
    with pytest.raises(FileNotFoundError):
        await session.files.list_dir(missing)
    assert daemon.count("GET", "/directories/list", missing) == 1


# -- fallbacks, on both generations --------------------------------------------------------------


async def test_list_dir(offline: Offline, tmp_path: Path) -> None:
    session, _, _ = offline
    (tmp_path / "ls").mkdir()
    (tmp_path / "ls" / "b.txt").write_bytes(b"b")
    (tmp_path / "ls" / "a.txt").write_bytes(b"aa")
    (tmp_path / "ls" / "sub").mkdir()
    os.symlink("sub", tmp_path / "ls" / "dlink")
    os.symlink("nowhere", tmp_path / "ls" / "dangling")
    (tmp_path / "ls" / "new\nline").write_bytes(b"")
    os.symlink("ls", tmp_path / "lslink")
    expected = [
        ("a.txt", "file", False, True, 2),
        ("b.txt", "file", False, True, 1),
        ("dangling", "symlink", False, False, 7),
        ("dlink", "symlink", True, False, 3),
        ("new\nline", "file", False, True, 0),
        ("sub", "directory", True, False, None),
    ]
    for path in ("ls", "lslink", f"{tmp_path}/ls/sub/.."):
        entries = await session.files.list_dir(path)
        got = [(e.name, e.kind, e.is_dir, e.is_file, None if e.is_dir else e.size) for e in entries]
        assert got == [(n, k, d, f, None if d else s) for n, k, d, f, s in expected], path
    assert {e.path for e in await session.files.list_dir("lslink")} == {
        f"{tmp_path}/lslink/{name}" for name, *_ in expected
    }
    with pytest.raises(NotADirectoryError):
        await session.files.list_dir("ls/a.txt")
    with pytest.raises(FileNotFoundError):
        await session.files.list_dir("ls/missing")
    with pytest.raises(FileNotFoundError):
        await session.files.list_dir("ls/dangling")


async def test_write_read_and_modes(offline: Offline, tmp_path: Path) -> None:
    session, _, _ = offline
    data = bytes(range(256)) * 16
    await session.files.write_bytes("deep/er/data.bin", data)
    assert (tmp_path / "deep/er/data.bin").read_bytes() == data
    assert await session.files.read_bytes("deep/er/data.bin") == data
    info = await session.files.stat("deep/er/data.bin")
    assert (info.size, info.mode, info.kind) == (len(data), 0o644, "file")
    # An overwrite keeps the whole mode, setuid included; a new setgid mode is applied.
    os.chmod(tmp_path / "deep/er/data.bin", 0o4750)  # noqa: S103 - a test file
    await session.files.write_bytes("deep/er/data.bin", b"v2")
    assert stat_module.S_IMODE(os.stat(tmp_path / "deep/er/data.bin").st_mode) == 0o4750
    await session.files.write_bytes("sgid.sh", b"#!/bin/sh\n", mode=0o2755)
    assert stat_module.S_IMODE(os.stat(tmp_path / "sgid.sh").st_mode) == 0o2755
    assert (await session.files.stat("sgid.sh")).mode == 0o755  # execd reports the 0o777 bits only
    assert not [p for p in os.listdir(tmp_path) if ".osb-" in p]


async def test_writes_go_through_symlinks_and_loops_fail(offline: Offline, tmp_path: Path) -> None:
    session, _, _ = offline
    (tmp_path / "target").write_bytes(b"old")
    os.symlink("target", tmp_path / "link")
    os.symlink("loop", tmp_path / "loop")
    await session.files.write_bytes("link", b"new")
    assert (tmp_path / "target").read_bytes() == b"new"
    assert os.path.islink(tmp_path / "link")
    with pytest.raises(OSError) as caught:
        await session.files.write_bytes("loop", b"x")
    assert caught.value.errno == errno.ELOOP
    with pytest.raises(IsADirectoryError):
        await session.files.write_bytes(".", b"x")


@pytest.mark.parametrize(
    "name",
    ["price$5.txt", "pid$$.txt", "brace${}.txt", "x$HOME", "${HOME}", "ends-with$", "~", "~user"],
)
async def test_dollar_names_are_written_exactly(
    offline: Offline, tmp_path: Path, name: str
) -> None:
    session, daemon, commands = offline
    for path in (name, f"dir$1/{name}", f"{tmp_path}/$x/{{y}}/{name}"):
        data = f"content of {path}".encode()
        await session.files.write_bytes(path, data)
        on_disk = Path(path if path.startswith("/") else tmp_path / path)
        assert on_disk.read_bytes() == data, path
        assert await session.files.read_bytes(path) == data
        info = await session.files.stat(path)
        assert (info.kind, info.size, info.path.endswith(name)) == ("file", len(data), True)
        assert name in [e.name for e in await session.files.list_dir(os.path.dirname(path) or ".")]
        await session.files.write_bytes(path, b"again")
        assert on_disk.read_bytes() == b"again"
        await session.files.remove(path)
        assert not on_disk.exists() and not await session.files.exists(path)
    await session.files.make_dir(f"made$1/{name}")
    assert (tmp_path / f"made$1/{name}").is_dir()
    await session.files.remove(f"made$1/{name}", recursive=False)
    await session.files.remove("made$1")
    assert sorted(os.listdir(tmp_path)) == ["$x", "dir$1"]
    assert not [r for r in daemon.requests if "$" in str(r)]
    assert not _links_left(commands, daemon)


async def test_dotdot_resolves_like_the_kernel(offline: Offline, tmp_path: Path) -> None:
    session, _, _ = offline
    (tmp_path / "real" / "inner").mkdir(parents=True)
    os.symlink("real/inner", tmp_path / "jump")
    # jump/.. is real (the symlink's target's parent), not the working dir.
    await session.files.write_bytes("jump/../via-link.txt", b"x")
    assert (tmp_path / "real" / "via-link.txt").read_bytes() == b"x"
    assert await session.files.read_bytes(f"{tmp_path}/jump/../via-link.txt") == b"x"
    # A missing directory before `..` is made by writes (as `mkdir -p` of the parent would make
    # it), and is FileNotFoundError for reads.
    await session.files.write_bytes("missing-dir/../up.txt", b"y")
    assert (tmp_path / "up.txt").read_bytes() == b"y"
    assert (tmp_path / "missing-dir").is_dir()
    assert await session.files.read_bytes("missing-dir/../up.txt") == b"y"
    with pytest.raises(FileNotFoundError):
        await session.files.read_bytes("other-missing/../up.txt")
    assert not await session.files.exists("other-missing/../up.txt")
    with pytest.raises(ValueError):
        await session.files.remove(f"{tmp_path}/real/..")


async def test_remove(offline: Offline, tmp_path: Path) -> None:
    session, _, _ = offline
    (tmp_path / "tree" / "a").mkdir(parents=True)
    (tmp_path / "tree" / "a" / "b.txt").write_bytes(b"x")
    (tmp_path / "empty").mkdir()
    os.symlink("tree", tmp_path / "treelink")
    with pytest.raises(OSError) as caught:
        await session.files.remove("tree", recursive=False)
    assert caught.value.errno == errno.ENOTEMPTY
    await session.files.remove("empty", recursive=False)
    await session.files.remove("treelink")
    assert (tmp_path / "tree" / "a" / "b.txt").exists() and not os.path.lexists(
        tmp_path / "treelink"
    )
    await session.files.remove("tree")
    assert os.listdir(tmp_path) == []
    with pytest.raises(FileNotFoundError):
        await session.files.remove("tree")


async def test_make_dir(offline: Offline, tmp_path: Path) -> None:
    session, _, _ = offline
    (tmp_path / "file").write_bytes(b"")
    await session.files.make_dir("a/b/c")
    assert (tmp_path / "a/b/c").is_dir()
    await session.files.make_dir("a/b/c")
    with pytest.raises(FileExistsError):
        await session.files.make_dir("a/b/c", exist_ok=False)
    with pytest.raises(FileExistsError):
        await session.files.make_dir("file")
    with pytest.raises(FileNotFoundError):
        await session.files.make_dir("x/y", parents=False)


async def test_control_characters_are_read_through_a_plain_name(
    offline: Offline, tmp_path: Path
) -> None:
    session, daemon, commands = offline
    (tmp_path / "a\x01\x7fb").write_bytes(b"odd")
    assert await session.files.read_bytes("a\x01\x7fb") == b"odd"
    downloads = [q for m, r, q in daemon.requests if r == "/files/download"]
    assert downloads and all(v.startswith("/tmp/.osb-link-") for q in downloads for _, v in q)
    assert not _links_left(commands, daemon)
    assert any(argv[:2] == ["rm", "-f"] for argv in commands.argvs)


def _links_left(commands: Commands, daemon: Any) -> list[str]:
    """The `/tmp/.osb-link-*` aliases this test's session named (in a command or a request)
    that still exist. Only its own: other tests running at the same time make theirs."""
    named = {
        word
        for text in [*map(str, commands.argvs), *map(str, daemon.requests)]
        for word in re.findall(r"/tmp/\.osb-link-[\w.-]+", text)
    }
    assert named, "the session named no alias: the check below would prove nothing"
    return sorted(path for path in named if os.path.lexists(path))


# -- pure rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/a/b", None),
        ("/a/../b", ("/a/..", "b")),
        ("/a/b/../../c/./d/", ("/a/b/../..", "c/d/")),
        ("/..", ("/..", "")),
        ("/a/..b/c", None),
    ],
)
def test_dotdot_split(path: str, expected: tuple[str, str] | None) -> None:
    assert _files.dotdot_split(path) == expected


@pytest.mark.parametrize(
    ("path", "literal", "download_safe", "anchor"),
    [
        ("/w/plain.txt", True, True, "/w"),
        ("/w/price$5.txt", False, False, "/w"),
        ("/w/$x/y/z", False, False, "/w"),
        ("/w/~", True, True, "/w"),
        ("/w/~/$y", False, False, "/w/~"),
        ("/w/a\x01b", True, False, "/w"),
        ("/w\x01/b", True, True, "/w\x01"),
    ],
)
def test_path_predicates(path: str, literal: bool, download_safe: bool, anchor: str) -> None:
    assert _files.literal(path) is literal
    assert _files.download_safe(path) is download_safe
    assert _files.literal_anchor(path) == anchor


def test_records_parse_real_find_output(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"12345")
    os.chmod(tmp_path / "f", 0o4644)
    os.symlink("f", tmp_path / "l")
    os.mkfifo(tmp_path / "p")
    out = subprocess.run(
        _files.list_argv(str(tmp_path)), capture_output=True, check=True
    ).stdout.decode()
    records = {r.name: r for r in _files.parse_records(out)}
    root = records.pop(tmp_path.name)
    assert (root.kind, root.depth) == ("d", 0)
    assert {n: (r.kind, r.followed, r.size, r.mode) for n, r in records.items()} == {
        "f": ("f", "f", 5, 0o4644),
        "l": ("l", "f", 1, 0o777),
        "p": ("p", "p", 0, 0o644),
    }
    mtime = os.lstat(tmp_path / "f").st_mtime_ns
    assert records["f"].mtime == datetime.fromtimestamp(mtime // 10**9, UTC).replace(
        microsecond=(mtime % 10**9) // 1000
    )
    info = records["p"].info("/x/p")
    assert (info["type"], info["mode"], info["follow"]) == ("other", 644, (False, False))
    for bad in ("f/f/1", "x\0", "f/f/1/644/1.0/root/root/0/name"):
        with pytest.raises(ValueError):
            _files.parse_records(bad)


def test_with_cwd_enters_a_dollar_directory_literally(tmp_path: Path) -> None:
    odd = tmp_path / "$HOME dir"
    odd.mkdir()
    assert not _files.cwd_is_literal(str(odd)) and _files.cwd_is_literal(str(tmp_path))
    done = subprocess.run(
        ["bash", "-c", _files.with_cwd("pwd", str(odd))], capture_output=True, check=False
    )
    assert done.stdout.decode() == f"{odd}\n"
    missing = subprocess.run(
        ["bash", "-c", _files.with_cwd("echo ran", str(odd / "none"))],
        capture_output=True,
        check=False,
    )
    assert missing.returncode == 1 and b"ran" not in missing.stdout


@pytest.fixture(autouse=True)
def _forget_file_apis() -> Any:
    yield
    _file_api_cache.clear()


async def test_a_dollar_cwd_is_entered_by_the_command(tmp_path: Path) -> None:
    session, _, _ = _session("v1.0.19", tmp_path, "cwd-dollar")
    odd = tmp_path / "p$$q"
    odd.mkdir()
    (tmp_path / "file$1").write_bytes(b"")
    assert await session._runner.literal_cwd("ls -a", str(tmp_path)) == (
        "ls -a",
        str(tmp_path),
    )
    command, cwd = await session._runner.literal_cwd("pwd", str(odd))
    assert cwd == "/" and "$" not in cwd
    done = subprocess.run(["bash", "-c", command], capture_output=True, check=False, cwd="/")
    assert done.stdout.decode() == f"{odd}\n"
    with pytest.raises(FileNotFoundError):
        await session._runner.literal_cwd("pwd", str(tmp_path / "missing$1"))
    with pytest.raises(NotADirectoryError):
        await session._runner.literal_cwd("pwd", str(tmp_path / "file$1"))


async def test_a_tool_missing_from_the_image_is_no_path_error(tmp_path: Path) -> None:
    from opensandbox_core import ServerError

    session, _, commands = _session("v1.0.18", tmp_path, "no-find")

    async def missing_find(command: Sequence[str], **kwargs: Any) -> CommandResult:
        commands.argvs.append(list(command))
        return CommandResult(127, "", "env: 'find': No such file or directory\n")

    session._runner.run = missing_find  # type: ignore[method-assign]
    with pytest.raises(ServerError, match="find"):
        await session.files.stat("file.txt")
