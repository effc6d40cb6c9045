"""The testbed daemon's interactive terminal (`/pty`), driven by a real WebSocket client.

Each test starts the daemon (tests/testbed/execd/daemon) as a process with a real bash, and
talks to it with the `websockets` library (its public sync client) or, where a client must
misbehave (an unmasked frame, silence), with a raw socket. What the recordings show frame by
frame is held by the replay (test_execd_replay.py); these tests cover what a recording cannot:
takeover and its absence per profile, replay with `since` after more than 1 MiB, and the knobs
(the idle rule shortened, the exit loss made certain or absent).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_execd_daemon import Daemon, daemon_file
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect


class Term:
    """One connection to a pty session: output bytes per channel, text frames as JSON."""

    def __init__(self, d: Daemon, sid: str, query: str = "", via: str = "") -> None:
        url = f"ws://127.0.0.1:{d.port}{via}/pty/{sid}/ws{query}"
        self._stack = contextlib.ExitStack()
        # close_timeout: after a close the daemon leaves TCP open (as the real one does), and a
        # client that waits for it to close TCP first waits this long
        self.ws: ClientConnection = self._stack.enter_context(
            connect(url, open_timeout=10, close_timeout=0.5, max_size=None)
        )
        self.out = {1: b"", 2: b""}
        self.replay: tuple[int, bytes] | None = None
        self.texts: list[dict] = []
        self.order: list[str] = []  # "replay", "connected", "output", ... as they came

    def _take(self, timeout: float) -> bool:
        try:
            msg = self.ws.recv(timeout=timeout)
        except TimeoutError:
            return False
        if isinstance(msg, str):
            assert msg.endswith("\n"), msg  # every JSON frame ends with a newline
            frame = json.loads(msg)
            self.texts.append(frame)
            self.order.append(frame["type"])
        elif msg[0] == 3:
            self.replay = (struct.unpack("!Q", msg[1:9])[0], msg[9:])
            self.order.append("replay")
        else:
            self.out[msg[0]] += msg[1:]
            if self.order[-1:] != ["output"]:
                self.order.append("output")
        return True

    def until(self, pattern: bytes, channel: int = 1, timeout: float = 10.0) -> bytes:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.out[channel]):
            left = deadline - time.monotonic()
            assert left > 0, f"{pattern!r} not in {self.out[channel]!r}"
            self._take(left)
        return self.out[channel]

    def text(self, kind: str, timeout: float = 10.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            found = [t for t in self.texts if t["type"] == kind]
            if found:
                return found[-1]
            left = deadline - time.monotonic()
            assert left > 0, f"no {kind} frame: {self.texts}"
            self._take(left)

    def closed(self, timeout: float = 10.0) -> tuple[int, str]:
        """Reads until the daemon closes; its close code and reason."""
        with pytest.raises(ConnectionClosed) as ended:
            self._read_for(timeout)
        close = ended.value.rcvd
        assert close is not None
        return close.code, close.reason

    def _read_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._take(deadline - time.monotonic())

    def send(self, data: bytes) -> None:
        self.ws.send(b"\x00" + data)

    def send_json(self, frame: dict) -> None:
        self.ws.send(json.dumps(frame))

    def close(self) -> None:
        self._stack.close()


@contextlib.contextmanager
def _daemon(workdir: Path, profile: str, **env: str) -> Iterator[Daemon]:
    env.setdefault("OSB_EXECD_PTY_EXIT_LOSS", "never")
    env.setdefault("TERM", "dumb")  # what bash sets where TERM is unset, as when recorded
    daemon = Daemon(workdir, profile, env)
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("execd-pty")


@pytest.fixture(scope="module")
def d19(workdir: Path) -> Iterator[Daemon]:
    with _daemon(workdir, "1.0.19") as daemon:
        yield daemon


@pytest.fixture(scope="module")
def d18(workdir: Path) -> Iterator[Daemon]:
    with _daemon(workdir, "1.0.18") as daemon:
        yield daemon


def create(d: Daemon, **body: str) -> str:
    r = d.client.post("/pty", json=body) if body else d.client.post("/pty")
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


def status(d: Daemon, sid: str) -> dict:
    r = d.client.get(f"/pty/{sid}")
    assert r.status_code == 200, r.text
    return dict(r.json())


# ------------------------------------------------------------------------------ pty and pipes


def test_a_shell_on_a_terminal_echoes_resizes_and_exits_with_its_status(
    d19: Daemon, workdir: Path
) -> None:
    sid = create(d19, cwd=str(workdir / "made-at-create"))
    assert (workdir / "made-at-create").is_dir()  # created by POST, before any shell
    assert status(d19, sid) == {"session_id": sid, "running": False, "output_offset": 0}
    t = Term(d19, sid)
    assert t.text("connected") == {"type": "connected", "session_id": sid, "mode": "pty"}
    t.until(rb"bash-[0-9.]+# $")
    t.send(b"printf 'a\\nb\\n'; pwd; echo \"$TERM\" $-\r")
    out = t.until(rb"dumb \S*i\S*\r\n")
    assert b"a\r\nb\r\n" in out  # the line discipline: \n out is \r\n
    assert str(workdir / "made-at-create").encode() + b"\r\n" in out
    t.send_json({"type": "resize", "cols": 100, "rows": 30})
    t.send_json({"type": "stdin", "data": "stty size\r"})
    t.until(rb"\r\n30 100\r\n")
    t.send(b"sleep 30\r")
    time.sleep(0.3)
    t.send(b"\x03")  # Ctrl-C reaches the foreground job through the terminal
    t.until(rb"\^C")
    t.send(b"echo rc=$?\r")
    t.until(rb"rc=130\r\n")
    assert status(d19, sid)["running"] is True
    t.send(b"exit 3\r")
    assert t.text("exit") == {"type": "exit", "exit_code": 3}
    assert t.closed() == (1000, "process exited")
    assert t.order[:2] == ["connected", "output"]
    after = status(d19, sid)
    assert after["running"] is False and after["output_offset"] == len(t.out[1])


def test_pipe_mode_keeps_stdout_and_stderr_apart_and_a_signal_ends_it(d19: Daemon) -> None:
    sid = create(d19)
    t = Term(d19, sid, "?pty=0")
    assert t.text("connected")["mode"] == "pipe"
    t.send(b'echo out; echo err >&2; tty; echo "flags=$-"\n')
    t.until(rb"out\nnot a tty\nflags=hBs\n")
    t.until(rb"err\n", channel=2)
    t.send(b"sleep 30\n")
    t.send_json({"type": "signal", "signal": "SIGINT"})
    assert t.text("exit")["exit_code"] == -1
    assert t.closed() == (1000, "process exited")
    # the next connection starts the shell again, in the mode it asks for, old output first
    t2 = Term(d19, sid)
    t2.text("connected")
    assert t2.replay == (0, b"out\nerr\nnot a tty\nflags=hBs\n") or t2.replay == (
        0,
        b"err\nout\nnot a tty\nflags=hBs\n",
    )
    assert t2.text("connected")["mode"] == "pty"
    assert t2.order[:2] == ["replay", "connected"]
    t2.close()
    assert d19.client.delete(f"/pty/{sid}").status_code == 200


def test_a_command_runs_instead_of_a_shell_on_1_0_19_only(d19: Daemon, d18: Daemon) -> None:
    t = Term(d19, create(d19, command="printf 'cmd-%s\\n' $((2+3)); exit 5"))
    assert t.text("exit")["exit_code"] == 5
    assert t.out[1] == b"cmd-5\r\n"
    t = Term(d18, create(d18, command="printf 'cmd-%s\\n' $((2+3)); exit 5"))
    t.until(rb"bash-[0-9.]+# $")  # v1.0.18 has no `command`: a plain shell
    t.send(b"exit 4\r")
    assert t.text("exit")["exit_code"] == 4
    assert b"cmd-5" not in t.out[1]


# ------------------------------------------------------------------- one client, takeover


def test_takeover_on_1_0_19_closes_the_holder_and_replays_from_since(d19: Daemon) -> None:
    sid = create(d19)
    first = Term(d19, sid)
    first.until(rb"# $")
    first.send(b"echo first-$((1+1))\r")
    first.until(rb"first-2\r\nbash-[0-9.]+# $")
    with pytest.raises(InvalidStatus) as refused:
        Term(d19, sid)
    assert refused.value.response.status_code == 409
    assert json.loads(refused.value.response.body or b"{}")["code"] == "ALREADY_CONNECTED"
    offset = status(d19, sid)["output_offset"]
    second = Term(d19, sid, f"?takeover=1&since={offset - 12}")
    assert first.closed() == (4001, "TAKEN_OVER")
    second.text("connected")
    assert second.replay == (offset - 12, first.out[1][-12:])
    assert second.order[:2] == ["replay", "connected"]
    second.send(b"echo second-$((1+1))\r")
    second.until(rb"second-2\r\n")  # the same shell goes on
    second.close()
    d19.client.delete(f"/pty/{sid}")


def test_1_0_18_has_no_takeover(d18: Daemon) -> None:
    sid = create(d18)
    first = Term(d18, sid)
    first.until(rb"# $")
    for query in ("", "?takeover=1"):
        with pytest.raises(InvalidStatus) as refused:
            Term(d18, sid, query)
        assert refused.value.response.status_code == 409
    plain = d18.client.get(f"/pty/{sid}/ws", params={"takeover": "1"})
    assert plain.status_code == 409
    first.send(b"echo still-first\r")
    first.until(rb"still-first\r\n")  # untouched
    first.close()
    time.sleep(0.1)
    assert d18.client.get(f"/pty/{sid}/ws").status_code == 400  # free again: not an upgrade
    d18.client.delete(f"/pty/{sid}")


# ----------------------------------------------------------------------------------- replay


def test_output_made_while_away_is_replayed_from_since_and_capped_at_1_mib(d19: Daemon) -> None:
    sid = create(d19)
    t = Term(d19, sid)
    t.until(rb"# $")
    t.send(b"sleep 0.3; head -c 1200000 /dev/zero | tr '\\0' y; echo; echo big-$((1+1))\r")
    t.until(rb"echo big-\$\(\(1\+1\)\)\r\n")
    t.close()  # the output comes while no client is attached
    deadline = time.monotonic() + 10
    while status(d19, sid)["output_offset"] < 1_200_000:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(0.2)
    total = status(d19, sid)["output_offset"]
    again = Term(d19, sid)
    again.text("connected")
    assert again.replay is not None
    offset, data = again.replay
    assert (offset, len(data)) == (total - (1 << 20), 1 << 20)
    assert re.search(rb"y\r\nbig-2\r\nbash-[0-9.]+# $", data)
    again.close()
    time.sleep(0.1)
    since = Term(d19, sid, f"?since={total - 10}")
    since.text("connected")
    assert since.replay == (total - 10, data[-10:])
    since.close()
    time.sleep(0.1)
    past = Term(d19, sid, f"?since={total}")
    past.text("connected")
    assert past.replay is None and past.order[0] == "connected"
    past.close()
    d19.client.delete(f"/pty/{sid}")


# ------------------------------------------------------------------------------------ errors


def test_delete_ends_a_connected_shell_and_every_route_is_404_after(d19: Daemon) -> None:
    sid = create(d19)
    t = Term(d19, sid)
    t.until(rb"# $")
    assert d19.client.delete(f"/pty/{sid}").status_code == 200
    assert t.text("exit")["exit_code"] == -1
    assert t.closed() == (1000, "process exited")
    message = f"pty session {sid} not found"
    for method, path in (("GET", ""), ("DELETE", ""), ("GET", "/ws")):
        r = d19.client.request(method, f"/pty/{sid}{path}")
        assert (r.status_code, r.json()) == (404, {"code": "CONTEXT_NOT_FOUND", "message": message})


def test_a_cwd_that_cannot_be_made_is_a_500_with_a_phantom_id(d19: Daemon, workdir: Path) -> None:
    (workdir / "a-file").write_text("x")
    r = d19.client.post("/pty", json={"cwd": str(workdir / "a-file" / "sub")})
    assert r.status_code == 500
    error, _, rest = r.text.partition("}")
    assert json.loads(error + "}")["message"] == (
        "error creating pty session: error creating PTY session work directory: "
        f"mkdir {workdir / 'a-file'}: not a directory"
    )
    phantom = json.loads(rest)["session_id"]
    assert d19.client.get(f"/pty/{phantom}").status_code == 404


def _raw_upgrade(d: Daemon, sid: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(
        f"GET /pty/{sid}/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 101 "), head
    return s


def _read_until_close_frame(s: socket.socket) -> bytes:
    data = b""
    while True:
        chunk = s.recv(65536)
        assert chunk, f"TCP closed before a close frame: {data!r}"
        data += chunk
        k = data.find(b"\x88")
        if k >= 0 and len(data) >= k + 2 and len(data) >= k + 2 + data[k + 1]:
            return data[k + 2 : k + 2 + data[k + 1]]


def test_an_unmasked_frame_gets_close_1002_and_tcp_is_left_open(d19: Daemon) -> None:
    sid = create(d19)
    s = _raw_upgrade(d19, sid)
    ping = b'{"type":"ping"}'
    s.sendall(bytes((0x81, len(ping))) + ping)  # no mask bit
    assert _read_until_close_frame(s) == b"\x03\xeabad MASK"
    s.settimeout(0.5)
    with pytest.raises(TimeoutError):
        s.recv(1)  # no EOF: the real daemon leaves the connection open
    t = Term(d19, sid)  # and the session is free at once
    t.text("connected")
    t.close()
    s.close()
    d19.client.delete(f"/pty/{sid}")


def test_the_daemons_own_proxy_relays_the_websocket(d19: Daemon) -> None:
    """On the testbed a sandbox's endpoint for execd's port is execd's `/proxy/44772`: the
    upgrade goes through it, as through the real daemon's reverse proxy."""
    via = f"/proxy/{d19.port}"
    r = d19.client.post(f"{via}/pty", json={})
    assert r.status_code == 201
    sid = r.json()["session_id"]
    t = Term(d19, sid, via=via)
    assert t.text("connected")["session_id"] == sid
    t.until(rb"# $")
    with pytest.raises(InvalidStatus) as refused:
        Term(d19, sid, via=via)  # an answer other than 101 is relayed as it is
    assert refused.value.response.status_code == 409
    t.send(b"echo via-$((1+1))\r")
    t.until(rb"via-2\r\n")
    t.send(b"exit 0\r")
    assert t.text("exit")["exit_code"] == 0
    assert t.closed() == (1000, "process exited")


# ------------------------------------------------------------------------------------- knobs


def test_the_idle_rule_ends_a_silent_connection_and_pongs_keep_one_alive(workdir: Path) -> None:
    with _daemon(workdir, "1.0.19", OSB_EXECD_PTY_IDLE_S="1", OSB_EXECD_PTY_PING_S="0.25") as d:
        sid = create(d)
        silent = _raw_upgrade(d, sid)  # reads, answers nothing: not even the pings
        silent.settimeout(5)
        started = time.monotonic()
        data = b""
        while chunk := silent.recv(65536):
            data += chunk
        waited = time.monotonic() - started
        assert 0.9 < waited < 3.0  # TCP closed after 1 s without a frame from the client
        assert b"\x89\x00" in data  # the server's pings (empty payload) came meanwhile
        silent.close()
        t = Term(d, sid)  # free again; this client answers each ping with a pong
        t.text("connected")
        time.sleep(2.0)
        t.send(b"echo alive\r")
        t.until(rb"alive\r\n")
        t.close()


def test_exit_loss_always_drops_the_last_output_from_the_stream_and_the_replay(
    workdir: Path,
) -> None:
    with _daemon(workdir, "1.0.19", OSB_EXECD_PTY_EXIT_LOSS="always") as d:
        sid = create(d, command="echo early; sleep 0.5; echo late")
        t = Term(d, sid)
        assert t.text("exit")["exit_code"] == 0
        assert t.out[1] == b"early\r\n"
        assert status(d, sid)["output_offset"] == len(b"early\r\n")
        again = Term(d, sid)  # the command runs again: first the replay, without `late`
        again.text("connected")
        assert again.replay == (0, b"early\r\n")
        again.text("exit")


def test_exit_loss_never_keeps_every_byte(d19: Daemon) -> None:
    for _ in range(5):
        t = Term(d19, create(d19, command="echo early; echo late"))
        t.text("exit")
        assert t.out[1] == b"early\r\nlate\r\n"


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("OSB_EXECD_PTY_EXIT_LOSS", "sometimes", "is not one of race, always, never"),
        ("OSB_EXECD_PTY_IDLE_S", "a minute", "is not a positive number"),
        ("OSB_EXECD_PTY_PING_S", "0", "is not a positive number"),
    ],
)
def test_a_knob_it_cannot_use_stops_the_daemon_with_the_reason(
    name: str, value: str, says: str, tmp_path: Path
) -> None:
    env = {**os.environ, name: value}
    done = subprocess.run(
        [sys.executable, str(daemon_file(tmp_path)), "--host", "127.0.0.1", "--port", "9"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert f"{name}={value!r} {says}" in done.stderr
