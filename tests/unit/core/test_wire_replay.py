"""The core's wire layer against execd's RECORDED answers (tests/data/execd-recordings), offline.

An `httpx.MockTransport` plays a real execd (v1.0.19 and v1.0.18, line-framed): command streams
are the recorded responses, chunk for chunk and with their recorded timing, including the second
the daemon holds a stream open after its last event. The session is driven end to end (probe,
run, raw-output download, cleanup) with only the SDK's endpoint lookup replaced. The raw output
files of the `cmd_printf_*` cases hold what each `printf` writes; their sizes are checked against
the recorded directory listing, and their decoding against the real daemon's own event texts.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    CommandTimeoutError,
    Connection,
    UnsupportedDaemonError,
)
from opensandbox_core import _defaults as defaults
from opensandbox_core._commands._output import WARNED_REBUILT
from opensandbox_core._lifecycle import _reach
from opensandbox_core._lifecycle._sandbox import SandboxLifecycle
from opensandbox_core._wire._execd import ExecdClient, ExecdEndpoint
from opensandbox_core._wire._framing import EventSplitter, decode_output

DATA = Path(__file__).resolve().parents[2] / "data" / "execd-recordings"
VERSIONS = ["v1.0.19", "v1.0.18"]
BASE_URL = "http://execd.replay"

# What each recorded `printf` case writes (its `what` text), byte for byte.
PRINTF = {
    "cmd_printf_no_final_newline": b"a\nb",
    "cmd_printf_final_newline": b"a\nb\n",
    "cmd_printf_crlf": b"a\r\nb\r\n",
    "cmd_printf_cr_progress": b"10%\r100%\n",
    "cmd_printf_blank_lines": b"\n\na\n\n\nb",
    "cmd_printf_lone_newline": b"\n",
    "cmd_printf_trailing_cr": b"a\r",
    "cmd_printf_nel": b"x\xc2\x85y\n",
    "cmd_printf_u2028_u2029": b"l\xe2\x80\xa8s\xe2\x80\xa9p\n",
    "cmd_printf_invalid_utf8": b"\xff\xfea\n",
    "cmd_printf_tab_nul": b"a\tb\x00c\x1b[1md\n",
}


# -- the recordings ---------------------------------------------------------------------------
@functools.cache
def recording(version: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{version}.json").read_text(encoding="utf-8"))
    return data


def case(version: str, name: str) -> dict[str, Any]:
    for item in recording(version)["cases"]:
        if item["name"] == name:
            return dict(item)
    raise KeyError(name)


def exchange(version: str, name: str, index: int = 0) -> dict[str, Any]:
    return dict(case(version, name)["exchanges"][index])


def chunks_of(response: dict[str, Any]) -> list[tuple[float, bytes]]:
    return [(float(ms), base64.b64decode(b64)) for ms, b64 in response.get("chunks", [])]


def body_of(response: dict[str, Any]) -> bytes:
    if "chunks" in response:
        return b"".join(chunk for _, chunk in chunks_of(response))
    if "body_b64" in response:
        return base64.b64decode(response["body_b64"])
    return str(response.get("body_text", "")).encode("utf-8")


def init_id(response: dict[str, Any]) -> str:
    first = json.loads(chunks_of(response)[0][1])
    assert first["type"] == "init"
    return str(first["text"])


def event_streams(version: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The command streams (`/command`, `/session/{id}/run`): `/metrics/watch` is labelled
    text/event-stream too but sends bare `JSON\\n` lines, and WebSocket exchanges (`/pty`)
    have frames, not chunks; the core reads neither as a command stream."""
    for item in recording(version)["cases"]:
        for ex in item["exchanges"]:
            if ex.get("kind") == "websocket" or not ex["request"]["target"].startswith(
                ("/command", "/session/")
            ):
                continue
            headers = dict(ex["response"]["headers"])
            if headers.get("Content-Type") == "text/event-stream" and "chunks" in ex["response"]:
                yield item["name"], ex["response"]


def recorded_sizes(version: str) -> dict[str, int]:
    """File sizes in the recorded listing of the daemon's temp dir (v1.0.19 has one)."""
    for ex in case(version, "cmd_raw_output_files")["exchanges"]:
        if ex["request"]["target"] == "/directories/list?path=/tmp":
            if ex["response"]["status"] != 200:
                return {}
            return {e["path"]: e["size"] for e in json.loads(body_of(ex["response"]))}
    return {}


# -- a replaying daemon -----------------------------------------------------------------------
def _event(kind: str, text: str | None = None, **extra: Any) -> bytes:
    event: dict[str, Any] = {"type": kind}
    if text is not None:
        event["text"] = text
    event.update(extra)
    event["timestamp"] = 1796111977327
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


class Replay:
    """Answers like execd from recorded responses; records every request it gets."""

    def __init__(self, *, framing: str = "legacy", tmp_dir: str = "/tmp") -> None:
        self.commands: deque[dict[str, Any]] = deque()
        self.status: deque[dict[str, Any]] = deque()
        self.interrupts: deque[dict[str, Any]] = deque()
        self.files: dict[str, bytes] = {}
        self.requests: list[httpx.Request] = []
        self.speed = 1.0
        probe_id = "0123456789abcdef0123456789abcdef"
        if framing == "modern":
            out = [_event("stdout", "osb\n\nprobe")]
        elif framing == "ancient":
            out = [_event("stdout", "osb"), _event("stdout", "probe")]
        else:
            out = [_event("stdout", t) for t in ("osb", "\n", "probe")]
        end = "\n" if framing == "modern" else ""  # modern events keep their line endings
        err = [_event("stderr", "/workspace" + end), _event("stderr", f"osb-tmp:{tmp_dir}" + end)]
        events = [_event("init", probe_id), _event("ping", "pong"), *err, *out]
        events.append(_event("execution_complete", execution_time=1))
        self.commands.append(
            {
                "status": 200,
                "headers": [["Content-Type", "text/event-stream"]],
                "chunks": [[1.0, base64.b64encode(e).decode()] for e in events],
                "elapsed": 1004.0,
            }
        )
        self.files[f"/tmp/{probe_id}.stdout"] = b"osb\n\nprobe"
        self.files[f"/tmp/{probe_id}.stderr"] = f"/workspace\nosb-tmp:{tmp_dir}\n".encode()

    def serve(self, response: dict[str, Any], elapsed_ms: float | None = None) -> None:
        self.commands.append({**response, "elapsed": elapsed_ms or 0.0})

    def of(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and r.url.path == path]

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path, method = request.url.path, request.method
        if method == "POST" and path == "/command":
            return self._stream(self.commands.popleft())
        if method == "GET" and path == "/files/download":
            return self._download(request)
        if method == "DELETE" and path == "/files":
            for name in request.url.params.get_list("path"):
                self.files.pop(name, None)
            return httpx.Response(200, headers={"Content-Length": "0"})
        if method == "GET" and path.startswith("/command/status/"):
            return self._plain(self.status.popleft())
        if method == "DELETE" and path == "/command":
            return self._plain(self.interrupts.popleft())
        raise AssertionError(f"unexpected request {method} {request.url}")

    def _plain(self, response: dict[str, Any]) -> httpx.Response:
        headers = [(k, v) for k, v in response["headers"] if k.lower() != "content-length"]
        return httpx.Response(response["status"], headers=headers, content=body_of(response))

    def _stream(self, response: dict[str, Any]) -> httpx.Response:
        if "chunks" not in response:
            return self._plain(response)
        chunks = chunks_of(response)
        hold = max(0.0, float(response.get("elapsed", 0.0)) - chunks[-1][0]) / 1000
        speed = self.speed

        async def body() -> AsyncIterator[bytes]:
            previous = 0.0
            for ms, chunk in chunks:
                await asyncio.sleep(max(0.0, ms - previous) / 1000 / speed)
                previous = ms
                yield chunk
            await asyncio.sleep(hold)  # the daemon's grace period after the last event

        headers = [
            (k, v)
            for k, v in response["headers"]
            if k.lower() not in ("transfer-encoding", "content-length")
        ]
        return httpx.Response(response["status"], headers=headers, content=body())

    def _download(self, request: httpx.Request) -> httpx.Response:
        name = request.url.params.get("path", "")
        data = self.files.get(name)
        if data is None:
            message = f"file not found. open {name}: no such file or directory"
            return httpx.Response(404, json={"code": "FILE_NOT_FOUND", "message": message})
        wanted = request.headers.get("Range")
        match = re.fullmatch(r"bytes=(\d+)-(\d+)", wanted or "")
        if match is None or not data:
            return httpx.Response(200, content=data)
        start, end = int(match[1]), min(int(match[2]), len(data) - 1)
        headers = {"Content-Range": f"bytes {start}-{end}/{len(data)}"}
        return httpx.Response(206, headers=headers, content=data[start : end + 1])


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    yield
    for cache in (
        _reach._framing_cache,
        _reach._workdir_cache,
        _reach._output_dir_cache,
        WARNED_REBUILT,
    ):
        cache.clear()


def attach(replay: Replay, monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> AsyncSandboxSession:
    """A session attached to a sandbox whose execd is `replay`."""
    transport = httpx.MockTransport(replay.handle)

    async def endpoint(*args: Any, **kw: Any) -> ExecdEndpoint:
        return ExecdEndpoint(base_url=BASE_URL, headers={"X-EXECD-ACCESS-TOKEN": "t"})

    def new_execd(self: SandboxLifecycle, clients: Any, ep: ExecdEndpoint) -> ExecdClient:
        return ExecdClient(ep, transport=transport, request_timeout=5.0)

    monkeypatch.setattr(SandboxLifecycle, "_resolve_endpoint", endpoint)
    monkeypatch.setattr(SandboxLifecycle, "_new_execd", new_execd)
    connection = Connection(domain="127.0.0.1:9", api_key="replay-key")
    return AsyncSandboxSession(sandbox_id="sbx-replay", connection=connection, **kwargs)


# -- event parsing ----------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_every_recorded_stream_splits_into_one_event_per_chunk(version: str) -> None:
    streams = list(event_streams(version))
    assert len(streams) > 40
    for name, response in streams:
        chunks = [chunk for _, chunk in chunks_of(response)]
        splitter = EventSplitter()
        per_chunk = [splitter.feed(chunk) for chunk in chunks]
        tail = splitter.close()
        bare_last = not chunks[-1].endswith(b"\n\n")  # a timed-out session run
        for index, events in enumerate(per_chunk):
            expected = 0 if bare_last and index == len(chunks) - 1 else 1
            assert len(events) == expected, (name, index, chunks[index][:80])
        assert len(tail) == (1 if bare_last else 0), name
        # Fed whole, or one byte at a time: the same events.
        flat = [e for events in per_chunk for e in events] + tail
        whole = EventSplitter()
        assert whole.feed(body_of(response)) + whole.close() == flat
        bytewise = EventSplitter()
        data = body_of(response)
        one_by_one = [e for i in range(len(data)) for e in bytewise.feed(data[i : i + 1])]
        assert one_by_one + bytewise.close() == flat


@pytest.mark.parametrize("version", VERSIONS)
def test_nel_and_line_separators_stay_inside_their_event(version: str) -> None:
    nel = chunks_of(exchange(version, "cmd_printf_nel")["response"])
    assert any(b"\xc2\x85" in chunk for _, chunk in nel)  # U+0085 sent raw by Go's encoder
    texts = [
        e.get("text")
        for _, chunk in nel
        for e in EventSplitter().feed(chunk)
        if e["type"] == "stdout"
    ]
    assert texts == ["x\x85y"]
    seps = chunks_of(exchange(version, "cmd_printf_u2028_u2029")["response"])
    splitter = EventSplitter()
    texts = [e.get("text") for _, c in seps for e in splitter.feed(c) if e["type"] == "stdout"]
    assert texts == ["l\u2028s\u2029p"]


def test_sse_data_prefix_and_comments_are_accepted() -> None:
    splitter = EventSplitter()
    events = splitter.feed(
        b': comment\n\ndata: {"type":"stdout","text":"a\xc2\x85b"}\n\nevent: x\n'
    )
    events += splitter.feed(b'data:{"type":"execution_complete"}\r\n\r\n{"type":"ping"}')
    events += splitter.close()
    assert [e["type"] for e in events] == ["stdout", "execution_complete", "ping"]
    assert events[0]["text"] == "a\x85b"


def test_session_run_timeout_ends_with_a_bare_object() -> None:
    ex = case("v1.0.19", "session_basic")["exchanges"]
    timed_out = next(e for e in ex if e.get("note") == "timeout 300 ms")
    splitter = EventSplitter()
    events = [e for _, c in chunks_of(timed_out["response"]) for e in splitter.feed(c)]
    events += splitter.close()
    assert events[-1] == {
        "code": "RUNTIME_ERROR",
        "message": "error running in session. timeout after 300ms",
    }


# -- decoding like the daemon -----------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(PRINTF))
def test_raw_output_decodes_like_the_daemons_own_events(version: str, name: str) -> None:
    """The recorded events are Go's rendering of each line: the raw bytes, decoded and cut into
    lines the way execd cuts them, give exactly the recorded event texts."""
    response = exchange(version, name)["response"]
    splitter = EventSplitter()
    events = [e for _, c in chunks_of(response) for e in splitter.feed(c)]
    texts = [str(e["text"]) for e in events if e["type"] == "stdout"]
    decoded = decode_output(PRINTF[name])
    lines = re.split(r"\r\n|\r|\n", decoded)
    if lines[-1] == "":
        lines.pop()
    assert texts == [line or "\n" for line in lines]
    sizes = recorded_sizes(version)
    if sizes:
        assert sizes[f"/tmp/{init_id(response)}.stdout"] == len(PRINTF[name])


def test_invalid_utf8_becomes_one_replacement_per_byte() -> None:
    assert decode_output(b"\xff\xfea") == "\ufffd\ufffda"
    assert decode_output(b"\xe2\x82x") == "\ufffd\ufffdx"  # Python's "replace" gives one
    assert decode_output(b"\xed\xa0\x80") == "\ufffd" * 3  # an encoded surrogate
    assert decode_output("é€𝄞".encode()) == "é€𝄞"


# -- the session on the recorded wire ---------------------------------------------------------
def _streamed(kind: str, text: str) -> None:
    """An output callback that keeps nothing (a streamed run reads execd's raw files)."""


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(PRINTF))
async def test_run_is_byte_exact_from_the_raw_files(
    version: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay = Replay()
    recorded = exchange(version, name)
    response = recorded["response"]
    cid = init_id(response)
    replay.serve(response, recorded["elapsed_ms"])
    replay.files[f"/tmp/{cid}.stdout"] = PRINTF[name]
    replay.files[f"/tmp/{cid}.stderr"] = b""
    session = attach(replay, monkeypatch)
    await session.start()
    started = time.monotonic()
    # With a callback the output streams, so it is not captured (`_capture`): the run reads
    # execd's own raw files, which is the path these recordings replay.
    result = await session.commands.run(
        json.loads(recorded["request"]["body_text"])["command"], on_output=_streamed
    )
    took = time.monotonic() - started
    assert session.framing == "legacy"
    assert result.stdout == decode_output(PRINTF[name])
    assert result.stderr == ""
    assert (result.exit_code, result.truncated, result.execution_id) == (0, False, cid)
    # Not one moment of the daemon's one-second hold after the completion event is waited for.
    assert took < 0.5, took
    # Both raw files are downloaded (a stream whose events never came must not read as empty),
    # with a Range of max_output + 1 bytes...
    downloads = [r for r in replay.of("GET", "/files/download") if cid in str(r.url)]
    assert sorted(r.url.params["path"] for r in downloads) == [
        f"/tmp/{cid}.stderr",
        f"/tmp/{cid}.stdout",
    ]
    assert {r.headers["Range"] for r in downloads} == {f"bytes=0-{defaults.MAX_OUTPUT}"}
    # ...and both files are deleted in the background, in one request with the probe's own
    # (left files wait for company; closing sends them).
    await session.aclose()
    deletes = [r.url.params.get_list("path") for r in replay.of("DELETE", "/files")]
    assert deletes[-1][-2:] == [f"/tmp/{cid}.stdout", f"/tmp/{cid}.stderr"]
    assert len(deletes) == 1
    assert not [p for p in replay.files if cid in p or "0123456789abcdef" in p]
    await session.aclose()


@pytest.mark.parametrize("version", VERSIONS)
async def test_recorded_raw_files_give_exact_stdout_and_stderr(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    exchanges = case(version, "cmd_raw_output_files")["exchanges"]
    command = exchanges[0]
    cid = init_id(command["response"])
    replay = Replay()
    replay.serve(command["response"], command["elapsed_ms"])
    for ex in exchanges[1:3]:  # the recorded downloads of the two files
        replay.files[ex["request"]["query"][0][1]] = body_of(ex["response"])
    session = attach(replay, monkeypatch)
    result = await session.commands.run(json.loads(command["request"]["body_text"])["command"])
    assert result.stdout == "out1\r\nout2\n\n\u2028tail"
    assert result.stderr == "err1\n"
    paths = [r.url.params["path"] for r in replay.of("GET", "/files/download")]
    assert f"/tmp/{cid}.stdout" in paths and f"/tmp/{cid}.stderr" in paths
    await session.aclose()


async def test_streaming_callbacks_get_the_rebuilt_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = exchange("v1.0.19", "cmd_printf_crlf")
    replay = Replay()
    replay.serve(recorded["response"], recorded["elapsed_ms"])
    replay.files[f"/tmp/{init_id(recorded['response'])}.stdout"] = PRINTF["cmd_printf_crlf"]
    seen: list[tuple[str, str]] = []
    session = attach(replay, monkeypatch)
    result = await session.commands.run(
        "printf 'a\\r\\nb\\r\\n'", on_output=lambda s, t: seen.append((s, t))
    )
    assert seen == [("stdout", "a\n"), ("stdout", "b\n")]
    assert result.stdout == "a\r\nb\r\n"
    await session.aclose()


async def test_output_cap_reads_at_most_cap_plus_one_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = exchange("v1.0.19", "cmd_printf_final_newline")
    cid = init_id(recorded["response"])
    replay = Replay()
    replay.serve(recorded["response"])
    replay.files[f"/tmp/{cid}.stdout"] = b"x" * 100_000
    session = attach(replay, monkeypatch, max_output=4096)
    result = await session.commands.run("head -c 100000 /dev/zero | tr '\\0' x")
    assert result.stdout == "x" * 4096
    assert result.truncated
    download = next(r for r in replay.of("GET", "/files/download") if cid in str(r.url))
    assert download.headers["Range"] == "bytes=0-4096"
    # A cut inside a character drops the partial character.
    other = exchange("v1.0.19", "cmd_printf_no_final_newline")["response"]
    replay.serve(other)
    replay.files[f"/tmp/{init_id(other)}.stdout"] = "€".encode() * 2000
    result = await session.commands.run("printf euros", max_output=1024)
    assert result.stdout == "€" * 341 and result.truncated
    await session.aclose()


async def test_exit_codes_and_stderr_on_the_recorded_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    replay = Replay()
    for name, out, err in (
        ("cmd_exit_code", b"before\n", b""),
        (
            "cmd_unknown_command",
            b"",
            b"bash: line 1: no-such-command-execd-rec: command not found\n",
        ),
    ):
        response = exchange("v1.0.19", name)["response"]
        replay.serve(response)
        replay.files[f"/tmp/{init_id(response)}.stdout"] = out
        replay.files[f"/tmp/{init_id(response)}.stderr"] = err
    session = attach(replay, monkeypatch)
    first = await session.commands.run("echo before; exit 3")
    assert (first.exit_code, first.stdout, first.stderr) == (3, "before\n", "")
    second = await session.commands.run("no-such-command-execd-rec")
    assert second.exit_code == 127
    assert second.stderr == "bash: line 1: no-such-command-execd-rec: command not found\n"
    await session.aclose()


@pytest.mark.parametrize("version", VERSIONS)
async def test_daemon_timeout_carries_the_exact_output(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = exchange(version, "cmd_timeout")
    cid = init_id(recorded["response"])
    replay = Replay()
    replay.serve(recorded["response"], recorded["elapsed_ms"])
    replay.files[f"/tmp/{cid}.stdout"] = b"start\n"
    session = attach(replay, monkeypatch)
    with pytest.raises(CommandTimeoutError) as info:
        await session.commands.run(
            json.loads(recorded["request"]["body_text"])["command"],
            timeout=0.5,
            on_output=_streamed,
        )
    assert info.value.stdout == "start\n"
    await session.aclose()
    assert [r.url.params.get_list("path") for r in replay.of("DELETE", "/files")][-1][-2:] == [
        f"/tmp/{cid}.stdout",
        f"/tmp/{cid}.stderr",
    ]
    await session.aclose()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("index", "error"), [(0, FileNotFoundError), (2, NotADirectoryError)])
async def test_invalid_cwd_maps_to_the_builtin_path_error(
    version: str, index: int, error: type[OSError], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = exchange(version, "cmd_cwd_invalid", index)
    replay = Replay()
    replay.serve(recorded["response"])
    session = attach(replay, monkeypatch)
    cwd = json.loads(recorded["request"]["body_text"])["cwd"]
    with pytest.raises(error):
        await session.commands.run("pwd", cwd=cwd)
    await session.aclose()


async def test_missing_raw_files_fall_back_to_the_rebuild_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    recorded = exchange("v1.0.19", "cmd_printf_no_final_newline")
    replay = Replay()
    replay.serve(recorded["response"])
    replay.serve(recorded["response"])
    session = attach(replay, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="opensandbox_core._session"):
        first = await session.commands.run("printf 'a\\nb'")
        second = await session.commands.run("printf 'a\\nb'")
    assert first.stdout == second.stdout == "a\nb\n"  # rebuilt: the final newline is assumed
    assert len([r for r in caplog.records if "raw output files" in r.getMessage()]) == 1
    await session.aclose()


async def test_unknown_temp_dir_rebuilds_and_sends_no_extra_request(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    replay = Replay(tmp_dir="/elsewhere")  # the probe's file is not where the daemon said
    recorded = exchange("v1.0.19", "cmd_printf_final_newline")
    replay.serve(recorded["response"])
    session = attach(replay, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="opensandbox_core._session"):
        result = await session.commands.run("printf 'a\\nb\\n'")
    assert result.stdout == "a\nb\n"
    assert "raw output files were not found" in caplog.text
    assert not [r for r in replay.of("GET", "/files/download") if "elsewhere" not in str(r.url)]
    assert not replay.of("DELETE", "/files")
    await session.aclose()


async def test_modern_daemon_output_comes_from_events_and_files_are_cleaned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    replay = Replay(framing="modern")
    cid = "fedcba9876543210fedcba9876543210"
    events = [_event("init", cid), _event("ping", "pong"), _event("stdout", "a\r\nb")]
    events.append(_event("execution_complete", execution_time=1))
    replay.serve(
        {
            "status": 200,
            "headers": [],
            "chunks": [[1.0, base64.b64encode(e).decode()] for e in events],
        },
        1004,
    )
    replay.files[f"/tmp/{cid}.stdout"] = b"a\r\nb"
    session = attach(replay, monkeypatch)
    await session.start()
    started = time.monotonic()
    result = await session.commands.run("printf 'a\\r\\nb'")
    assert time.monotonic() - started < 0.5
    assert session.framing == "modern"
    assert result.stdout == "a\r\nb"
    assert not [r for r in replay.of("GET", "/files/download") if cid in str(r.url)]
    await session.aclose()
    assert replay.of("DELETE", "/files")[-1].url.params.get_list("path")[-2:] == [
        f"/tmp/{cid}.stdout",
        f"/tmp/{cid}.stderr",
    ]
    await session.aclose()


async def test_ancient_daemon_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    session = attach(Replay(framing="ancient"), monkeypatch)
    with pytest.raises(UnsupportedDaemonError) as info:
        await session.start()
    message = str(info.value)
    assert "v1.0.16 or older" in message
    assert 'execd_image = "opensandbox/execd:v1.0.19"' in message
    assert "vX.Y.Z" in message
    await session.aclose()


# -- background processes ---------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
async def test_background_start_waits_out_the_registration_race(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    exchanges = case(version, "bg_registration_race")["exchanges"]
    start, not_yet, _logs, _, found = (
        exchanges[0],
        exchanges[1],
        exchanges[2],
        exchanges[3],
        exchanges[4],
    )
    assert not_yet["response"]["status"] == 404
    assert found["response"]["status"] == 200
    replay = Replay()
    replay.serve(start["response"], start["elapsed_ms"])
    replay.status.extend([not_yet["response"], not_yet["response"], found["response"]])
    replay.status.append(found["response"])
    session = attach(replay, monkeypatch)
    await session.start()
    began = time.monotonic()
    process = await session.commands.start_background("sleep 1; echo done")
    assert time.monotonic() - began < 0.5  # the stream's one-second hold is not waited for
    assert process.id == init_id(start["response"])
    assert len(replay.of("GET", f"/command/status/{process.id}")) == 3
    status = await process.status()
    assert status.running and status.exit_code is None
    await session.aclose()


@pytest.mark.parametrize("version", VERSIONS)
async def test_cancellation_interrupts_and_cleans_up(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    exchanges = case(version, "cmd_interrupt")["exchanges"]
    command, interrupt = exchanges[0], exchanges[1]
    cid = init_id(command["response"])
    replay = Replay()
    replay.serve(command["response"], command["elapsed_ms"])
    replay.interrupts.append(interrupt["response"])
    session = attach(replay, monkeypatch)
    await session.start()
    task = asyncio.create_task(
        session.commands.run("echo start; sleep 30; echo never", on_output=_streamed)
    )
    await asyncio.sleep(0.05)  # after `init`, before the recorded output at 101 ms
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [sent] = replay.of("DELETE", "/command")
    assert sent.url.params["id"] == cid
    deletes = [r.url.params.get_list("path") for r in replay.of("DELETE", "/files")]
    assert [f"/tmp/{cid}.stdout", f"/tmp/{cid}.stderr"] in deletes
    await session.aclose()


@pytest.mark.parametrize("version", VERSIONS)
async def test_stopping_a_finished_process_is_quiet(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    again = case(version, "cmd_interrupt")["exchanges"][3]
    assert again["response"]["status"] == 500  # "... is not running"
    replay = Replay()
    replay.interrupts.append(again["response"])
    session = attach(replay, monkeypatch)
    await session.start()
    await session.commands.background("5270451585974c71a763312207e34350").stop()
    assert len(replay.of("DELETE", "/command")) == 1
    await session.aclose()
