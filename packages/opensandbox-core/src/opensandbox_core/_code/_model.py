"""The code facet's values (`Execution`, `CodeResult`, `CodeError`, `CodeContext`) and how they
are built: from a run's record (`from_record`, exact) or from execd's events (`StreamState`, what
the stream kept when no record could be read). Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ._kernel import Record

__all__ = [
    "CodeContext",
    "CodeError",
    "CodeResult",
    "Execution",
    "StreamState",
    "from_record",
    "plain_traceback",
]

_ANSI: Final = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
)


@dataclass(frozen=True)
class CodeContext:
    """A code context: one kernel with its own state (variables, imports, working directory).

    `cwd` is the kernel's working directory when this session made or set up the context (None
    when unknown)."""

    id: str
    language: str
    cwd: str | None = None


@dataclass(frozen=True)
class CodeError:
    """An exception the code raised (for bash: a non-zero status, `value` its number).

    `traceback` is one plain-text string, without the kernel's colour codes."""

    name: str
    value: str
    traceback: str


@dataclass(frozen=True)
class CodeResult:
    """One display of a run (`display()`, a shown figure) or its last expression's value
    (`is_main_result`). Each field holds its MIME type's value when the bundle had it: `png` and
    `jpeg` as decoded bytes, `json` as the decoded value; `mime` is the whole bundle as sent.
    `repr()` leaves out the images and the bundle (they can be megabytes)."""

    text: str | None = None
    html: str | None = None
    markdown: str | None = None
    svg: str | None = None
    png: bytes | None = field(default=None, repr=False)
    jpeg: bytes | None = field(default=None, repr=False)
    json: Any = None
    latex: str | None = None
    mime: Mapping[str, Any] = field(default_factory=dict, repr=False)
    is_main_result: bool = False

    @classmethod
    def of(cls, bundle: Mapping[str, Any], *, main: bool) -> CodeResult:
        """The result for a MIME bundle as the kernel sent it."""
        return cls(
            text=_text(bundle.get("text/plain")),
            html=_text(bundle.get("text/html")),
            markdown=_text(bundle.get("text/markdown")),
            svg=_text(bundle.get("image/svg+xml")),
            png=_image(bundle.get("image/png")),
            jpeg=_image(bundle.get("image/jpeg")),
            json=_json(bundle.get("application/json")),
            latex=_text(bundle.get("text/latex")),
            mime=dict(bundle),
            is_main_result=main,
        )


@dataclass(frozen=True)
class Execution:
    """What one run of code did: its output, displays, last value and error.

    `results` holds every display in the order shown and the last expression's value (its
    `is_main_result` is True); `error` is the exception the code raised (a result, not raised
    here); `execution_count` is the kernel's cell number when known."""

    stdout: str = ""
    stderr: str = ""
    results: list[CodeResult] = field(default_factory=list)
    error: CodeError | None = None
    execution_count: int | None = None

    @property
    def text(self) -> str | None:
        """The last expression's text (`text/plain`), if the cell ended with one."""
        for result in self.results:
            if result.is_main_result:
                return result.text
        return None


def plain_traceback(lines: Sequence[object]) -> str:
    """The kernel's traceback lines as one plain-text string (colour codes removed)."""
    parts = [_ANSI.sub("", str(line)) for line in lines]
    return "".join(p if p.endswith("\n") else p + "\n" for p in parts).rstrip("\n")


def from_record(record: Record) -> Execution:
    """The execution a record describes: every message of the run, in the order sent."""
    out: list[str] = []
    err: list[str] = []
    shown: list[tuple[str | None, CodeResult]] = []
    error: CodeError | None = None
    count = record.count
    for item in record.items:
        kind = item[0]
        if kind == "stream" and len(item) >= 3:
            (err if item[1] == "stderr" else out).append(str(item[2]))
        elif kind in ("display", "result") and len(item) >= 3 and isinstance(item[1], dict):
            main = kind == "result"
            if main and isinstance(item[2], int):
                count = count if count is not None else item[2]
            shown_id = item[2] if kind == "display" and isinstance(item[2], str) else None
            shown.append((shown_id, CodeResult.of(item[1], main=main)))
        elif kind == "update" and len(item) >= 3 and isinstance(item[1], dict):
            shown = [
                (i, CodeResult.of(item[1], main=r.is_main_result) if i == item[2] else r)
                for i, r in shown
            ]
        elif kind == "error" and len(item) >= 4:
            lines = item[3] if isinstance(item[3], list) else []
            error = CodeError(str(item[1]), str(item[2]), plain_traceback(lines))
    return Execution("".join(out), "".join(err), [r for _, r in shown], error, count)


@dataclass
class StreamState:
    """What execd's events of one run said (its own view, which may miss output)."""

    context_id: str | None = None
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    results: list[CodeResult] = field(default_factory=list)
    error: CodeError | None = None
    count: int | None = None
    refusal: str | None = None  # execd's bare error object inside the stream (busy)
    events: int = 0

    def take(self, event: Mapping[str, Any]) -> str | None:
        """Take one event; returns the output text of a stdout/stderr event (else None)."""
        self.events += 1
        kind = event.get("type")
        if kind is None and "code" in event:
            self.refusal = str(event.get("message") or event.get("code"))[:300]
        elif kind == "init":
            self.context_id = str(event.get("text") or "") or None
        elif kind in ("stdout", "stderr"):
            text = str(event.get("text") or "")
            (self.stdout if kind == "stdout" else self.stderr).append(text)
            return text
        elif kind == "execution_count" and isinstance(event.get("execution_count"), int):
            self.count = event["execution_count"]
        elif kind == "result" and isinstance(event.get("results"), dict):
            bundle = {("text/plain" if k == "text" else k): v for k, v in event["results"].items()}
            self.results.append(CodeResult.of(bundle, main=True))
        elif kind == "error" and isinstance(event.get("error"), dict):
            raw = event["error"]
            lines = raw.get("traceback") if isinstance(raw.get("traceback"), list) else []
            self.error = CodeError(
                str(raw.get("ename") or ""), str(raw.get("evalue") or ""), plain_traceback(lines)
            )
        return None

    def execution(self) -> Execution:
        return Execution(
            "".join(self.stdout), "".join(self.stderr), list(self.results), self.error, self.count
        )


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):  # nbformat's multi-line strings
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else json.dumps(value)


def _image(value: object) -> bytes | None:
    text = _text(value)
    if text is None:
        return None
    try:
        return base64.b64decode(text)
    except (binascii.Error, ValueError):
        return text.encode()


def _json(value: object) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
