"""Tests for the project's execd stand-in (tests/testbed/execd/daemon) against execd's API.

The daemon runs as the execd image carries it: the zip application `testbed._daemon` builds.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from testbed import _daemon, replay

PACKAGE = Path(__file__).resolve().parents[1] / "testbed" / "execd" / "daemon"


def daemon_file(workdir: Path) -> Path:
    """The daemon as one file (the execd image's `/execd`), built once per work directory."""
    path = workdir / "execd.pyz"
    if not path.exists():
        _daemon.build(path, PACKAGE)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(
        self, workdir: Path, profile: str, extra_env: dict[str, str] | None = None
    ) -> None:
        self.port = _free_port()
        self.tmp = workdir / f"tmp-{self.port}"  # the daemon's temp dir (its output files)
        self.tmp.mkdir()
        env = dict(os.environ)
        env.update(
            OSB_EXECD_PROFILE=profile,
            EXECD_API_GRACE_SHUTDOWN="0s",
            EXECD_QUIET="1",
            EXECD_ENVS="",
            TMPDIR=str(self.tmp),
        )
        env.update(extra_env or {})
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(daemon_file(workdir)),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            cwd=workdir,
            env=env,
            preexec_fn=replay.default_signals,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.005)
        self.time_to_listen = time.monotonic() - self.t0
        self.client = httpx.Client(base_url=self.url, timeout=30)

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(5)

    def events(self, body: dict) -> list[dict]:
        with self.client.stream("POST", "/command", json=body) as r:
            assert r.status_code == 200, r.read()
            assert r.headers["content-type"] == "text/event-stream"
            raw = r.read().decode()
        assert raw.endswith("\n\n")
        return [json.loads(f) for f in raw.split("\n\n") if f]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("execd")


@pytest.fixture(scope="module")
def d(workdir: Path) -> Iterator[Daemon]:
    """The modelled 1.1 generation (modern framing, argv)."""
    daemon = Daemon(workdir, "1.1")
    yield daemon
    daemon.stop()


def texts(events: list[dict], kind: str) -> list[str]:
    return [e["text"] for e in events if e["type"] == kind]


# ------------------------------------------------------------------------------------- basics


def test_ping_and_fast_start(d: Daemon) -> None:
    assert d.client.get("/ping").status_code == 200
    assert d.time_to_listen < 2.0


def test_unknown_route_404(d: Daemon) -> None:
    r = d.client.get("/nope")
    assert r.status_code == 404


def test_command_events_shape(d: Daemon) -> None:
    ev = d.events({"command": "echo out; echo err >&2"})
    assert ev[0]["type"] == "init"
    assert len(ev[0]["text"]) > 8
    assert ev[0]["timestamp"] > 0
    assert "".join(texts(ev, "stdout")) == "out\n"
    assert "".join(texts(ev, "stderr")) == "err\n"
    assert ev[-1]["type"] == "execution_complete"


def test_nonzero_exit_error_event(d: Daemon) -> None:
    ev = d.events({"command": "exit 7"})
    assert ev[-1]["type"] == "error"
    assert ev[-1]["error"] == {
        "ename": "CommandExecError",
        "evalue": "7",
        "traceback": ["exit status 7"],
    }


def test_missing_program_127(d: Daemon) -> None:
    ev = d.events({"command": "definitely-not-a-program-xyz"})
    assert ev[-1]["error"]["evalue"] == "127"
    assert "not found" in "".join(texts(ev, "stderr"))
    ev = d.events({"argv": ["definitely-not-a-program-xyz"]})
    assert ev[0]["type"] == "init"
    assert ev[-1]["error"]["evalue"] == "127"


def test_argv_no_shell(d: Daemon) -> None:
    ev = d.events({"argv": ["printf", "%s|", "a b", "$HOME", "*"]})
    assert "".join(texts(ev, "stdout")) == "a b|$HOME|*|"


def test_cwd_envs_and_missing_cwd(d: Daemon, workdir: Path) -> None:
    sub = workdir / "cwdtest"
    sub.mkdir()
    ev = d.events({"command": "pwd; echo $FOO", "cwd": str(sub), "envs": {"FOO": "bar"}})
    assert "".join(texts(ev, "stdout")) == f"{sub}\nbar\n"
    r = d.client.post("/command", json={"command": "pwd", "cwd": str(workdir / "missing")})
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "INVALID_REQUEST_BODY"
    assert "no such file or directory" in body["message"]
    r = d.client.post("/command", json={"cwd": "/"})
    assert r.status_code == 400
    assert r.json()["code"] == "INVALID_REQUEST_BODY"


def test_timeout_kills_process_group(d: Daemon, workdir: Path) -> None:
    pidfile = workdir / "child.pid"
    t = time.monotonic()
    ev = d.events({"command": f"sleep 30 & echo $! > {pidfile}; wait", "timeout": 500})
    assert time.monotonic() - t < 5
    assert ev[-1]["type"] == "error"
    assert ev[-1]["error"]["evalue"] == "-1"
    assert ev[-1]["error"]["traceback"] == ["signal: killed"]
    child = int(pidfile.read_text())
    time.sleep(0.2)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_completion_does_not_wait_for_background_children(d: Daemon) -> None:
    t = time.monotonic()
    ev = d.events({"command": "sleep 3 & echo done"})
    assert time.monotonic() - t < 2
    assert ev[-1]["type"] == "execution_complete"
    assert "".join(texts(ev, "stdout")) == "done\n"


def test_go_json_escaping_and_invalid_utf8(d: Daemon) -> None:
    with d.client.stream(
        "POST", "/command", json={"command": "printf '<a&b>'; printf 'x\\377y'"}
    ) as r:
        raw = r.read()
    assert b"\\u003ca\\u0026b\\u003e" in raw
    ev = [json.loads(f) for f in raw.decode().split("\n\n") if f]
    assert "".join(texts(ev, "stdout")) == "<a&b>x\ufffdy"


def test_64_concurrent_commands(d: Daemon, workdir: Path) -> None:
    """64 commands run at the same time: each marks its start, then waits until all 64 have
    started (a daemon running fewer at once never gets there); no wall-clock bound."""
    from concurrent.futures import ThreadPoolExecutor

    met, go = workdir / "met", workdir / "go"
    met.mkdir()
    wait = f"n=0; while [ ! -e {go} ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done"

    def one(i: int) -> str:
        body = {"command": f"touch {met}/{i}; {wait}; [ -e {go} ] && echo n{i}"}
        with (
            httpx.Client(base_url=d.url, timeout=60) as c,
            c.stream("POST", "/command", json=body) as r,
        ):
            return r.read().decode()

    with ThreadPoolExecutor(64) as pool:
        futures = [pool.submit(one, i) for i in range(64)]
        deadline = time.monotonic() + 30
        while len(list(met.iterdir())) < 64 and time.monotonic() < deadline:
            time.sleep(0.02)
        started = len(list(met.iterdir()))
        go.touch()
        results = [f.result() for f in futures]
    assert started == 64
    for i, raw in enumerate(results):
        assert f'"text":"n{i}\\n"' in raw
        assert '"execution_complete"' in raw


def test_background_status_logs_interrupt(d: Daemon) -> None:
    ev = d.events({"command": "echo one; echo two >&2; sleep 30", "background": True})
    assert [e["type"] for e in ev] == ["init", "ping", "execution_complete"]
    cid = ev[0]["text"]
    time.sleep(0.3)
    st = d.client.get(f"/command/status/{cid}").json()
    assert st["id"] == cid
    assert st["running"] is True
    assert "exit_code" not in st
    assert st["started_at"]
    r = d.client.get(f"/command/{cid}/logs")
    assert r.status_code == 200
    assert r.text == "one\ntwo\n"
    assert r.headers["EXECD-COMMANDS-TAIL-CURSOR"] == str(len("one\ntwo\n"))
    r = d.client.get(f"/command/{cid}/logs", params={"cursor": 4})
    assert r.text == "two\n"
    assert d.client.delete("/command", params={"id": cid}).status_code == 200
    time.sleep(0.2)
    st = d.client.get(f"/command/status/{cid}").json()
    assert st["running"] is False
    assert st["exit_code"] == -1
    assert st["finished_at"]
    assert st["error"] == "signal: terminated"
    assert d.client.get("/command/status/nope").status_code == 404
    r = d.client.delete("/command", params={"id": cid})
    assert r.status_code == 500
    assert "not running" in r.json()["message"]


def test_interrupt_foreground(d: Daemon) -> None:
    import threading

    ids: list[str] = []
    out: list[list[dict]] = []

    def run() -> None:
        with d.client.stream("POST", "/command", json={"command": "sleep 30"}) as r:
            buf = b""
            events = []
            for chunk in r.iter_bytes():
                buf += chunk
                while b"\n\n" in buf:
                    frame, buf = buf.split(b"\n\n", 1)
                    events.append(json.loads(frame))
                    if events[-1]["type"] == "init":
                        ids.append(events[-1]["text"])
            out.append(events)

    th = threading.Thread(target=run)
    th.start()
    deadline = time.monotonic() + 5
    while not ids and time.monotonic() < deadline:
        time.sleep(0.02)
    assert d.client.delete("/command", params={"id": ids[0]}).status_code == 200
    th.join(10)
    assert out
    assert out[0][-1]["type"] == "error"
    assert out[0][-1]["error"]["evalue"] == "-1"


def test_sessions(d: Daemon, workdir: Path) -> None:
    sid = d.client.post("/session", json={"cwd": str(workdir)}).json()["session_id"]
    with d.client.stream(
        "POST", f"/session/{sid}/run", json={"command": "export ZZ=42; cd /tmp; echo hi"}
    ) as r:
        ev = [json.loads(f) for f in r.read().decode().split("\n\n") if f]
    assert texts(ev, "stdout") == ["hi"]
    assert ev[-1]["type"] == "execution_complete"
    with d.client.stream(
        "POST", f"/session/{sid}/run", json={"command": "echo $ZZ; pwd; exit 3"}
    ) as r:
        ev = [json.loads(f) for f in r.read().decode().split("\n\n") if f]
    assert texts(ev, "stdout") == ["42", "/tmp"]
    assert ev[-1]["error"]["evalue"] == "3"
    assert d.client.delete(f"/session/{sid}").status_code == 200
    assert d.client.delete(f"/session/{sid}").status_code == 404


def test_access_token(workdir: Path) -> None:
    daemon = Daemon(workdir, "1.1", {"EXECD_ACCESS_TOKEN": "s3cret"})
    try:
        r = daemon.client.get("/ping")
        assert r.status_code == 401
        assert "X-EXECD-ACCESS-TOKEN" in r.json()["error"]
        assert (
            daemon.client.get("/ping", headers={"X-EXECD-ACCESS-TOKEN": "s3cret"}).status_code
            == 200
        )
    finally:
        daemon.stop()


def test_grace_period_default(workdir: Path) -> None:
    daemon = Daemon(workdir, "1.0.19", {"EXECD_API_GRACE_SHUTDOWN": "1s"})
    try:
        t = time.monotonic()
        ev = daemon.events({"command": "true"})
        assert ev[-1]["type"] == "execution_complete"
        assert time.monotonic() - t >= 0.95
    finally:
        daemon.stop()


# -------------------------------------------------------------------------------------- framing

FRAMING_CMD = "printf 'a\\n\\nb\\r\\nc'"


def test_framing_modern(d: Daemon) -> None:
    ev = d.events({"command": FRAMING_CMD})
    assert "".join(texts(ev, "stdout")) == "a\n\nb\r\nc"


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ("1.0.19", ["a", "\n", "b", "c"]),
        ("1.0.18", ["a", "\n", "b", "c"]),
        ("1.0.16", ["a", "b", "c"]),
    ],
)
def test_framing_line_modes(workdir: Path, profile: str, expected: list[str]) -> None:
    daemon = Daemon(workdir, profile)
    try:
        assert texts(daemon.events({"command": FRAMING_CMD}), "stdout") == expected
        ev = daemon.events({"command": "printf 'x\\n\\n\\ny\\n'"})
        assert texts(ev, "stdout") == (
            ["x", "\n", "\n", "y"] if profile != "1.0.16" else ["x", "y"]
        )
        ev = daemon.events({"command": "head -c 1048576 /dev/zero | tr '\\0' 'q'; echo"})
        assert texts(ev, "stdout") == ["q" * 1048576]
        r = daemon.client.post("/command", json={"argv": ["true"]})
        assert r.status_code == 400
    finally:
        daemon.stop()


def test_modern_one_mib_line(d: Daemon) -> None:
    ev = d.events({"command": "head -c 1048576 /dev/zero | tr '\\0' 'q'; echo"})
    assert "".join(texts(ev, "stdout")) == "q" * 1048576 + "\n"


# ------------------------------------------------------------------- generation profiles


@pytest.fixture(scope="module")
def d19(workdir: Path) -> Iterator[Daemon]:
    """The default profile, 1.0.19 (as the recordings of the real v1.0.19 show)."""
    daemon = Daemon(workdir, "1.0.19")
    yield daemon
    daemon.stop()


def test_without_bash_commands_run_with_sh_and_sessions_fail_as_execd(workdir: Path) -> None:
    """An image without bash (busybox): execd runs commands with `sh -c` (it looks bash up on its
    PATH first) but sessions only with bash, so a session run answers its start error inside
    the 200 stream, as a timeout does."""
    only_sh = workdir / "only-sh"
    only_sh.mkdir()
    (only_sh / "sh").symlink_to(shutil.which("sh") or "/bin/sh")
    daemon = Daemon(workdir, "1.0.19", {"PATH": str(only_sh)})
    try:
        ev = daemon.events({"command": 'echo "$0"'})
        assert texts(ev, "stdout") == ["sh"]
        assert ev[-1]["type"] == "execution_complete"
        sid = daemon.client.post("/session").json()["session_id"]
        with daemon.client.stream("POST", f"/session/{sid}/run", json={"command": "true"}) as r:
            assert r.status_code == 200
            raw = r.read()
        assert json.loads(raw.split(b"\n\n")[0])["type"] == "init"
        assert raw.endswith(
            b'{"code":"RUNTIME_ERROR","message":"error running in session. start bash: exec: '
            b'\\"bash\\": executable file not found in $PATH"}'
        )
    finally:
        daemon.stop()


def test_the_daemon_file_is_the_same_for_the_same_sources(tmp_path: Path) -> None:
    """The execd image's input hash follows the zip application's sources: fixed order, times
    and modes, so two builds of the same sources are the same bytes, and a change shows; the
    compiled modules beside them are this Python's bytecode of the same sources."""
    first = _daemon.zipapp_bytes(PACKAGE)
    assert _daemon.zipapp_bytes(PACKAGE) == first
    assert _daemon.source_key(PACKAGE) == _daemon.source_key(PACKAGE)
    copy = tmp_path / "daemon"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    os.utime(copy / "routes.py", (1, 1))
    assert _daemon.source_key(copy) == _daemon.source_key(PACKAGE)
    (copy / "routes.py").write_text((copy / "routes.py").read_text() + "\n")
    assert _daemon.source_key(copy) != _daemon.source_key(PACKAGE)
    with zipfile.ZipFile(io.BytesIO(first)) as archive:
        names = archive.namelist()
        assert names == sorted(names, key=lambda n: (n != "__main__.py", n))
        assert "daemon/routes.py" in names and "daemon/routes.pyc" in names
        assert {i.date_time for i in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_unknown_profile_is_refused_with_the_choices(workdir: Path) -> None:
    env = dict(os.environ, OSB_EXECD_PROFILE="2.0", EXECD_QUIET="1")
    proc = subprocess.run(
        [sys.executable, str(daemon_file(workdir)), "--port", str(_free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert proc.returncode == 2
    assert "unknown OSB_EXECD_PROFILE '2.0'" in proc.stderr
    assert "1.0.19, 1.0.18, 1.1, 1.0.16" in proc.stderr


def test_profile_default_is_1_0_19(workdir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OSB_EXECD_PROFILE"}
    out = subprocess.run(
        [sys.executable, "-c", "from daemon import config; print(config.PROFILE, config.FRAMING)"],
        env=env | {"PYTHONPATH": str(PACKAGE.parent)},
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    )
    assert out.stdout.split() == ["1.0.19", "lines"]


def test_first_ping_follows_init_and_output_files_stay(d19: Daemon) -> None:
    ev = d19.events({"command": "printf 'a\\r\\nb'; printf 'e\\n' >&2"})
    assert [e["type"] for e in ev[:2]] == ["init", "ping"]
    assert texts(ev, "stdout") == ["a", "b"]
    assert texts(ev, "stderr") == ["e"]
    cid = ev[0]["text"]
    # execd keeps each command's raw output in its temp dir, byte for byte, and never deletes it
    assert (d19.tmp / f"{cid}.stdout").read_bytes() == b"a\r\nb"
    assert (d19.tmp / f"{cid}.stderr").read_bytes() == b"e\n"


def test_go_header_order_and_no_server_header(d19: Daemon) -> None:
    with socket.create_connection(("127.0.0.1", d19.port)) as s:
        s.sendall(b"GET /command/status/nope HTTP/1.1\r\nHost: x\r\n\r\n")
        head = s.recv(65536).split(b"\r\n\r\n", 1)[0].decode()
    lines = head.split("\r\n")
    assert lines[0] == "HTTP/1.1 404 Not Found"
    assert [ln.split(":", 1)[0] for ln in lines[1:]] == ["Content-Type", "Date", "Content-Length"]
    r = d19.client.get("/no-such-route")
    assert r.headers["content-type"] == "text/plain"
    assert r.text == "404 page not found"


def test_argv_is_only_understood_by_1_1(d: Daemon, d19: Daemon) -> None:
    body = {"command": "echo from-command", "argv": ["echo", "from-argv"]}
    assert texts(d19.events(body), "stdout") == ["from-command"]  # unknown field: ignored
    r = d19.client.post("/command", json={"argv": ["echo", "x"]})
    assert r.status_code == 400
    assert "'RunCommandRequest.Command'" in r.json()["message"]
    assert "".join(texts(d.events({"argv": ["echo", "x"]}), "stdout")) == "x\n"


def test_request_bodies_decoded_like_go(d19: Daemon) -> None:
    def message(raw: bytes) -> str:
        r = d19.client.post("/command", content=raw)
        assert r.status_code == 400, r.text
        assert r.json()["code"] == "INVALID_REQUEST_BODY"
        return str(r.json()["message"])

    prefix = "error parsing request, MAYBE invalid body format. "
    assert message(b"") == prefix + "EOF"
    assert message(b'{"command": "x"') == prefix + "unexpected EOF"
    assert message(b"[]") == (
        prefix + "json: cannot unmarshal array into Go value of type model.RunCommandRequest"
    )
    assert message(b'{"command": "x", "timeout": "1"}') == (
        prefix + "json: cannot unmarshal string into Go struct field "
        "RunCommandRequest.timeout of type int64"
    )
    assert message(b'{"command": "x", "uid": -1}') == (
        prefix + "json: cannot unmarshal number -1 into Go struct field "
        "RunCommandRequest.uid of type uint32"
    )
    assert message(b'{"command": "x", "envs": {"A": true}}') == (
        prefix + "json: cannot unmarshal bool into Go struct field "
        "RunCommandRequest.envs of type string"
    )
    assert "'TimeoutMs' failed on the 'gte' tag" in message(b'{"command": "x", "timeout": -5}')
    # only the first JSON value counts, as with Go's json.Decoder
    ev = d19.events({"command": "echo ok"})
    assert texts(ev, "stdout") == ["ok"]
    with d19.client.stream("POST", "/command", content=b'{"command":"echo t"} junk') as r:
        assert r.status_code == 200


def test_cwd_expanded_like_execd(d19: Daemon, workdir: Path) -> None:
    (workdir / "dx").mkdir(exist_ok=True)
    (workdir / "keep$").mkdir(exist_ok=True)
    ev = d19.events({"command": "pwd", "cwd": f"{workdir}/d$1x"})  # "$1" is removed
    assert texts(ev, "stdout") == [f"{workdir}/dx"]
    ev = d19.events({"command": "pwd", "cwd": f"{workdir}/keep$"})  # a final "$" stays
    assert texts(ev, "stdout") == [f"{workdir}/keep$"]
    r = d19.client.post("/command", json={"command": "pwd", "cwd": f"{workdir}/p$$q"})
    assert r.status_code == 400
    assert r.json()["message"] == (
        "invalid request, validation error cannot resolve working directory "
        f'"{workdir}/p$$q": path references undefined environment variables: q'
    )
    r = d19.client.post(
        "/command", json={"command": "pwd", "cwd": "$MYDIR", "envs": {"MYDIR": str(workdir)}}
    )
    assert r.status_code == 400  # the request's envs do not count


def test_cwd_with_several_undefined_names_follows_execds_pathutil(workdir: Path) -> None:
    """One expansion serves `cwd` and the file routes (pathutil.ExpandPath): the undefined
    names are listed once each, sorted and joined with ",", an unclosed `${NAME` is no
    reference (os.Expand eats the `${`), and the `~` join is cleaned like filepath.Join."""
    home = workdir / "home-cwd"
    (home / "b").mkdir(parents=True, exist_ok=True)
    (workdir / "dZZ_C").mkdir(exist_ok=True)
    daemon = Daemon(workdir, "1.0.19", {"HOME": str(home)})
    try:
        cwd = f"{workdir}/$ZZ_B/${{ZZ_A}}/$ZZ_B$HOME"
        r = daemon.client.post("/command", json={"command": "pwd", "cwd": cwd})
        assert r.status_code == 400
        assert r.json()["message"] == (
            f'invalid request, validation error cannot resolve working directory "{cwd}": '
            "path references undefined environment variables: ZZ_A,ZZ_B"
        )
        ev = daemon.events({"command": "pwd", "cwd": f"{workdir}/d${{ZZ_C"})
        assert texts(ev, "stdout") == [f"{workdir}/dZZ_C"]
        ev = daemon.events({"command": "pwd", "cwd": "~/a/../b"})  # "a" does not exist
        assert texts(ev, "stdout") == [f"{home}/b"]
        # the file routes expand the same way
        r = daemon.client.get("/files/info", params={"path": cwd})
        assert r.status_code == 500
        assert r.json()["message"].endswith("undefined environment variables: ZZ_A,ZZ_B")
    finally:
        daemon.stop()


def test_background_group_is_killed_when_the_main_process_exits(d19: Daemon, workdir: Path) -> None:
    pidfile = workdir / "bg-child.pid"
    ev = d19.events(
        {"command": f"sleep 30 & echo $! > {pidfile}; echo main exits", "background": True}
    )
    cid = ev[0]["text"]
    deadline = time.monotonic() + 10
    while d19.client.get(f"/command/status/{cid}").json().get("running", True):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.2)
    assert not _alive(int(pidfile.read_text()))
    assert (d19.tmp / f"{cid}.output").read_bytes() == b"main exits\n"
    r = d19.client.get(f"/command/{cid}/logs", params={"cursor": -1})
    assert r.status_code == 400
    assert r.json()["message"] == f"error seek file: seek {d19.tmp}/{cid}.output: invalid argument"


def test_session_quirks(d19: Daemon) -> None:
    sid = d19.client.post("/session").json()["session_id"]
    assert len(sid) == 36 and sid.count("-") == 4  # a UUID
    with d19.client.stream(
        "POST", f"/session/{sid}/run", json={"command": "printf 'a\\n\\nb\\r\\n'; echo e >&2"}
    ) as r:
        ev = [json.loads(f) for f in r.read().decode().split("\n\n") if f]
    assert texts(ev, "stdout") == ["a", "b", "e"]  # blank line dropped, \r stripped, stderr in
    with d19.client.stream(
        "POST", f"/session/{sid}/run", json={"command": "echo t; sleep 1", "timeout": 200}
    ) as r:
        raw = r.read()
    assert raw.endswith(
        b'{"code":"RUNTIME_ERROR","message":"error running in session. timeout after 200ms"}'
    )
    assert sorted(p.name for p in d19.tmp.glob("execd_bash_*.sh")) != []
    assert d19.client.delete(f"/session/{sid}").status_code == 200
    r = d19.client.post(f"/session/{sid}/run", json={"command": "true"})
    assert r.status_code == 500
    assert r.json()["message"] == "error running in session. context not found"


# ---------------------------------------------------------------------------------------- files


def upload(d: Daemon, items: list[tuple[dict, bytes]], chunked: bool = False) -> httpx.Response:
    boundary = "XbOuNdArYx"
    parts = []
    for meta, data in items:
        parts.append(
            f"--{boundary}\r\n"
            'Content-Disposition: form-data; name="metadata"; filename="metadata"\r\n'
            f"Content-Type: application/json\r\n\r\n{json.dumps(meta)}\r\n".encode()
        )
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n'
            f"Content-Type: application/octet-stream\r\n\r\n".encode()
            + data
            + b"\r\n"
        )
    parts.append(f"--{boundary}--\r\n".encode())
    headers = {"content-type": f"multipart/form-data; boundary={boundary}"}
    if chunked:
        return d.client.post("/files/upload", content=iter(parts), headers=headers)
    return d.client.post("/files/upload", content=b"".join(parts), headers=headers)


def test_upload_modes_and_quirks(d: Daemon, workdir: Path) -> None:
    p = workdir / "up" / "deep" / "a.txt"
    assert upload(d, [({"path": str(p), "mode": 644}, b"hello")]).status_code == 200
    assert p.read_bytes() == b"hello"
    assert stat.S_IMODE(p.stat().st_mode) == 0o644
    assert upload(d, [({"path": str(p), "mode": 420}, b"hi")], chunked=True).status_code == 200
    assert p.read_bytes() == b"hi"
    assert stat.S_IMODE(p.stat().st_mode) == 0o420
    r = upload(d, [({"path": str(p), "mode": 493}, b"partial")])
    assert r.status_code == 500
    assert r.json()["code"] == "RUNTIME_ERROR"
    assert 'strconv.ParseUint: parsing "493": invalid syntax' in r.json()["message"]
    assert p.read_bytes() == b"partial"  # not atomic: written before the chmod failed
    # mode 0 / absent: no chmod, existing mode kept
    os.chmod(p, 0o600)
    assert upload(d, [({"path": str(p)}, b"z")]).status_code == 200
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    # symlinks are followed
    real = workdir / "real.txt"
    real.write_text("old")
    link = workdir / "link.txt"
    link.symlink_to(real)
    assert upload(d, [({"path": str(link), "mode": 644}, b"new")]).status_code == 200
    assert link.is_symlink()
    assert real.read_text() == "new"
    # multi-file upload stops at the first error, earlier files already written
    first, blocker = workdir / "m1.txt", workdir / "blocker"
    blocker.write_text("x")
    third = workdir / "m3.txt"
    r = upload(
        d,
        [
            ({"path": str(first)}, b"1"),
            ({"path": str(blocker / "x")}, b"2"),
            ({"path": str(third)}, b"3"),
        ],
    )
    assert r.status_code == 500
    assert "not a directory" in r.json()["message"]
    assert first.read_text() == "1"
    assert not third.exists()


def test_file_info_search_list(d: Daemon, workdir: Path) -> None:
    base = workdir / "info"
    (base / "sub").mkdir(parents=True)
    (base / "a.py").write_text("abc")
    (base / "sub" / "b.py").write_text("x")
    (base / "c.txt").write_text("y")
    os.chmod(base / "a.py", 0o640)
    r = d.client.get("/files/info", params=[("path", str(base / "a.py")), ("path", str(base))])
    info = r.json()
    a = info[str(base / "a.py")]
    assert a["type"] == "file"
    assert a["size"] == 3
    assert a["mode"] == 640
    assert set(a) == {"path", "type", "size", "modified_at", "created_at", "owner", "group", "mode"}
    assert info[str(base)]["type"] == "directory"
    r = d.client.get("/files/info", params={"path": str(base / "missing")})
    assert r.status_code == 404
    assert r.json()["code"] == "FILE_NOT_FOUND"
    found = d.client.get("/files/search", params={"path": str(base), "pattern": "*.py"}).json()
    assert sorted(f["path"] for f in found) == [str(base / "a.py"), str(base / "sub" / "b.py")]
    listed = d.client.get("/directories/list", params={"path": str(base)}).json()
    assert [e["path"] for e in listed] == [str(base / n) for n in ("a.py", "c.txt", "sub")]
    deep = d.client.get("/directories/list", params={"path": str(base), "depth": 2}).json()
    assert str(base / "sub" / "b.py") in [e["path"] for e in deep]


def test_download_range_404_dir_and_delete(d: Daemon, workdir: Path) -> None:
    f = workdir / "dl.bin"
    f.write_bytes(bytes(range(256)))
    r = d.client.get("/files/download", params={"path": str(f)})
    assert r.status_code == 200
    assert r.content == bytes(range(256))
    r = d.client.get("/files/download", params={"path": str(f)}, headers={"Range": "bytes=10-19"})
    assert r.status_code == 206
    assert r.content == bytes(range(10, 20))
    assert r.headers["Content-Range"] == "bytes 10-19/256"
    r = d.client.get("/files/download", params={"path": str(f)}, headers={"Range": "bytes=-6"})
    assert r.status_code == 206
    assert r.content == bytes(range(250, 256))
    r = d.client.get("/files/download", params={"path": str(workdir / "nope")})
    assert r.status_code == 404
    assert "open " in r.json()["message"]
    # A directory: Go serves the size a seek to its end gives (ext4: 2**63 - 1), then fails the
    # read and drops the connection; a file system whose directories refuse that seek (tmpfs)
    # gets "seeker can't seek".
    end = _seek_end(workdir)
    with d.client.stream("GET", "/files/download", params={"path": str(workdir)}) as r:
        if end is None:
            assert (r.status_code, r.read()) == (500, SEEKER)
        else:
            assert r.status_code == 200
            assert r.headers["Content-Length"] == str(end)
            with pytest.raises(httpx.RemoteProtocolError):
                r.read()
    r = d.client.delete("/files", params={"path": str(workdir)})
    assert r.status_code == 500
    assert "is a directory" in r.json()["message"]
    assert d.client.delete("/files", params={"path": str(f)}).status_code == 200
    assert not f.exists()
    assert d.client.delete("/files", params={"path": str(f)}).status_code == 200


def test_dirs_mv_permissions_replace(d: Daemon, workdir: Path) -> None:
    nd = workdir / "nd" / "x"
    assert d.client.post("/directories", json={str(nd): {"mode": 700}}).status_code == 200
    assert stat.S_IMODE(nd.stat().st_mode) == 0o700
    src = nd / "s.txt"
    src.write_text("hello localhost")
    assert (
        d.client.post("/files/mv", json=[{"src": str(src), "dest": str(nd / "t.txt")}]).status_code
        == 200
    )
    r = d.client.post("/files/mv", json=[{"src": str(src), "dest": str(nd / "u.txt")}])
    assert r.status_code == 404
    assert (
        d.client.post("/files/permissions", json={str(nd / "t.txt"): {"mode": 600}}).status_code
        == 200
    )
    assert stat.S_IMODE((nd / "t.txt").stat().st_mode) == 0o600
    r = d.client.post("/files/permissions", json={str(nd / "t.txt"): {"mode": 789}})
    assert r.status_code == 500
    assert "invalid syntax" in r.json()["message"]
    r = d.client.post(
        "/files/replace",
        params={"verbose": "true"},
        json={str(nd / "t.txt"): {"old": "localhost", "new": "0.0.0.0"}},
    )
    assert r.json() == {str(nd / "t.txt"): {"replacedCount": 1}}
    assert (nd / "t.txt").read_text() == "hello 0.0.0.0"
    assert d.client.delete("/directories", params={"path": str(workdir / "nd")}).status_code == 200
    assert not (workdir / "nd").exists()
    assert d.client.delete("/directories", params={"path": str(workdir / "nd")}).status_code == 200


def test_metrics(d: Daemon) -> None:
    m = d.client.get("/metrics").json()
    assert m["cpu_count"] >= 1
    assert m["mem_total_mib"] > 0
    assert m["timestamp"] > 0


def test_proxy(d: Daemon) -> None:
    import http.server
    import threading

    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            out = json.dumps(
                {
                    "path": self.path,
                    "body": body.decode(),
                    "xff": self.headers.get("X-Forwarded-Proto"),
                }
            ).encode()
            self.send_response(201)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a: object) -> None:
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        r = d.client.post(f"/proxy/{srv.server_address[1]}/x/y?q=1", content=b"payload")
        assert r.status_code == 201
        assert r.json() == {"path": "/x/y?q=1", "body": "payload", "xff": "http"}
    finally:
        srv.shutdown()


SEEKER = b"seeker can't seek\n"


def _seek_end(path: Path) -> int | None:
    """Where the kernel puts a seek to the end of `path` (None: refused), as Go's ServeContent
    asks it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    except OSError:
        return None
    finally:
        os.close(fd)


def _info(daemon: Daemon, path: Path | str) -> httpx.Response:
    return daemon.client.get("/files/info", params={"path": str(path)})


def _assert_seeker_cant_seek(r: httpx.Response, name: str) -> None:
    """Go's serveError after execd set its headers: http.Error's text, Content-Disposition kept,
    Last-Modified and the declared length dropped."""
    assert (r.status_code, r.content) == (500, SEEKER), (r.status_code, r.content[:80])
    assert [(k, v) for k, v in r.headers.items() if k != "date"] == [
        ("content-disposition", f'attachment; filename="{name}"'),
        ("content-type", "text/plain; charset=utf-8"),
        ("x-content-type-options", "nosniff"),
        ("content-length", "18"),
    ]
    assert "last-modified" not in r.headers and "accept-ranges" not in r.headers


def test_special_files_as_go_serve_content_answers_them(
    d: Daemon, d19: Daemon, workdir: Path
) -> None:
    """Download sizes a file the way Go's http.ServeContent does, by seeking to its end: procfs
    files (stat: regular, size 0) and pipes refuse, devices land on 0, sysfs on its stat size.
    Not a table of paths: any /proc file behaves so. Info follows each profile."""
    sp = workdir / "special"
    sp.mkdir()
    (sp / "loop").symlink_to("loop")
    os.mkfifo(sp / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sp / "sock"))
    d18 = Daemon(workdir, "1.0.18")
    try:
        for daemon, typed in ((d19, True), (d, True), (d18, False)):
            for path, kind in (
                ("/proc/version", "file"),
                ("/proc/self/status", "file"),
                ("/dev/null", "other"),
                (sp / "fifo", "other"),
                (sp / "sock", "other"),
            ):
                info = _info(daemon, path).json()[str(path)]
                assert info.get("type") == (kind if typed else None), (path, info)
                if str(path).startswith("/proc"):
                    assert info["size"] == 0
            r = _info(daemon, sp / "loop")
            if typed:  # lstat
                assert r.json()[str(sp / "loop")]["type"] == "symlink"
            else:  # v1.0.18: stat
                assert r.status_code == 500
                assert r.json()["message"].endswith(": too many levels of symbolic links")

            for path in ("/proc/version", "/proc/self/status", "/proc/cpuinfo", "/proc/meminfo"):
                r = daemon.client.get("/files/download", params={"path": path})
                _assert_seeker_cant_seek(r, path.rsplit("/", 1)[1])
            r = daemon.client.get(
                "/files/download", params={"path": "/proc/version"}, headers={"Range": "bytes=0-9"}
            )
            _assert_seeker_cant_seek(r, "version")
            r = daemon.client.get("/files/download", params={"path": "/dev/null"})
            assert (r.status_code, r.content, r.headers["accept-ranges"]) == (200, b"", "bytes")
            r = daemon.client.get(
                "/files/download", params={"path": "/dev/zero"}, headers={"Range": "bytes=0-15"}
            )  # size 0: Go ignores the range
            assert (r.status_code, r.content, r.headers["content-length"]) == (200, b"", "0")
            assert "content-range" not in r.headers
            r = daemon.client.get("/files/download", params={"path": str(sp / "loop")})
            assert r.status_code == 500
            assert r.json()["message"] == (
                f"error accessing file: open {sp / 'loop'}: too many levels of symbolic links"
            )
            r = daemon.client.get("/files/download", params={"path": str(sp / "sock")})
            assert r.status_code == 500  # opening a socket fails: ENXIO
            assert r.json()["message"].endswith(": no such device or address")

            def writer() -> None:  # blocks until the daemon opens the fifo
                with contextlib.suppress(OSError), open(sp / "fifo", "wb") as fh:
                    fh.write(b"fifo-data")

            thread = threading.Thread(target=writer, daemon=True)
            thread.start()
            r = daemon.client.get("/files/download", params={"path": str(sp / "fifo")}, timeout=10)
            _assert_seeker_cant_seek(r, "fifo")
            thread.join(10)
            assert stat.S_ISFIFO(os.lstat(sp / "fifo").st_mode)

        # sysfs: regular files whose stat size (4096) is more than they hold; Go declares the
        # seek's size, sends what a read gives and then drops the connection.
        sys_file = next(
            (
                f
                for f in (
                    Path("/sys/kernel/mm/transparent_hugepage/enabled"),
                    Path("/sys/power/state"),
                )
                if f.is_file() and os.access(f, os.R_OK)
            ),
            None,
        )
        if sys_file is not None and _seek_end(sys_file):
            with d19.client.stream("GET", "/files/download", params={"path": str(sys_file)}) as r:
                assert r.status_code == 200
                assert r.headers["content-length"] == str(_seek_end(sys_file))
                with pytest.raises(httpx.RemoteProtocolError):
                    r.read()
    finally:
        d18.stop()
        sock.close()


def test_fifo_download_blocks(d: Daemon, workdir: Path) -> None:
    fifo = workdir / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(httpx.ReadTimeout):
        d.client.get("/files/download", params={"path": str(fifo)}, timeout=0.5)
    with open(fifo, "wb") as fh:  # unblock the daemon's open()
        fh.write(b"")


# -------------------------------------------------------------------------------- via the SDK


async def test_sdk_adapters(d: Daemon, workdir: Path) -> None:
    from opensandbox.adapters.command_adapter import CommandsAdapter
    from opensandbox.adapters.filesystem_adapter import FilesystemAdapter
    from opensandbox.config import ConnectionConfig
    from opensandbox.models.execd import RunCommandOpts
    from opensandbox.models.filesystem import WriteEntry
    from opensandbox.models.sandboxes import SandboxEndpoint

    cfg = ConnectionConfig(domain=f"127.0.0.1:{d.port}", use_server_proxy=False)
    ep = SandboxEndpoint(endpoint=f"127.0.0.1:{d.port}")
    cmds = CommandsAdapter(cfg, ep)
    fs = FilesystemAdapter(cfg, ep)

    ex = await cmds.run("echo hello; echo oops >&2; exit 4")
    assert ex.exit_code == 4
    assert "".join(m.text for m in ex.logs.stdout) == "hello\n"
    assert "".join(m.text for m in ex.logs.stderr) == "oops\n"
    ex = await cmds.run(["sh", "-c", "printf ok"])
    assert ex.exit_code == 0
    assert "".join(m.text for m in ex.logs.stdout) == "ok"
    ex = await cmds.run("sleep 10", opts=RunCommandOpts(timeout=timedelta(milliseconds=300)))
    assert ex.exit_code == -1
    ex = await cmds.run("no-such-program-abc")
    assert ex.exit_code == 127
    results = await asyncio.gather(*(cmds.run(f"echo {i}") for i in range(16)))
    assert [r.exit_code for r in results] == [0] * 16

    target = workdir / "sdk" / "all.bin"
    payload = bytes(range(256)) * 4
    await fs.write_files([WriteEntry(path=str(target), data=payload, mode=644)])
    assert target.read_bytes() == payload
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert await fs.read_bytes(str(target)) == payload
    assert await fs.read_bytes(str(target), range_header="bytes=0-255") == bytes(range(256))
    await fs.write_files([WriteEntry(path=str(target), data=b"x")])  # SDK default mode 755
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    info = await fs.get_file_info([str(target)])
    assert info[str(target)].size == 1
