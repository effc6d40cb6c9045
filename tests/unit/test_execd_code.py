"""The testbed daemon's code interpreter (`/code`) against a real Jupyter server: each of the real
execd's bugs reproduced by default, and the fixed behaviour its knob (`OSB_EXECD_CODE_*`) gives.

The Jupyter server comes from the replay's virtual environment (`testbed._jupyter.host_venv`:
PyPI wheels, cached under `.testbed/cache`); without it the tests are skipped, in CI they fail.
The replay (`test_execd_replay.py`) holds the defaults to the recordings; these show that a
test can switch each bug off, and that the defaults are the harsh ones.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from testbed import _daemon, _jupyter, replay

PACKAGE = Path(__file__).resolve().parents[1] / "testbed" / "execd" / "daemon"
TOKEN = "unit-token"
UUID_LEN = 36


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def jupyter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Jupyter server as the code-interpreter image starts it; its URL."""
    try:
        venv = _jupyter.host_venv()
    except Exception as exc:  # no network, no Python 3.11
        if os.environ.get("CI"):
            pytest.fail(f"no Jupyter server for the code tests: {exc}", pytrace=False)
        pytest.skip(f"no Jupyter server for the code tests: {exc}")
    root = tmp_path_factory.mktemp("jupyter-root")
    home = tmp_path_factory.mktemp("jupyter-home")
    port = _free_port()
    env = {"PATH": f"{venv}/bin:/usr/bin:/bin", "HOME": str(home)}
    args = ["--ip=127.0.0.1", f"--port={port}", "--allow-root", "--no-browser"]
    proc = subprocess.Popen(
        [f"{venv}/bin/python", "-m", "notebook", *args, f"--NotebookApp.token={TOKEN}"],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            headers = {"Authorization": f"token {TOKEN}"}
            req = urllib.request.Request(f"{url}/api/kernelspecs", headers=headers)  # noqa: S310
            with urllib.request.urlopen(req, timeout=2):  # noqa: S310 - loopback http
                break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("the Jupyter server did not start")
            time.sleep(0.3)
    yield url
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class CodeDaemon:
    """The daemon (as its zip application) with the given /code knobs."""

    def __init__(self, workdir: Path, jupyter: str | None, **knobs: str) -> None:
        self.port = _free_port()
        app = workdir / "execd.pyz"
        if not app.exists():
            _daemon.build(app, PACKAGE)
        env = {k: v for k, v in os.environ.items() if not k.startswith("OSB_EXECD_CODE")}
        env.update(EXECD_QUIET="1", EXECD_API_GRACE_SHUTDOWN="0s", **knobs)
        env.pop("JUPYTER_HOST", None)
        if jupyter:
            env.update(JUPYTER_HOST=jupyter, JUPYTER_TOKEN=TOKEN)
        self.proc = subprocess.Popen(
            [sys.executable, str(app), "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=workdir,
            env=env,
            stderr=subprocess.PIPE,
            preexec_fn=replay.default_signals,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=60)

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(5)

    def context(self, language: str = "python", **extra: str) -> str:
        r = self.client.post("/code/context", json={"language": language, **extra})
        assert r.status_code == 200, r.text
        return str(r.json()["id"])

    def run(
        self, code: str, timeout: float = 60, **context: str
    ) -> tuple[list[dict[str, Any]], str]:
        """The events of one run, and the raw body (its last part may be a bare object)."""
        body: dict[str, Any] = {"code": code}
        if context:
            body["context"] = context
        with self.client.stream("POST", "/code", json=body, timeout=timeout) as r:
            assert r.status_code == 200, r.read()
            raw = r.read().decode()
        return [json.loads(p) for p in raw.split("\n\n") if p.strip()], raw


def read_for(daemon: CodeDaemon, body: dict[str, Any], seconds: float) -> tuple[str, bool]:
    """A run's stream read for at most `seconds` (its pings keep any read timeout from firing):
    what came, and whether the stream had ended by then."""
    deadline = time.monotonic() + seconds
    got = b""
    with daemon.client.stream("POST", "/code", json=body) as r:
        for chunk in r.iter_raw():
            got += chunk
            if time.monotonic() > deadline:
                return got.decode(), False
    return got.decode(), True


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [str(e["type"]) for e in events if e["type"] != "ping"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("execd-code")


@pytest.fixture(scope="module")
def real(workdir: Path, jupyter: str) -> Iterator[CodeDaemon]:
    d = CodeDaemon(workdir, jupyter)
    yield d
    d.stop()


@pytest.fixture(scope="module")
def fixed(workdir: Path, jupyter: str) -> Iterator[CodeDaemon]:
    d = CodeDaemon(workdir, jupyter, OSB_EXECD_CODE_BUGS="fixed")
    yield d
    d.stop()


def test_a_run_streams_its_output_result_and_completion(real: CodeDaemon) -> None:
    cid = real.context()
    assert len(cid) == UUID_LEN
    events, _raw = real.run("print('a')\n'b'", id=cid, language="python")
    assert events[0] == {"type": "init", "text": cid, "timestamp": events[0]["timestamp"]}
    assert events[1]["type"] == "ping"
    assert "execution_complete" in kinds(events)
    out = [e for e in events if e["type"] in ("stdout", "execution_count", "result")]
    # output after the reply may be lost (the real daemon's race): what came is in order
    assert [e["type"] for e in out] in (
        ["stdout", "execution_count", "result"],
        ["stdout"],
        [],
    )


def test_display_data_dropped_or_kept(real: CodeDaemon, fixed: CodeDaemon) -> None:
    code = "from IPython.display import display, HTML\ndisplay(HTML('<b>x</b>'))\nprint('after')"
    for daemon, want in (
        (real, []),
        (fixed, [{"text": "<IPython.core.display.HTML object>", "text/html": "<b>x</b>"}]),
    ):
        events, _ = daemon.run(code, language="python")
        assert [e["results"] for e in events if e["type"] == "result"] == want


def test_execution_complete_first_idle_or_last(
    workdir: Path, jupyter: str, fixed: CodeDaemon
) -> None:
    cid = fixed.context()
    for _ in range(3):
        events, _ = fixed.run("print('x')\n1", id=cid, language="python")
        assert kinds(events)[0] == "init" and set(kinds(events)[1:-3]) == {"stdout"}
        assert kinds(events)[-3:] == ["execution_count", "result", "execution_complete"]
    early = CodeDaemon(workdir, jupyter, OSB_EXECD_CODE_COMPLETE="early")
    try:
        events, _ = early.run("import time\ntime.sleep(0.3)\nprint('late')", language="python")
        assert kinds(events)[:2] == ["init", "execution_complete"]
    finally:
        early.stop()


def test_unknown_context_id_500_or_404(real: CodeDaemon, fixed: CodeDaemon) -> None:
    body = {
        "code": "1",
        "context": {"id": "00000000-0000-4000-8000-000000000000", "language": "python"},
    }
    r = real.client.post("/code", json=body)
    assert (r.status_code, r.json()["code"]) == (500, "RUNTIME_ERROR")
    r = fixed.client.post("/code", json=body)
    assert (r.status_code, r.json()["code"]) == (404, "CONTEXT_NOT_FOUND")


def test_no_context_is_a_shell_command_or_python(real: CodeDaemon, fixed: CodeDaemon) -> None:
    events, _ = real.run("echo $((6*7))")
    assert len(events[0]["text"]) == 32  # a command id
    assert [e["text"] for e in events if e["type"] == "stdout"] == ["42"]
    events, _ = fixed.run("6*7")
    assert len(events[0]["text"]) == UUID_LEN  # python's default context
    assert [e["results"] for e in events if e["type"] == "result"] == [{"text": "42"}]


def test_context_cwd_ignored_or_applied(
    real: CodeDaemon, fixed: CodeDaemon, tmp_path: Path
) -> None:
    for daemon, name in ((real, "ignored"), (fixed, "applied")):
        where = tmp_path / name
        cid = daemon.context(cwd=str(where))
        assert where.is_dir()
        events, _ = daemon.run("import os\nos.getcwd()", id=cid, language="python")
        got = [e["results"]["text"] for e in events if e["type"] == "result"]
        assert (got == [repr(str(where))]) == (name == "applied"), got


def test_busy_context_bare_object_or_error_event(real: CodeDaemon, fixed: CodeDaemon) -> None:
    for daemon in (real, fixed):
        cid = daemon.context()
        with daemon.client.stream(
            "POST",
            "/code",
            json={
                "code": "import time\ntime.sleep(2)",
                "context": {"id": cid, "language": "python"},
            },
        ) as first:
            it = first.iter_raw()
            next(it)  # init: the context is taken
            _events, raw = daemon.run("1", id=cid, language="python")
            first.close()
        if daemon is real:
            assert raw.endswith(
                '{"code":"RUNTIME_ERROR","message":"error running codes session is busy"}'
            )
        else:
            assert raw.endswith("\n\n") and '"type":"error"' in raw


def test_no_kernelspec_hangs_or_fails(real: CodeDaemon, fixed: CodeDaemon) -> None:
    with pytest.raises(httpx.ReadTimeout):
        real.client.post("/code/context", json={"language": "java"}, timeout=2)
    r = fixed.client.post("/code/context", json={"language": "java"}, timeout=10)
    assert r.status_code == 500 and "no kernel specs" in r.json()["message"]


def test_without_jupyter_context_creation_hangs_or_fails(workdir: Path) -> None:
    hang = CodeDaemon(workdir, None)
    fail = CodeDaemon(workdir, None, OSB_EXECD_CODE_NO_KERNEL="error")
    try:
        with pytest.raises(httpx.ReadTimeout):
            hang.client.post("/code/context", json={"language": "python"}, timeout=2)
        r = hang.client.post("/code", json={"code": "1", "context": {"language": "python"}})
        assert r.status_code == 500 and "not configured" in r.json()["message"]
        assert fail.client.post("/code/context", json={"language": "python"}).status_code == 500
    finally:
        hang.stop()
        fail.stop()


def test_kernel_death_hangs_the_context_or_ends_the_run(
    real: CodeDaemon, fixed: CodeDaemon
) -> None:
    code = "import os\nos._exit(1)"
    cid = real.context()
    got, ended = read_for(real, {"code": code, "context": {"id": cid, "language": "python"}}, 7)
    assert not ended and got.count('"type":"ping"') >= 2, got  # open for good, pinged
    _events, raw = real.run("1", id=cid, language="python")
    assert raw.endswith('"message":"error running codes session is busy"}')  # for good
    cid = fixed.context()
    events, _ = fixed.run(code, timeout=30, id=cid, language="python")
    assert [e["error"]["ename"] for e in events if e["type"] == "error"] == ["DeadKernelError"]
    deadline = time.monotonic() + 30
    while True:  # the restarted kernel runs again
        events, _ = fixed.run("1", id=cid, language="python")
        if "result" in kinds(events) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert [e["results"] for e in events if e["type"] == "result"] == [{"text": "1"}]


def test_late_output_kept_on_every_run(fixed: CodeDaemon) -> None:
    cid = fixed.context()
    for _ in range(5):
        events, _ = fixed.run("print('a')\n'b'", id=cid, language="python")
        # (the kernel may send the line and its newline as two messages on a loaded host)
        assert "".join(e["text"] for e in events if e["type"] == "stdout") == "a\n"
        assert kinds(events)[-3:] == ["execution_count", "result", "execution_complete"]


def test_a_knob_value_it_cannot_use_stops_the_daemon(workdir: Path) -> None:
    app = workdir / "execd.pyz"
    if not app.exists():
        _daemon.build(app, PACKAGE)
    for name, value in (("OSB_EXECD_CODE_DISPLAY", "maybe"), ("OSB_EXECD_CODE_BUGS", "some")):
        proc = subprocess.run(
            [sys.executable, str(app), "--port", str(_free_port())],
            env={**os.environ, name: value},
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        assert proc.returncode == 2 and name in proc.stderr
