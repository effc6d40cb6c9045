"""`FakeCodeInterpreter`: execd's `/code` routes and their Jupyter kernels, in memory.

Built from the recordings of the real execd (`code_*` cases): the same answers (a context
create's `{"id","language"}`, the unknown-context 500, the busy answer as a bare object inside a
200 stream, `DELETE /code?id=`), the same events, and execd's bugs, on by default:
`execution_complete` before the output (`early_complete`), `display_data` never sent, the last
output event of a cell lost (`lose_late`: execd drops what arrives after the reply), a dead
kernel's run that never ends (pings) and a context busy for good, `POST /code/context` that
never answers for a language without a kernel or without Jupyter (`jupyter=False`).

No code runs: a cell is answered by `on_cell(code, kernel)` (a `FakeCell`), else by a tiny table
(`print('text')`, a number, `raise Name('text')`, `time.sleep(N)`, `os._exit(1)`). The core's
own cells are understood: the setup cells (the recorder installed, `cwd` entered, the info file
written) and its run cells (the marker line, the bash wrapper), whose records are written to the
sandbox's files as the real recorder writes them; the kernel-process check and the kernelspec
probe are answered as commands (`command`).
"""

from __future__ import annotations

import ast
import asyncio
import base64
import json
import operator
import re
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from . import _routes
from ._model import FakeCommand, FakeOutcome, FakeSandbox

__all__ = ["CellHandler", "FakeCell", "FakeCodeInterpreter", "FakeKernel"]

_MARK = "# opensandbox-run "
_KNOWN = ("python", "bash", "java", "javascript", "typescript", "go", "r")
_PY_SETUP = re.compile(r"b64decode\('([A-Za-z0-9+/=]+)'\)")
_BASH_SETUP = re.compile(
    r'mkdir -p -- "\$\(dirname -- (\S+)\)" && (?:mkdir -p -- (.+?) && cd -- .+? && )?\{'
)
_BASH_RUN = re.compile(r"^__osb_p=(\S+); .*printf %s (\S+) \| base64 -d")
_ALIVE = re.compile(r"/proc/(\d+)/stat")


@dataclass(frozen=True)
class FakeCell:
    """What a fake kernel does with one cell, in order: `outputs` (`("stdout", text)`,
    `("stderr", text)`, `("display", bundle)`), then `delay` seconds (an interrupt ends it with
    KeyboardInterrupt), then the last expression's `result` bundle or the `error`
    (`(ename, evalue, traceback lines)`). `die`: the kernel's process exits (`os._exit`)."""

    outputs: tuple[tuple[str, Any], ...] = ()
    result: Mapping[str, Any] | None = None
    error: tuple[str, str, list[str]] | None = None
    delay: float = 0.0
    die: bool = False


@dataclass
class FakeKernel:
    """One context's kernel: its state (`names`), cell count, process and whether the core's
    recorder is in it."""

    id: str
    language: str
    pid: int
    names: dict[str, Any] = field(default_factory=dict)
    count: int = 0
    busy: bool = False
    dead: bool = False
    recorder: bool = False
    cwd: str = "/workspace"
    cells: list[str] = field(default_factory=list)


CellHandler = Callable[[str, FakeKernel], FakeCell | None]


class FakeCodeInterpreter:
    """The fake `/code` of every sandbox of one `FakeOpenSandbox` (see the module docstring)."""

    def __init__(
        self,
        *,
        on_cell: CellHandler | None = None,
        jupyter: bool = True,
        kernels: tuple[str, ...] = ("python", "bash"),
        early_complete: bool = True,
        lose_late: bool = True,
    ) -> None:
        self.on_cell = on_cell
        self.jupyter = jupyter
        self.kernels = kernels
        self.early_complete = early_complete
        self.lose_late = lose_late
        self.contexts: dict[str, FakeKernel] = {}
        self.defaults: dict[str, str] = {}
        self.created = 0
        self.interrupts: list[str] = []
        self._interrupted: set[str] = set()
        self._pid = 100

    # -- routes ----------------------------------------------------------------------------
    def route(self, request: httpx.Request) -> Callable[[FakeSandbox, httpx.Request], Any] | None:
        path, method = request.url.path, request.method
        if path == "/code":
            return self._run if method == "POST" else self._interrupt
        if path == "/code/context" and method == "POST":
            return self._create
        if path == "/code/contexts":
            return self._list if method == "GET" else self._delete_language
        if path.startswith("/code/contexts/"):
            return self._get if method == "GET" else self._delete
        return None

    def _new(self, language: str) -> FakeKernel:
        self._pid += 1
        self.created += 1
        kernel = FakeKernel(str(uuid.uuid4()), language, self._pid)
        self.contexts[kernel.id] = kernel
        return kernel

    async def _create(self, box: FakeSandbox, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        language = str(body.get("language") or "")
        if not self.jupyter or language not in self.kernels:
            await asyncio.Event().wait()  # execd retries for ever
        kernel = self._new(language)
        answer = {"id": kernel.id, "language": language}
        if body.get("cwd"):
            answer["cwd"] = body["cwd"]
        return httpx.Response(200, json=answer)

    def _list(self, box: FakeSandbox, request: httpx.Request) -> httpx.Response:
        language = request.url.params.get("language")
        if language == "command":
            return _routes.error(
                500, "RUNTIME_ERROR", "unsupported language context operation: command"
            )
        items = [
            {"id": k.id, "language": k.language}
            for k in self.contexts.values()
            if language is None or k.language == language
        ]
        return httpx.Response(200, json=items)

    def _get(self, box: FakeSandbox, request: httpx.Request) -> httpx.Response:
        kernel = self.contexts.get(request.url.path.rsplit("/", 1)[-1])
        if kernel is None:
            return _not_found(request.url.path.rsplit("/", 1)[-1])
        return httpx.Response(200, json={"id": kernel.id, "language": kernel.language})

    def _delete(self, box: FakeSandbox, request: httpx.Request) -> httpx.Response:
        context_id = request.url.path.rsplit("/", 1)[-1]
        kernel = self.contexts.pop(context_id, None)
        if kernel is None:
            return _not_found(context_id)
        self._interrupted.add(context_id)
        self.defaults = {k: v for k, v in self.defaults.items() if v != context_id}
        return httpx.Response(200)

    def _delete_language(self, box: FakeSandbox, request: httpx.Request) -> httpx.Response:
        language = request.url.params.get("language")
        if not language:
            return _routes.error(400, "MISSING_QUERY", "missing query parameter 'language'")
        for kernel in [k for k in self.contexts.values() if k.language == language]:
            del self.contexts[kernel.id]
        self.defaults.pop(language, None)
        return httpx.Response(200)

    def _interrupt(self, box: FakeSandbox, request: httpx.Request) -> httpx.Response:
        context_id = request.url.params.get("id")
        if not context_id:
            return _routes.error(400, "MISSING_QUERY", "missing query parameter 'id'")
        if context_id not in self.contexts:
            return _routes.error(
                500, "RUNTIME_ERROR", "error interruptting code context. no such session"
            )
        self.interrupts.append(context_id)
        kernel = self.contexts[context_id]
        if kernel.busy and not kernel.dead:
            self._interrupted.add(context_id)
        return httpx.Response(200)

    async def _run(self, box: FakeSandbox, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        code, context = body.get("code"), body.get("context") or {}
        if not code:
            return _routes.error(400, "INVALID_REQUEST_BODY", "invalid request, Code required")
        language, context_id = str(context.get("language") or ""), context.get("id")
        if language and language not in _KNOWN:
            return _routes.error(
                500, "RUNTIME_ERROR", f"error running codes unknown language: {language}"
            )
        if language and not self.jupyter:
            return _routes.error(
                500,
                "RUNTIME_ERROR",
                "error running codes language runtime server not configured, please check "
                "your image runtime",
            )
        if context_id:
            kernel = self.contexts.get(context_id)
            if kernel is None:
                return _routes.error(500, "RUNTIME_ERROR", "error running codes context not found")
        else:
            if language not in self.kernels:
                await asyncio.Event().wait()
            kernel = self.contexts.get(self.defaults.get(language, "")) or self._new(language)
            self.defaults[language] = kernel.id
        stream = self._stream(box, kernel, str(code))
        return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=stream)

    # -- a run -----------------------------------------------------------------------------
    async def _stream(
        self, box: FakeSandbox, kernel: FakeKernel, code: str
    ) -> AsyncIterator[bytes]:
        yield _routes.event("init", kernel.id)
        yield _routes.event("ping", "pong")
        if kernel.busy:
            yield b'{"code":"RUNTIME_ERROR","message":"error running codes session is busy"}'
            return
        kernel.busy = True
        self._interrupted.discard(kernel.id)
        try:
            async for event in self._cell(box, kernel, code):
                yield event
        finally:
            if not kernel.dead:
                kernel.busy = False

    async def _cell(self, box: FakeSandbox, kernel: FakeKernel, code: str) -> AsyncIterator[bytes]:
        if self.early_complete:
            yield _routes.event("execution_complete", None, execution_time=5)
        record, code = self._setup_or_record(box, kernel, code)
        kernel.cells.append(code)
        cell = (
            _canned(code) if self.on_cell is None else (self.on_cell(code, kernel) or _canned(code))
        )
        kernel.count += 1
        items: list[list[Any]] = []
        events: list[bytes] = []
        for kind, value in cell.outputs:
            if kind == "display":
                items.append(["display", dict(value), None])
                continue
            items.append(["stream", kind, value])
            events.append(_routes.event(kind, value))
        if self.lose_late and events:
            events.pop()
        for event in events:
            yield event
        if cell.die:
            kernel.dead, kernel.pid = True, kernel.pid + 1000  # Jupyter restarts it: a new process
            kernel.recorder = False
            while True:
                await asyncio.sleep(0.1)
                yield _routes.event("ping", "pong")
        interrupted = await self._wait(kernel, cell.delay)
        error = (
            ("KeyboardInterrupt", "", ["\x1b[31mKeyboardInterrupt\x1b[39m: "])
            if interrupted
            else cell.error
        )
        if cell.result is not None and error is None:
            items.append(["result", dict(cell.result), kernel.count])
            yield _routes.event("execution_count", None, execution_count=kernel.count)
            results = {("text" if k == "text/plain" else k): v for k, v in cell.result.items()}
            yield _routes.event("result", None, results=results)
        if error is not None:
            items.append(["error", *error])
            yield _routes.event("status", "error")
            yield _routes.event(
                "error", None, error=dict(zip(("ename", "evalue", "traceback"), error, strict=True))
            )
        if record is not None:
            record(items)
        if not self.early_complete:
            yield _routes.event("execution_complete", None, execution_time=5)

    async def _wait(self, kernel: FakeKernel, seconds: float) -> bool:
        waited = 0.0
        while waited < seconds:
            if kernel.id in self._interrupted:
                return True
            await asyncio.sleep(0.01)
            waited += 0.01
        return kernel.id in self._interrupted

    def _setup_or_record(
        self, box: FakeSandbox, kernel: FakeKernel, code: str
    ) -> tuple[Callable[[list[list[Any]]], None] | None, str]:
        """The core's own cells: a setup (done here; the cell then does nothing) or a run (its
        record written after the cell, when the recorder is in the kernel)."""
        setup = _PY_SETUP.search(code) if code.startswith("__import__('builtins')") else None
        if setup is not None:
            source = base64.b64decode(setup.group(1)).decode()
            info, cwd = ast.literal_eval(source.rsplit("setup(", 1)[1].rsplit(")", 1)[0] + ",")[:2]
            return self._setup(box, kernel, info, cwd), "None"
        bash_setup = _BASH_SETUP.match(code)
        if bash_setup is not None:
            cwd = bash_setup.group(2)
            return self._setup(box, kernel, bash_setup.group(1), cwd and cwd.strip("'")), ""
        if code.startswith(_MARK):
            path, _, rest = code[len(_MARK) :].partition("\n")
            return (self._recorder(box, kernel, path) if kernel.recorder else None), rest
        run = _BASH_RUN.match(code)
        if run is not None:
            inner = base64.b64decode(run.group(2).strip("'")).decode()
            return self._bash_recorder(box, run.group(1).strip("'")), inner
        return None, code

    def _setup(
        self, box: FakeSandbox, kernel: FakeKernel, info: str, cwd: str | None
    ) -> Callable[[list[list[Any]]], None] | None:
        kernel.recorder = kernel.language == "python"
        if cwd:
            kernel.cwd = cwd
            box.dirs.add(cwd)
        box.write(info.strip("'"), f"{kernel.pid}\n{kernel.pid * 7}\n{kernel.cwd}\n".encode())
        return None

    @staticmethod
    def _recorder(
        box: FakeSandbox, kernel: FakeKernel, path: str
    ) -> Callable[[list[list[Any]]], None]:
        def write(items: list[list[Any]]) -> None:
            box.write(path, json.dumps({"v": 1, "count": kernel.count, "items": items}).encode())

        return write

    @staticmethod
    def _bash_recorder(box: FakeSandbox, path: str) -> Callable[[list[list[Any]]], None]:
        def write(items: list[list[Any]]) -> None:
            out = "".join(i[2] for i in items if i[0] == "stream" and i[1] == "stdout").encode()
            err = "".join(i[2] for i in items if i[0] == "stream" and i[1] == "stderr").encode()
            status = next((int(i[2]) for i in items if i[0] == "error"), 0)
            box.write(path, f"osb-bash 1 {status} {len(out)} {len(err)}\n".encode() + out + err)

        return write

    # -- commands the core sends about kernels ---------------------------------------------
    def command(self, command: FakeCommand) -> FakeOutcome | None:
        """The kernel-process check and the kernelspec probe; None for any other command."""
        alive = _ALIVE.search(command.command)
        if alive is not None and "echo alive" in command.command:
            pid = int(alive.group(1))
            running = any(k.pid == pid and not k.dead for k in self.contexts.values())
            return FakeOutcome(b"alive\n" if running else b"dead\n")
        if "osb-jupyter" in command.command:
            return FakeOutcome(_encoded(self._specs()))
        return None

    def _specs(self) -> bytes:
        if not self.jupyter:
            return b"osb-jupyter none\n"
        specs = {k: {"name": k, "spec": {"language": k}} for k in self.kernels}
        body = json.dumps({"default": "python3", "kernelspecs": specs}).encode()
        return (
            b"osb-jupyter answer\nHTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body
        )


def _encoded(stdout: bytes, status: int = 0) -> bytes:
    """What `run_bytes`' wrapper prints for a command's stdout and status."""
    return base64.b64encode(stdout + b"\n" + str(status).encode()) + b"\n"


def _not_found(context_id: str) -> httpx.Response:
    return _routes.error(404, "CONTEXT_NOT_FOUND", f"context {context_id} not found")


def _canned(code: str) -> FakeCell:
    """A few cells without a handler: `print('text')`, a literal, `raise Name('text')`,
    `time.sleep(N)`, `os._exit(1)`; anything else does nothing."""
    text = code.strip()
    if "os._exit" in text:
        return FakeCell(outputs=(("stdout", "exiting\n"),), die=True)
    sleep = re.search(r"time\.sleep\(([0-9.]+)\)", text)
    printed = re.fullmatch(r"print\((['\"])(.*)\1\)", text)
    if printed is not None:
        return FakeCell(outputs=(("stdout", printed.group(2) + "\n"),))
    raised = re.fullmatch(r"raise (\w+)\((['\"])(.*)\2\)", text)
    if raised is not None:
        return FakeCell(
            error=(
                raised.group(1),
                raised.group(3),
                [f"\x1b[31m{raised.group(1)}\x1b[39m: {raised.group(3)}"],
            )
        )
    value = _arithmetic(text)
    if value is None:
        return FakeCell(delay=float(sleep.group(1)) if sleep else 0.0)
    return FakeCell(result={"text/plain": repr(value)})


def _arithmetic(text: str) -> object | None:
    """The value of a number, or of `+ - * /` on numbers, else None (no code is run)."""
    try:
        value: object = _value(ast.parse(text, mode="eval").body)
    except (SyntaxError, _NotArithmetic, ArithmeticError):
        return None
    return value


_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


class _NotArithmetic(Exception):
    pass


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_value(node.left), _value(node.right))
    raise _NotArithmetic
