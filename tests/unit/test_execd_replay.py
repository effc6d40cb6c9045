"""The testbed daemon answers the recorded requests as the real execd did (tests/testbed/replay.py).

One test per recorded (version, case): the daemon runs in the version's profile, in the recorded
daemon context, and every exchange must match the recording after the README's normalisation,
except for the entries of ``replay.DELIBERATE_DIFFERENCES``. The comparison itself is checked on
the recordings alone first: a recording matches itself, and a changed answer is caught.
"""

from __future__ import annotations

import base64
import hashlib
import multiprocessing
import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from testbed import replay, replay_ws

Replayed = tuple[list[replay.CaseResult], dict[str, Any]]

CASES = [(v, str(c["name"])) for v in replay.VERSIONS for c in replay.load(v)["cases"]]


def _replay_or_reason(version: str, code: bool) -> Replayed | replay.ReplayUnavailable:
    try:
        return replay.replay_version(version, code=code)
    except replay.ReplayUnavailable as exc:
        return exc


def _replay_code_parts(versions: tuple[str, ...]) -> dict[str, Replayed | replay.ReplayUnavailable]:
    """The versions' `code_*` parts, one after the other: each starts a Jupyter server of its
    own, and two at once on one machine race (each picks its kernels' TCP ports by binding port 0
    and letting go: a bash kernel died of "Address already in use" in CI) and slow each other's
    kernels enough to change what the recordings pin."""
    return {v: _replay_or_reason(v, True) for v in versions}


@pytest.fixture(scope="session")
def replayed() -> Iterator[Callable[[str], Replayed]]:
    """The replay of each version, run once per session.

    Each version's two parts (the cases before the code interpreter, and the `code_*` cases,
    which were recorded with a daemon and a Jupyter server of their own) run in processes of
    their own (own daemons, private /tmp and ports), so no two replays share a GIL: the plain
    parts at the same time, beside them the code parts one after the other
    (`_replay_code_parts`).
    """
    futures: dict[str, Future[Replayed | replay.ReplayUnavailable]] = {}
    code_parts: list[Future[dict[str, Replayed | replay.ReplayUnavailable]]] = []
    pool = ProcessPoolExecutor(
        max_workers=len(replay.VERSIONS) + 1, mp_context=multiprocessing.get_context("spawn")
    )

    def get(version: str) -> Replayed:
        if not futures:
            code_parts.append(pool.submit(_replay_code_parts, tuple(replay.VERSIONS)))
            for v in replay.VERSIONS:
                futures[v] = pool.submit(_replay_or_reason, v, False)
        parts = [futures[version].result(), code_parts[0].result()[version]]
        results: list[replay.CaseResult] = []
        logs: list[str] = []
        for got in parts:
            if isinstance(got, replay.ReplayUnavailable):
                # CI must prove the daemon against the recordings: there, a replay that cannot
                # run fails; on a developer machine without root it is skipped, with the reason.
                if os.environ.get("CI"):
                    pytest.fail(f"the replay cannot run here: {got}", pytrace=False)
                pytest.skip(f"the replay cannot run here: {got}")
            results += got[0]
            logs.append(str(got[1]["log"]))
        return results, {"log": " | ".join(logs)}

    yield get
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize(("version", "case"), CASES, ids=[f"{v}-{c}" for v, c in CASES])
def test_case_matches_recording(
    replayed: Callable[[str], Replayed], version: str, case: str
) -> None:
    results, info = replayed(version)
    result = next(r for r in results if r.name == case)
    left = [d for d in result.differences if replay.excused(version, d) is None]
    assert not left, f"daemon log {info['log']}\n" + "\n".join(str(d) for d in left)
    if result.retried:  # passed on the second run: say so in the test report
        print(f"{version} {case}: replayed once more after " + "; ".join(map(str, result.retried)))


def test_every_deliberate_difference_is_still_needed(
    replayed: Callable[[str], Replayed],
) -> None:
    used: set[replay.Deliberate] = set()
    for version in replay.VERSIONS:
        results, _info = replayed(version)
        for result in results:
            for diff in result.differences:
                entry = replay.excused(version, diff)
                if entry is not None:
                    used.add(entry)
    unused = [e for e in replay.DELIBERATE_DIFFERENCES if e not in used]
    assert not unused, f"entries that excuse nothing any more: {unused}"


# ----------------------------------------------------------------- the comparison on its own


def _as_live(exchange: dict[str, Any]) -> replay.Live:
    """What a daemon answering exactly like the recording would give the replay."""
    resp = exchange["response"]
    body = replay._response_body(resp)
    chunks = replay._recorded_chunks(resp) if resp.get("transfer") == "chunked" else None
    return replay.Live(
        status=int(resp.get("status") or 0),
        reason=str(resp.get("reason", "")),
        http_version=str(resp.get("http_version", "")),
        headers=[("Date", "Tue, 01 Dec 2026 08:00:00 GMT"), *map(tuple, resp.get("headers", []))],
        transfer=str(resp.get("transfer", "")),
        body=body,
        chunks=chunks,
        elapsed_ms=float(exchange["elapsed_ms"]),
        closed_by_client=bool(resp.get("closed_by_client")),
        error=str(resp.get("error") or ""),
        frames=replay_ws.recorded_frames(exchange) if "frames" in exchange else None,
        gave_up=bool(resp.get("client_gave_up_s")),
    )


@pytest.mark.parametrize("version", sorted(replay.VERSIONS))
def test_a_recording_matches_itself(version: str) -> None:
    for case in replay.load(version)["cases"]:
        lives = [_as_live(ex) for ex in case["exchanges"]]
        assert replay.compare_case(case, lives) == [], case["name"]


def _case(name: str) -> dict[str, Any]:
    return next(c for c in replay.load("v1.0.19")["cases"] if c["name"] == name)


def _events(live: replay.Live) -> list[bytes]:
    assert live.chunks is not None
    return [data for _ms, data in live.chunks]


def _with_chunks(live: replay.Live, chunks: list[tuple[float, bytes]]) -> replay.Live:
    live.chunks = chunks
    live.body = b"".join(c for _, c in chunks)
    return live


def test_ids_and_timestamps_are_normalised_but_text_and_escapes_are_not() -> None:
    case = _case("cmd_printf_u2028_u2029")
    live = _as_live(case["exchanges"][0])
    assert live.chunks is not None
    other = [
        (
            ms,
            re.sub(rb"[0-9a-f]{32}", b"0123456789abcdef0123456789abcdef", data).replace(
                b'"timestamp":17961', b'"timestamp":17962'
            ),
        )
        for ms, data in live.chunks
    ]
    assert other != live.chunks
    assert replay.compare_case(case, [_with_chunks(_as_live(case["exchanges"][0]), other)]) == []
    # the same text with U+2028 sent raw instead of escaped is a difference
    raw = [(ms, data.replace(b"\\u2028", "\u2028".encode())) for ms, data in live.chunks]
    diffs = replay.compare_case(case, [_with_chunks(_as_live(case["exchanges"][0]), raw)])
    assert [d.what for d in diffs] == ["event 1"]


def test_missing_ping_wrong_line_and_short_hold_are_caught() -> None:
    case = _case("cmd_printf_crlf")
    live = _as_live(case["exchanges"][0])
    assert live.chunks is not None
    no_ping = [(ms, d) for ms, d in live.chunks if b'"ping"' not in d]
    diffs = replay.compare_case(case, [_with_chunks(_as_live(case["exchanges"][0]), no_ping)])
    assert {d.what for d in diffs} == {"ping after init", "ping count"}
    kept_cr = [(ms, d.replace(b'"text":"a"', b'"text":"a\\r\\n"')) for ms, d in live.chunks]
    diffs = replay.compare_case(case, [_with_chunks(_as_live(case["exchanges"][0]), kept_cr)])
    assert [d.what for d in diffs] == ["event 1"]
    quick = _as_live(case["exchanges"][0])
    quick.elapsed_ms = quick.chunks[-1][0] + 5 if quick.chunks else 0.0
    assert [d.what for d in replay.compare_case(case, [quick])] == ["timing hold"]


def test_status_headers_and_poll_timing_are_caught() -> None:
    case = _case("cmd_sleep_between_prints")
    live = _as_live(case["exchanges"][0])
    assert live.chunks is not None
    early = [(ms if b'"one"' not in d else 3.0, d) for ms, d in live.chunks]
    diffs = replay.compare_case(case, [_with_chunks(live, early)])
    assert [d.what for d in diffs] == ["timing event 1"]
    # a busy host may make the daemon somewhat late, never early: an interrupt answered at
    # once (instead of after ~50 ms) is a difference, one answered 60 ms late is not
    case = _case("cmd_interrupt")
    lives = [_as_live(ex) for ex in case["exchanges"]]
    lives[1].elapsed_ms = 1.0
    assert [(d.exchange, d.what) for d in replay.compare_case(case, lives)] == [
        (1, "timing elapsed")
    ]
    lives[1].elapsed_ms = float(case["exchanges"][1]["elapsed_ms"]) + 60
    assert replay.compare_case(case, lives) == []
    case = _case("cmd_interrupt_errors")
    lives = [_as_live(ex) for ex in case["exchanges"]]
    lives[1].status = 404
    lives[2].headers.insert(1, ("Server", "execd-py"))
    diffs = replay.compare_case(case, lives)
    assert [(d.exchange, d.what) for d in diffs] == [(1, "status"), (2, "header names")]


def test_only_the_listed_races_may_go_the_other_way() -> None:
    case = _case("bg_registration_race")
    lives = [_as_live(ex) for ex in case["exchanges"]]
    lives[1].status = 200  # 0 ms after init: may already be registered
    assert replay.compare_case(case, lives) == []
    lives[4].status = 404  # 5 ms after init: was registered in every recording
    assert [(d.exchange, d.what) for d in replay.compare_case(case, lives)] == [(4, "status")]
    # not registered yet: the daemon was late (retried once), never early
    assert [d.late for d in replay.compare_case(case, lives)] == [True]
    lives[4].status = 500
    assert [d.late for d in replay.compare_case(case, lives)] == [False]


# ----------------------------------------------------------------- WebSocket exchanges (/pty)


def _ws_case(name: str, index: int) -> tuple[dict[str, Any], list[replay.Live]]:
    case = _case(name)
    lives = [_as_live(ex) for ex in case["exchanges"]]
    assert lives[index].frames
    return case, lives


def _whats(case: dict[str, Any], lives: list[replay.Live]) -> list[tuple[int, str]]:
    return [(d.exchange, d.what) for d in replay.compare_case(case, lives)]


def _server_frame(frames: list[replay_ws.Frame], start: bytes) -> replay_ws.Frame:
    return next(f for f in frames if f.side == "server" and (f.payload or b"").startswith(start))


def test_frame_cuts_and_session_ids_are_normalised_but_bytes_are_not() -> None:
    case, lives = _ws_case("pty_basic", 3)
    frames = lives[3].frames
    assert frames is not None
    # the output in other cuts (one frame per byte) and another session id: no difference
    cut: list[replay_ws.Frame] = []
    for f in frames:
        if f.is_output and f.payload:
            cut += [
                replay_ws.Frame(f.ms, "server", "binary", b"\x01" + bytes((b,)))
                for b in f.payload[1:]
            ]
        elif f.payload and b"session_id" in f.payload:
            other = re.sub(
                rb"[0-9a-f]{8}-[0-9a-f-]{27}", b"00000000-0000-4000-8000-000000000000", f.payload
            )
            cut.append(replay_ws.Frame(f.ms, f.side, f.opcode, other))
        else:
            cut.append(f)
    lives[3].frames = cut
    assert _whats(case, lives) == []
    # one byte of output changed, `\r\n` for `\n`: a difference
    prompt = _server_frame(cut, b"\x01a")
    prompt.payload = b"\x01b"
    assert _whats(case, lives) == [(3, "ws output stdout")]


def test_text_frames_close_codes_and_the_end_of_a_connection_are_exact() -> None:
    case, lives = _ws_case("pty_basic", 3)
    frames = lives[3].frames
    assert frames is not None
    _server_frame(frames, b'{"type":"exit"').payload = b'{"type":"exit","exit_code":0}\n'
    assert _whats(case, lives) == [(3, "ws frames")]
    case, lives = _ws_case("pty_basic", 3)
    frames = lives[3].frames
    assert frames is not None
    _server_frame(frames, b"\x03\xe8process").payload = b"\x03\xe8"  # no reason
    assert _whats(case, lives) == [(3, "ws frames")]
    # TCP left open after a client's close (the recorder closed it): a daemon that closes it is
    # a difference, and so is one that leaves it open after `exit`
    case, lives = _ws_case("pty_basic", 6)
    frames = lives[6].frames
    assert frames is not None and frames[-1].event == "tcp_close"
    frames[-1] = replay_ws.Frame(frames[-1].ms, "server", event="eof")
    assert _whats(case, lives) == [(6, "ws ending")]
    case, lives = _ws_case("pty_basic", 3)
    frames = lives[3].frames
    assert frames is not None and frames[-1].event == "eof"
    frames[-1] = replay_ws.Frame(frames[-1].ms, "client", event="tcp_close")
    assert _whats(case, lives) == [(3, "ws ending")]


def test_only_the_last_bytes_before_an_exit_may_be_missing() -> None:
    """The daemon's exit-loss bug: the echo of `exit 3` and bash's `exit` (recorded within a
    millisecond of the exit frame) may be missing on either side; earlier output may not."""
    case, lives = _ws_case("pty_basic", 3)
    frames = lives[3].frames
    assert frames is not None
    tail = _server_frame(frames, b"\x01exit 3")
    frames.remove(tail)
    assert _whats(case, lives) == []
    case, lives = _ws_case("pty_basic", 3)
    frames = lives[3].frames
    assert frames is not None
    frames.remove(_server_frame(frames, b"\x01pwd; echo"))  # 1 ms before the exit: too early
    frames.remove(_server_frame(frames, b"\x01exit 3"))
    assert _whats(case, lives) == [(3, "ws output stdout")]
    # recorded without them, live with them: the same rule the other way
    case = _case("pty_command")
    lives = [_as_live(ex) for ex in case["exchanges"]]
    frames = lives[8].frames
    assert frames is not None
    exit_frame = _server_frame(frames, b'{"type":"exit"')
    k = frames.index(exit_frame)
    frames.insert(k, replay_ws.Frame(exit_frame.ms - 1, "server", "binary", b"\x01o2\n"))
    assert _whats(case, lives) == []
    frames.insert(k, replay_ws.Frame(exit_frame.ms - 150, "server", "binary", b"\x01o3\n"))
    assert _whats(case, lives) == [(8, "ws output stdout")]


def test_the_replay_frame_and_its_digest_are_compared() -> None:
    case, lives = _ws_case("pty_replay", 12)
    frames = lives[12].frames
    assert frames is not None
    big = next(f for f in frames if f.payload is None)
    assert big.sha256 and big.length == 1048585
    # a live frame carrying the recorded bytes (rebuilt from the recorded case: 1 MiB of `y`
    # and the recorded end) has the recorded digest
    body = base64.b64decode(case["exchanges"][12]["frames"][0]["tail_b64"])
    payload = big.head + b"y" * (big.length - len(big.head) - len(body)) + body
    assert hashlib.sha256(payload).hexdigest() == big.sha256
    frames[frames.index(big)] = replay_ws.Frame(big.ms, "server", "binary", payload)
    assert _whats(case, lives) == []
    frames[0] = replay_ws.Frame(big.ms, "server", "binary", payload[:20] + b"n" + payload[21:])
    assert _whats(case, lives) == [(12, "ws frames")]
    case, lives = _ws_case("pty_replay", 4)
    frames = lives[4].frames
    assert frames is not None
    replay_frame = frames[0]
    assert replay_frame.payload is not None and replay_frame.channel == 3
    frames[0] = replay_ws.Frame(
        0.4, "server", "binary", replay_frame.payload[:8] + b"\x45" + replay_frame.payload[9:]
    )
    assert _whats(case, lives) == [(4, "ws frames")]  # another offset


def test_bash_may_ignore_sighup_at_an_idle_prompt_but_nothing_else_may_differ() -> None:
    case, lives = _ws_case("pty_modes", 8)
    frames = lives[8].frames
    assert frames is not None
    hup = next(k for k, f in enumerate(frames) if b"SIGHUP" in (f.payload or b""))
    lives[8].frames = [*frames[: hup + 1], replay_ws.Frame(3000.0, "client", event="tcp_close")]
    assert _whats(case, lives) == []
    lives[8].frames = [*frames[: hup - 1], *frames[hup:]]  # no prompt before it
    assert _whats(case, lives) != []


def test_deliberate_differences_are_few_and_explained() -> None:
    assert len(replay.DELIBERATE_DIFFERENCES) <= 8
    names = {str(c["name"]) for c in replay.load("v1.0.19")["cases"]}
    for entry in replay.DELIBERATE_DIFFERENCES:
        assert entry.case in names
        assert entry.version in ("*", *replay.VERSIONS)
        assert len(entry.why) > 20


def test_recordings_are_complete_copies() -> None:
    """The repo's copies hold both versions, the same cases in the same order, with a README."""
    a, b = replay.load("v1.0.19"), replay.load("v1.0.18")
    assert a["format"] == b["format"] == 1
    assert [c["name"] for c in a["cases"]] == [c["name"] for c in b["cases"]]
    assert len(a["cases"]) == 88
    assert sum(str(c["name"]).startswith("code_") for c in a["cases"]) == 22
    # recorded 2026-12-03, the pty_* cases included; the code_* cases 2026-12-06 (code_run)
    for rec, total in ((a, 732), (b, 730)):
        assert rec["recorded"] == "2026-12-03"
        assert rec["code_run"]["recorded"] == "2026-12-06"
        assert sum(len(c["exchanges"]) for c in rec["cases"]) == total
        code = [
            ex for c in rec["cases"] if str(c["name"]).startswith("code_") for ex in c["exchanges"]
        ]
        assert len(code) == 227
        websocket = [ex for c in rec["cases"] for ex in c["exchanges"] if ex.get("kind")]
        assert {ex["kind"] for ex in websocket} == {"websocket"}
        assert all("frames" in ex for ex in websocket if ex["response"]["status"] == 101)
    assert (replay.RECORDINGS / "README.md").read_text().startswith("# Recorded exchanges")


# ----------------------------------------------------------------- the retry of late timings


def _result(name: str, *diffs: replay.Difference) -> replay.CaseResult:
    return replay.CaseResult(name, 1, list(diffs), [])


LATE = replay.Difference(
    "cmd_sleep_between_prints", 0, "timing event 1", "1010 ms", "1400 ms", True
)
EARLY = replay.Difference("cmd_sleep_between_prints", 0, "timing event 1", "1010 ms", "900 ms")


def _fake_runs(
    monkeypatch: pytest.MonkeyPatch, runs: list[list[replay.CaseResult]]
) -> list[list[str]]:
    """replay_version with daemons replaced by `runs` (one list of results per daemon started);
    returns the case names each daemon was asked to replay."""
    asked: list[list[str]] = []

    def fake(
        recording: dict[str, Any],
        version: str,
        cases: list[dict[str, Any]],
        log_path: Path,
        daemon: Path,
        info: dict[str, Any],
    ) -> list[replay.CaseResult]:
        asked.append([str(c["name"]) for c in cases])
        by_name = {r.name: r for r in runs[len(asked) - 1]}
        return [by_name.get(str(c["name"]), _result(str(c["name"]))) for c in cases]

    monkeypatch.setattr(replay, "_replay_cases", fake)
    return asked


def test_a_late_case_is_replayed_once_more_in_its_context_and_must_pass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    asked = _fake_runs(monkeypatch, [[_result("cmd_sleep_between_prints", LATE)], []])
    results, info = replay.replay_version("v1.0.19", log_dir=tmp_path)
    names = [str(c["name"]) for c in replay.load("v1.0.19")["cases"]]
    last = names.index("cmd_sleep_between_prints")
    assert asked == [names, names[: last + 1]]  # the retry rebuilds the earlier cases' state
    assert info["retried"] == ["cmd_sleep_between_prints"]
    result = results[last]
    assert result.differences == [] and result.retried == [LATE]
    # late again on the retry: the case fails
    _fake_runs(monkeypatch, [[_result("cmd_sleep_between_prints", LATE)]] * 2)
    results, info = replay.replay_version("v1.0.19", log_dir=tmp_path)
    assert results[last].differences == [LATE]


@pytest.mark.parametrize(
    "first",
    [
        [_result("cmd_sleep_between_prints", EARLY)],
        [_result("cmd_sleep_between_prints", LATE), _result("cmd_exit_code", EARLY)],
        [
            _result("cmd_sleep_between_prints", LATE),
            _result("files_info", replay.Difference("files_info", 0, "status", "404", "200")),
        ],
    ],
    ids=["early", "late-and-early", "late-and-status"],
)
def test_nothing_is_retried_when_a_difference_is_not_lateness(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, first: list[replay.CaseResult]
) -> None:
    asked = _fake_runs(monkeypatch, [first, []])
    results, info = replay.replay_version("v1.0.19", log_dir=tmp_path)
    assert len(asked) == 1 and info["retried"] == []
    got = sorted(str(d) for r in results for d in r.differences)
    assert got == sorted(str(d) for r in first for d in r.differences)


def test_timing_differences_say_whether_the_daemon_was_late() -> None:
    case = _case("cmd_interrupt")
    lives = [_as_live(ex) for ex in case["exchanges"]]
    lives[1].elapsed_ms = 1.0
    assert [d.late for d in replay.compare_case(case, lives)] == [False]
    lives[1].elapsed_ms = float(case["exchanges"][1]["elapsed_ms"]) + 400
    assert [(d.what, d.late) for d in replay.compare_case(case, lives)] == [
        ("timing elapsed", True)
    ]


# ----------------------------------------------------------------- the code interpreter (code_*)


def _code_lives(name: str, version: str = "v1.0.19") -> tuple[dict[str, Any], list[replay.Live]]:
    case = next(c for c in replay.load(version)["cases"] if c["name"] == name)
    return case, [_as_live(ex) for ex in case["exchanges"]]


def _run_index(case: dict[str, Any], note: str) -> int:
    return next(k for k, ex in enumerate(case["exchanges"]) if ex.get("note") == note)


def test_code_execution_complete_may_come_anywhere_after_init_but_once() -> None:
    case, lives = _code_lives("code_run_basic")
    k = _run_index(case, "print and a last expression")
    live = lives[k]
    assert live.chunks is not None
    complete = next(c for c in live.chunks if b"execution_complete" in c[1])
    others = [c for c in live.chunks if c is not complete]
    _with_chunks(live, [*others, complete])  # last instead of before the output: the race
    assert _whats(case, lives) == []
    _with_chunks(live, [*others, complete, complete])
    assert _whats(case, lives) == [(k, "execution_complete")]
    _with_chunks(live, others)
    assert _whats(case, lives) == [(k, "execution_complete")]


def test_code_output_is_compared_exactly_after_merging_stream_cuts() -> None:
    case, lives = _code_lives("code_run_basic")
    k = _run_index(case, "non-ASCII, U+2028, NEL, <&>")
    live = lives[k]
    assert live.chunks is not None
    out = next(c for c in live.chunks if b'"stdout"' in c[1])
    at = live.chunks.index(out)
    text, stamp = out[1].split(b'\\n",', 1)
    # the same text in two stream messages (its newline later): no difference
    cut = [(out[0], text + b'",' + stamp), (out[0] + 1, b'{"type":"stdout","text":"\\n",' + stamp)]
    _with_chunks(live, [*live.chunks[:at], *cut, *live.chunks[at + 1 :]])
    assert _whats(case, lives) == []
    # U+2028 sent raw instead of escaped, or on stderr: a difference
    raw = out[1].replace(b"\\u2028", "\u2028".encode())
    _with_chunks(live, [*live.chunks[:at], (out[0], raw), *live.chunks[at + 2 :]])
    assert _whats(case, lives) == [(k, "event 0")]
    case, lives = _code_lives("code_run_basic")
    live = lives[k]
    assert live.chunks is not None
    live.chunks[at] = (out[0], out[1].replace(b'"stdout"', b'"stderr"'))
    assert _whats(case, lives) == [(k, "event 0")]


def test_code_output_the_recording_lost_may_be_here_but_not_the_other_way() -> None:
    case, lives = _code_lives("code_stream_large")
    k = _run_index(case, "20,000 short lines")
    live = lives[k]
    assert live.chunks is not None and not any(b'"stdout"' in c for _ms, c in live.chunks)
    line = b'{"type":"stdout","text":"0\\n1\\n","timestamp":1}\n\n'
    _with_chunks(live, [*live.chunks, (30.0, line)])  # the late print, kept here
    assert _whats(case, lives) == []
    # more than late output (a second result) is a difference
    result = b'{"type":"result","timestamp":1,"results":{"text":"2"}}\n\n'
    count = b'{"type":"execution_count","execution_count":9,"timestamp":1}\n\n'
    _with_chunks(live, [*live.chunks, (31.0, count), (31.0, result), (32.0, count), (32.0, result)])
    assert _whats(case, lives) != []
    # the recording has output the live run lacks: a difference
    case, lives = _code_lives("code_run_basic")
    k = _run_index(case, "print")
    live = lives[k]
    assert live.chunks is not None
    _with_chunks(live, [c for c in live.chunks if b'"stdout"' not in c[1]])
    assert _whats(case, lives) == [(k, "event 0")]


def test_code_busy_answer_and_the_hold_are_exact() -> None:
    case, lives = _code_lives("code_busy")
    k = _run_index(case, "second run in A while the first runs")
    live = lives[k]
    assert live.chunks is not None
    assert [c for _ms, c in live.chunks][-1].endswith(b"}")  # bare, no blank line
    no_ping = [c for c in live.chunks if b'"ping"' not in c[1]]
    _with_chunks(live, no_ping)  # a refused run may lack its ping (a race)
    assert _whats(case, lives) == []
    framed = [*no_ping[:-1], (no_ping[-1][0], no_ping[-1][1] + b"\n\n")]
    _with_chunks(live, framed)  # an `error`-less object framed as an event is not the bug
    assert _whats(case, lives) == [(k, "busy answer")]
    case, lives = _code_lives("code_run_basic")
    k = _run_index(case, "print")
    lives[k].elapsed_ms += 1000.0  # a 1 s hold after the last event, as /command's
    assert _whats(case, lives) == [(k, "timing hold")]


def test_code_requests_never_answered_must_not_be_answered() -> None:
    case, lives = _code_lives("code_context_bad_language")
    assert lives[0].gave_up and lives[0].status == 0
    lives[0].status, lives[0].gave_up = 500, False
    assert _whats(case, lives) == [(0, "gave up"), (0, "status")]
    # a hung run (kernel death) that ends is a difference; its output is not compared
    case, lives = _code_lives("code_kernel_death")
    k = _run_index(case, "the kernel exits")
    assert lives[k].gave_up
    assert lives[k].chunks is not None
    _with_chunks(
        lives[k],
        [*lives[k].chunks, (60.0, b'{"type":"stderr","text":"warning","timestamp":1}\n\n')],
    )
    assert _whats(case, lives) == []
    lives[k].gave_up = False
    assert (k, "gave up") in _whats(case, lives)


def test_code_bash_restart_after_an_interrupt_is_one_of_two_outcomes() -> None:
    case18, lives18 = _code_lives("code_bash", "v1.0.18")
    case19, lives19 = _code_lives("code_bash", "v1.0.19")
    k = _run_index(case19, "a run afterwards")
    assert _whats(case19, [*lives19[:k], lives18[k], *lives19[k + 1 :]]) == []
    assert _whats(case18, [*lives18[:k], lives19[k], *lives18[k + 1 :]]) == []
    live = lives19[k]
    assert live.chunks is not None
    other = b'{"type":"stdout","text":"something else\\n","timestamp":1}\n\n'
    _with_chunks(live, [*live.chunks, (90.0, other)])
    assert _whats(case19, lives19) != []


def test_code_cases_get_the_code_runs_daemon_and_jupyter_and_no_jupyter_its_own() -> None:
    rec = replay.load("v1.0.19")
    groups = replay._groups(rec, rec["cases"])
    assert [(len(g), jup) for _ctx, jup, g in groups] == [(66, False), (1, False), (21, True)]
    plain, alone, code = groups
    assert plain[0] is rec["daemon"] and "JUPYTER_HOST" not in plain[0]["env"]
    assert [c["name"] for c in alone[2]] == ["code_no_jupyter"]
    assert "JUPYTER_HOST" not in alone[0]["env"] and alone[0]["args"][1] == "44773"
    assert code[0] is rec["code_run"]["daemon"]
    assert code[0]["env"]["JUPYTER_HOST"] == "http://127.0.0.1:44771"
