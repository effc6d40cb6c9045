"""The code interpreter: `/code`, `/code/context`, `/code/contexts[/{id}]`, `DELETE /code`.

As the recorded execd (v1.0.18 and v1.0.19 alike) drives the Jupyter server of its image
(`JUPYTER_HOST`, `JUPYTER_TOKEN`; jupyter.py): a context is a Jupyter session with a kernel of
its own, found by the kernelspec whose `language` is the one asked for (never the spec named
`python3`); its id is the session's id. A run opens a new WebSocket to the kernel, sends
`execute_request` (no stdin) and turns the kernel's messages into events. The real daemon's
bugs are reproduced by default, each behind a knob (config.CODE_KNOBS, README "Code
interpreter"); the comments name the knob where a bug lives.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import config
from .commands import interrupt as interrupt_command
from .commands import run_foreground
from .events import EventStream, init_event
from .goenc import ApiError, go_json, go_sorted_map, now_ms
from .gojson import bind_json
from .gopath import go_expand_path, mkdir_all
from .handler import q1
from .jupyter import Jupyter, JupyterError, KernelSocket, execute_request
from .launch import validate_command

if TYPE_CHECKING:
    from .handler import Handler

# the languages execd knows (a context needs a kernelspec of that language); `command` is a
# shell command, anything else "unknown language"
LANGUAGES = ("python", "bash", "java", "javascript", "typescript", "go")
TICK_S = 0.1  # execd checks every 100 ms whether the run's reply has come
RETRY_FIRST_S, RETRY_FACTOR, RETRY_TRIES = 0.5, 1.5, 60  # creating a session, by the source
BUSY = {"code": "RUNTIME_ERROR", "message": "error running codes session is busy"}

_RUN_CODE = (
    "struct",
    "RunCodeRequest",
    {
        "code": "string",
        "context": (
            "struct",
            "CodeContext",
            {"id": "string", "language": "string"},
            "model.CodeContext",
        ),
    },
    "model.RunCodeRequest",
)
_CREATE_CONTEXT = (
    "struct",
    "CodeContextRequest",
    {"language": "string", "cwd": "string"},
    "model.CodeContextRequest",
)


@dataclass
class Context:
    id: str
    language: str
    kernel_id: str
    busy: threading.Lock = field(default_factory=threading.Lock)


CONTEXTS: dict[str, Context] = {}
DEFAULTS: dict[str, str] = {}  # language -> the id of its default context
LOCK = threading.Lock()


def _log(text: str) -> None:
    sys.stderr.write(f"execd code: {text}\n")
    sys.stderr.flush()


def _jupyter() -> Jupyter | None:
    if not config.JUPYTER_HOST:
        return None
    return Jupyter(config.JUPYTER_HOST, config.JUPYTER_TOKEN)


def _never() -> None:
    """What execd does where it never answers: the request stays open (the client gives up)."""
    threading.Event().wait()


# -- contexts ----------------------------------------------------------------------------------


def _find_spec(jupyter: Jupyter, language: str) -> str | None:
    for name, spec in jupyter.kernelspecs().items():
        if name != "python3" and str(spec.get("language", "")) == language:
            return name
    return None


def _new_context(language: str, cwd: str = "") -> Context:
    """A Jupyter session for `language`: retried with execd's backoff while there is no
    kernelspec (OSB_EXECD_CODE_NO_KERNEL=hang: practically forever, whether or not the client
    is still there), or a 500 at once (`error`)."""
    jupyter = _jupyter()
    hang = config.code_knob("OSB_EXECD_CODE_NO_KERNEL") == "hang"
    if jupyter is None:
        if hang:
            _never()
        raise ApiError(
            500,
            "RUNTIME_ERROR",
            "language runtime server not configured, please check your image runtime",
        )
    delay = RETRY_FIRST_S
    for _attempt in range(RETRY_TRIES):
        try:
            spec = _find_spec(jupyter, language)
            if spec is None:
                raise JupyterError(f"no kernel specs found for language: {language}")
            sid, kid = jupyter.start_session(spec)
            break
        except JupyterError as e:
            if not hang and "no kernel specs" in str(e):
                raise ApiError(500, "RUNTIME_ERROR", str(e)) from None
            _log(f"failed to create session, retrying: {e}")
            time.sleep(delay)
            delay *= RETRY_FACTOR
    else:
        raise ApiError(500, "RUNTIME_ERROR", f"failed to create a {language} context")
    ctx = Context(sid, language, kid)
    if cwd and config.code_knob("OSB_EXECD_CODE_CWD") == "applied":
        _chdir(jupyter, ctx, cwd)
    with LOCK:
        CONTEXTS[sid] = ctx
    return ctx


def _chdir(jupyter: Jupyter, ctx: Context, cwd: str) -> None:
    """The fixed behaviour: the kernel starts its life in the context's cwd."""
    if ctx.language == "python":
        code = f"import os as _o\n_o.chdir({cwd!r})\ndel _o"
    else:
        code = "cd '" + cwd.replace("'", "'\\''") + "'"
    session = ctx.id
    ws = jupyter.channels(ctx.kernel_id, session)
    try:
        req = execute_request(code, session)
        req["content"]["silent"] = True
        req["content"]["store_history"] = False
        ws.send(req)
        while (msg := ws.recv()) is not None:
            if msg.get("msg_type") == "execute_reply" or _type(msg) == "execute_reply":
                break
    finally:
        ws.close()


def create_context(h: Handler, q: dict[str, list[str]]) -> None:
    raw = h.read_body()
    req = bind_json(raw, _CREATE_CONTEXT) or {}
    assert isinstance(req, dict)
    language = str(req.get("language") or "")
    cwd = str(req.get("cwd") or "")
    if cwd:
        try:
            path = go_expand_path(cwd)
            mkdir_all(path, 0o755)
        except (ValueError, OSError) as e:
            raise ApiError(500, "RUNTIME_ERROR", f"error creating code context {e}") from None
    else:
        path = ""
    ctx = _new_context(language, path)
    answer: dict[str, str] = {"id": ctx.id, "language": ctx.language}
    if cwd:
        answer["cwd"] = cwd
    h.send_json(200, answer)


def list_contexts(h: Handler, q: dict[str, list[str]]) -> None:
    language = q1(q, "language")
    if language == "command":
        raise ApiError(500, "RUNTIME_ERROR", "unsupported language context operation: command")
    with LOCK:
        found = [c for c in CONTEXTS.values() if not language or c.language == language]
    random.shuffle(found)  # a Go map: no order
    h.send_json(200, [{"id": c.id, "language": c.language} for c in found])


def _get(cid: str) -> Context:
    with LOCK:
        ctx = CONTEXTS.get(cid)
    if ctx is None:
        raise ApiError(404, "CONTEXT_NOT_FOUND", f"context {cid} not found")
    return ctx


def get_context(h: Handler, q: dict[str, list[str]], cid: str) -> None:
    ctx = _get(cid)
    h.send_json(200, {"id": ctx.id, "language": ctx.language})


def _delete(ctx: Context) -> None:
    with LOCK:
        CONTEXTS.pop(ctx.id, None)
        for lang, did in list(DEFAULTS.items()):
            if did == ctx.id:
                del DEFAULTS[lang]
    jupyter = _jupyter()
    if jupyter is not None:
        try:
            jupyter.delete_session(ctx.id)  # Jupyter interrupts and stops the kernel
        except JupyterError as e:
            _log(f"deleting session {ctx.id}: {e}")


def delete_context(h: Handler, q: dict[str, list[str]], cid: str) -> None:
    _delete(_get(cid))
    h.send_ok()


def delete_contexts(h: Handler, q: dict[str, list[str]]) -> None:
    """`DELETE /code/contexts?language=`: one after another."""
    if "language" not in q:
        raise ApiError(400, "MISSING_QUERY", "missing query parameter 'language'")
    language = q1(q, "language")
    with LOCK:
        found = [c for c in CONTEXTS.values() if c.language == language]
    for ctx in found:
        _delete(ctx)
    h.send_ok()


def interrupt_code(h: Handler, q: dict[str, list[str]]) -> None:
    cid = q1(q, "id")
    if not cid:
        raise ApiError(400, "MISSING_QUERY", "missing query parameter 'id'")
    with LOCK:
        ctx = CONTEXTS.get(cid)
    jupyter = _jupyter()
    if ctx is not None and jupyter is not None:
        try:
            jupyter.interrupt(ctx.kernel_id)
        except JupyterError as e:
            raise ApiError(500, "RUNTIME_ERROR", f"error interruptting code context. {e}") from None
        h.send_ok()
        return
    interrupt_command(cid)  # a command id (execd's one interrupt), else "no such session"
    h.send_ok()


# -- runs --------------------------------------------------------------------------------------


def run_code(h: Handler, q: dict[str, list[str]]) -> None:
    raw = h.read_body()
    req = bind_json(raw, _RUN_CODE) or {}
    assert isinstance(req, dict)
    code = str(req.get("code") or "")
    if not code:
        raise ApiError(
            400,
            "INVALID_REQUEST_BODY",
            "invalid request, validation error Key: 'RunCodeRequest.Code' Error:Field "
            "validation for 'Code' failed on the 'required' tag",
        )
    context = req.get("context") or {}
    assert isinstance(context, dict)
    cid = str(context.get("id") or "")
    language = str(context.get("language") or "")
    if not language and config.code_knob("OSB_EXECD_CODE_NO_CONTEXT") == "python":
        known = CONTEXTS.get(cid) if cid else None
        language = known.language if known is not None else "python"
    if language in ("", "command"):
        # no language (no context, or an id alone): a shell command, framed as /command
        # without its hold (OSB_EXECD_CODE_NO_CONTEXT=command)
        run_foreground(h, validate_command({"command": code}), grace=0.0)
        return
    if language not in LANGUAGES:
        raise ApiError(500, "RUNTIME_ERROR", f"error running codes unknown language: {language}")
    jupyter = _jupyter()
    if jupyter is None:
        raise ApiError(
            500,
            "RUNTIME_ERROR",
            "error running codes language runtime server not configured, please check your "
            "image runtime",
        )
    if cid:
        with LOCK:
            ctx = CONTEXTS.get(cid)
        if ctx is None:
            if config.code_knob("OSB_EXECD_CODE_UNKNOWN_ID") == "404":
                raise ApiError(404, "CONTEXT_NOT_FOUND", f"context {cid} not found")
            raise ApiError(500, "RUNTIME_ERROR", "error running codes context not found")
    else:
        ctx = _default_context(language)
    _Run(h, jupyter, ctx, code).run()


def _default_context(language: str) -> Context:
    with LOCK:
        did = DEFAULTS.get(language)
        ctx = CONTEXTS.get(did) if did else None
    if ctx is not None:
        return ctx
    ctx = _new_context(language)
    with LOCK:
        DEFAULTS[language] = ctx.id
    return ctx


def _type(msg: dict[str, Any]) -> str:
    header = msg.get("header") or {}
    return str(msg.get("msg_type") or header.get("msg_type") or "")


def _parent(msg: dict[str, Any]) -> str:
    return str((msg.get("parent_header") or {}).get("msg_id") or "")


def results_of(data: dict[str, Any]) -> dict[str, Any]:
    """A MIME bundle as execd sends it: `text/plain` named `text`, keys sorted (a Go map)."""
    out = {("text" if k == "text/plain" else str(k)): v for k, v in data.items()}
    return go_sorted_map(out)


class _Run:
    """One run in one context: the kernel's messages turned into events on the stream."""

    def __init__(self, h: Handler, jupyter: Jupyter, ctx: Context, code: str) -> None:
        self.h = h
        self.jupyter = jupyter
        self.ctx = ctx
        self.code = code
        self.stream = EventStream(h)
        self.lock = threading.Lock()
        self.ended = False  # after this, kernel messages are dropped
        self.completed = False  # execution_complete sent
        self.replied = threading.Event()  # the reply (or a result or an error) was seen
        self.own_idle = False
        self.finished = threading.Event()  # the stream may end now
        self.msg_id = ""
        self.started = 0.0
        self.complete_mode = config.code_knob("OSB_EXECD_CODE_COMPLETE")
        self.keep_late = config.code_knob("OSB_EXECD_CODE_LATE_OUTPUT") == "kept"

    def _send(self, event: dict[str, Any]) -> None:
        with self.lock:
            if not self.ended:
                self.stream.send(event)

    def _complete(self) -> None:
        if self.completed:
            return
        self.completed = True
        ms = int((time.monotonic() - self.started) * 1000)
        event: dict[str, Any] = {"type": "execution_complete"}
        if ms:
            event["execution_time"] = ms
        event["timestamp"] = now_ms()
        self._send(event)

    def run(self) -> None:
        taken = self.ctx.busy.acquire(blocking=False)  # before init: a run that sent it holds
        self.stream.send(init_event(self.ctx.id))
        self.stream.start_pings()
        if not taken:
            if config.code_knob("OSB_EXECD_CODE_BUSY") == "event":
                self.stream.send(_error_event("ContextBusy", BUSY["message"], []))
            else:
                self.stream.send_raw(go_json(BUSY))  # bare, without the blank line
            self.stream.finish()
            return
        try:
            self._execute()
        finally:
            self.ctx.busy.release()  # before the stream ends: a client may send the next run
        self.stream.finish()

    def _execute(self) -> None:
        self.started = time.monotonic()
        try:
            ws = self.jupyter.channels(self.ctx.kernel_id, self.ctx.id)
        except JupyterError as e:
            _log(str(e))
            self.stream.send(_error_event("RuntimeError", str(e), []))
            return
        try:
            req = execute_request(self.code, self.ctx.id)
            self.msg_id = str(req["header"]["msg_id"])
            ws.send(req)
            if self.complete_mode == "early":
                self._complete()
            reader = threading.Thread(target=self._read, args=(ws,), daemon=True)
            reader.start()
            tick = self.started
            while True:
                tick += TICK_S
                self.finished.wait(max(0.0, tick - time.monotonic()))
                if self.finished.is_set():
                    break
            with self.lock:
                self.ended = True
        finally:
            ws.close()

    def _read(self, ws: KernelSocket) -> None:
        while True:
            msg = ws.recv()
            if msg is None:
                break
            try:
                self._handle(msg)
            except Exception as e:  # one odd message must not end the run
                _log(f"kernel message {_type(msg)}: {e!r}")
            with self.lock:
                if self.ended:
                    return
        # the connection is gone (the context was deleted, Jupyter stopped): the run is over
        self.finished.set()

    def _done_check(self) -> None:
        if not self.replied.is_set():
            return
        if (self.keep_late or self.complete_mode == "last") and not self.own_idle:
            return
        self.finished.set()

    def _handle(self, msg: dict[str, Any]) -> None:
        kind = _type(msg)
        content = msg.get("content") or {}
        own = _parent(msg) == self.msg_id
        if kind == "status":
            state = content.get("execution_state")
            if state == "idle":
                if own:
                    self.own_idle = True
                # the real daemon takes any idle, whichever request it answers (often the
                # kernel_info nudge Jupyter Server sends on a new WebSocket)
                if self.complete_mode == "first-idle" or (self.complete_mode == "last" and own):
                    self._complete()
                self._done_check()
            elif (
                state in ("restarting", "autorestarting", "dead")
                and config.code_knob("OSB_EXECD_CODE_KERNEL_DEATH") == "error"
            ):
                self._send(
                    _error_event(
                        "DeadKernelError",
                        f"the kernel {state.replace('auto', '')}: its state is gone",
                        [],
                    )
                )
                self.finished.set()
            # (hang: the real daemon waits for a reply that never comes)
            return
        if kind == "stream":
            name = "stderr" if content.get("name") == "stderr" else "stdout"
            self._send({"type": name, "text": str(content.get("text", "")), "timestamp": now_ms()})
        elif kind == "execute_result":
            count = content.get("execution_count")
            with self.lock:  # the two go out together (or, once the run ended, neither)
                if not self.ended:
                    self.stream.send(
                        {"type": "execution_count", "execution_count": count, "timestamp": now_ms()}
                    )
                    self.stream.send(
                        {
                            "type": "result",
                            "timestamp": now_ms(),
                            "results": results_of(content.get("data") or {}),
                        }
                    )
            self.replied.set()
        elif kind in ("display_data", "update_display_data"):
            if config.code_knob("OSB_EXECD_CODE_DISPLAY") == "kept":
                self._send(
                    {
                        "type": "result",
                        "timestamp": now_ms(),
                        "results": results_of(content.get("data") or {}),
                    }
                )
        elif kind == "error":
            with self.lock:
                if not self.ended:
                    self.stream.send({"type": "status", "text": "error", "timestamp": now_ms()})
                    self.stream.send(
                        _error_event(
                            str(content.get("ename", "")),
                            str(content.get("evalue", "")),
                            [str(t) for t in content.get("traceback") or []],
                        )
                    )
            self.replied.set()
        elif kind == "execute_reply" and own:
            self.replied.set()
        self._done_check()


def _error_event(ename: str, evalue: str, traceback: list[str]) -> dict[str, Any]:
    return {
        "type": "error",
        "timestamp": now_ms(),
        "error": {"ename": ename, "evalue": evalue, "traceback": traceback},
    }
