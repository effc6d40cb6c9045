"""The code facet's reader against execd's RECORDED `/code` answers (the `code_*` cases of
tests/data/execd-recordings), offline: every recorded run's chunks, served as they came, go
through the core's wire reader (`code_events`) into its event state (`StreamState`), and the
pure pieces (tracebacks, records, the kernelspec probe) against what the kernels send."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from opensandbox_core._code._kernel import Record, parse_bash, parse_info, parse_python
from opensandbox_core._code._model import StreamState, from_record, plain_traceback
from opensandbox_core._code._probe import kernel_verdict
from opensandbox_core._code._runner import RunFailed, stream
from opensandbox_core._wire._events import Context
from opensandbox_core._wire._execd import ExecdClient, ExecdEndpoint
from opensandbox_core._wire._framing import Framing

DATA = Path(
    os.environ.get("OSB_RECORDINGS_DIR")
    or Path(__file__).resolve().parents[2] / "data" / "execd-recordings"
)


def _runs() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(DATA.glob("v*.json")):
        for case in json.loads(path.read_text())["cases"]:
            if not case["name"].startswith("code_"):
                continue
            for index, exchange in enumerate(case["exchanges"]):
                request, response = exchange["request"], exchange.get("response") or {}
                if (
                    request["target"] == "/code"
                    and request["method"] == "POST"
                    and response.get("chunks")
                ):
                    found.append((f"{path.stem}:{case['name']}#{index}", exchange))
    return found


RUNS = _runs()


@pytest.mark.skipif(not RUNS, reason="the recordings in tests/data have no code_* cases yet")
@pytest.mark.parametrize(("name", "exchange"), RUNS, ids=[r[0] for r in RUNS])
async def test_every_recorded_run_reads_as_execd_sent_it(
    name: str, exchange: dict[str, Any]
) -> None:
    chunks = [base64.b64decode(c) for _, c in exchange["response"]["chunks"]]
    body = b"".join(chunks)

    async def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=_chunked(chunks), headers={"Content-Type": "text/event-stream"}
        )

    execd = ExecdClient(
        ExecdEndpoint("http://execd.test", {}),
        transport=httpx.MockTransport(answer),
        request_timeout=5,
    )
    state = StreamState()
    ctx = Context(execd, Framing.LEGACY, "/workspace", "/tmp")
    sent = json.loads(exchange["request"]["body_text"])
    if b"session is busy" in body:
        with pytest.raises(RunFailed, match="busy"):
            await stream(ctx, sent, state, None)
    else:
        await stream(ctx, sent, state, None)
    await execd.aclose()
    events = [json.loads(e) for e in body.split(b"\n\n") if e.strip().startswith(b'{"type"')]
    assert state.events == len(events) + (b"session is busy" in body)
    outputs = "".join(e["text"] for e in events if e["type"] == "stdout")
    assert "".join(state.stdout) == outputs  # NEL, U+2028 and 1 MiB events included
    for result in state.results:
        assert result.is_main_result and "text/plain" in result.mime
    if state.error is not None:
        assert "\x1b" not in state.error.traceback


async def _chunked(chunks: list[bytes]) -> Any:
    for chunk in chunks:
        yield chunk


def test_tracebacks_are_plain_text() -> None:
    lines = [
        "\x1b[31m---\x1b[39m",
        "\x1b[31mValueError\x1b[39m                                Traceback (most recent call last)",
        "An exception has occurred.\n",
        "\x1b[31mSystemExit\x1b[39m\x1b[31m:\x1b[39m 3\n",
    ]
    assert plain_traceback(lines) == (
        "---\nValueError                                Traceback (most recent call last)\n"
        "An exception has occurred.\nSystemExit: 3"
    )


def test_a_record_keeps_order_updates_and_the_count() -> None:
    png = base64.b64encode(b"\x89PNG-bytes").decode()
    record = parse_python(
        json.dumps(
            {
                "v": 1,
                "count": 7,
                "items": [
                    ["stream", "stdout", "a\n"],
                    ["display", {"text/plain": "v1", "text/html": "<i>1</i>"}, "d1"],
                    ["stream", "stderr", "w\n"],
                    ["display", {"image/png": png, "text/plain": "<Figure>"}, None],
                    ["update", {"text/plain": "v2", "text/html": "<i>2</i>"}, "d1"],
                    ["result", {"text/plain": "3", "text/latex": "$3$"}, 7],
                    ["error", "E", "x", ["\x1b[31mE\x1b[39m: x"]],
                ],
            }
        ).encode()
    )
    assert record is not None
    done = from_record(record)
    assert (done.stdout, done.stderr, done.execution_count) == ("a\n", "w\n", 7)
    assert [r.html for r in done.results] == ["<i>2</i>", None, None]
    assert done.results[1].png == b"\x89PNG-bytes" and done.results[2].latex == "$3$"
    assert done.text == "3" and done.error is not None and done.error.traceback == "E: x"
    assert parse_python(b"not json") is None


def test_bash_records_and_kernel_info() -> None:
    record = parse_bash(b"osb-bash 1 2 3 4\nab\nerr\n")
    assert record == Record(
        [["stream", "stdout", "ab\n"], ["stream", "stderr", "err\n"], ["error", "", "2", []]], None
    )
    assert parse_bash(b"garbage") is None
    info = parse_info(b"41\n12345\n/workspace/x\n")
    assert info is not None and (info.pid, info.started, info.cwd) == (41, "12345", "/workspace/x")


def test_the_kernelspec_verdicts() -> None:
    specs = {"python3": {"spec": {"language": "python"}}, "bash": {"spec": {"language": "bash"}}}
    answer = (
        b"osb-jupyter answer\nHTTP/1.1 200 OK\r\n\r\n" + json.dumps({"kernelspecs": specs}).encode()
    )
    assert kernel_verdict(answer, "bash") == "yes"
    assert (kernel_verdict(answer, "python") or "").startswith(
        "no: its Jupyter server has no kernel"
    )
    assert kernel_verdict(
        b"osb-jupyter unreachable\n",
        "python",
    ).startswith("no:")  # type: ignore[union-attr]
    assert kernel_verdict(b"osb-jupyter none\n", "python") is None
    assert kernel_verdict(b"osb-jupyter answer\nHTTP/1.1 500 x\r\n\r\noops", "python") is None
