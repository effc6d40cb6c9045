"""A run of code as a model reads it: one text, and the images it showed (`CodeToolResult`).

The text starts with one line saying how the run ended, then a section for each part it has, in
the order a notebook shows them:

```
execution 3: raised ZeroDivisionError
[stdout]
...
[display 1: image/png, 20,417 bytes, attached as image 1]
<Figure size 640x480 with 1 Axes>
[result]
42
[error]
Traceback (most recent call last): ...
```

PNG and JPEG images (what every model with vision reads) go beside the text as bytes, at most
`MAX_IMAGES` of them and each at most `MAX_IMAGE_BYTES`; the text says which were left out and
why. Other rich outputs (HTML, SVG, JSON, ...) are given by their `text/plain` form when the
bundle has one, else as their source text. Output, tracebacks and values are cut to `max_output`
characters each (output and tracebacks keep their end, values their start), saying how many
characters were left out. Pure: no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from opensandbox_core._code._model import CodeResult, Execution

__all__ = ["MAX_IMAGES", "MAX_IMAGE_BYTES", "CodeImage", "CodeToolResult", "render"]

MAX_IMAGES: Final = 8
"""Images one result carries at most (the first ones the run showed)."""
MAX_IMAGE_BYTES: Final = 5 * 1024 * 1024
"""The largest image a result carries (5 MiB: larger ones most model APIs refuse)."""

_IMAGE_TYPES: Final = (("png", "image/png"), ("jpeg", "image/jpeg"))
_SOURCE_TYPES: Final = (
    "text/markdown",
    "text/html",
    "text/latex",
    "image/svg+xml",
    "application/json",
)


@dataclass(frozen=True)
class CodeImage:
    """An image a run showed: `data` (the file's bytes) and its `mime_type` (`image/png` or
    `image/jpeg`)."""

    data: bytes
    mime_type: str

    def __repr__(self) -> str:
        return f"CodeImage({self.mime_type}, {len(self.data)} bytes)"


@dataclass(frozen=True)
class CodeToolResult:
    """What one `run_code` call gives the model: `text`, and `images` to send beside it (in
    the order the text numbers them: `attached as image 1`, ...)."""

    text: str
    images: tuple[CodeImage, ...] = ()


def _head(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit:,} more characters left out]"


def _tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"[{len(text) - limit:,} characters left out before this]\n" + text[-limit:]


def _value_text(result: CodeResult) -> str:
    """The text form of a result: `text/plain`, else the source of its first rich type."""
    if result.text is not None:
        return result.text
    for mime in _SOURCE_TYPES:
        value = result.mime.get(mime)
        if value is not None:
            source = value if isinstance(value, str) else json.dumps(value, default=str)
            return f"({mime}) {source}"
    return ""


class _Images:
    def __init__(self) -> None:
        self.kept: list[CodeImage] = []

    def take(self, result: CodeResult) -> list[str]:
        """Notes on the result's images, each kept if it may be."""
        notes: list[str] = []
        for field_name, mime in _IMAGE_TYPES:
            data: bytes | None = getattr(result, field_name)
            if data is None:
                continue
            size = f"{mime}, {len(data):,} bytes"
            if len(data) > MAX_IMAGE_BYTES:
                notes.append(f"{size}, not attached: over {MAX_IMAGE_BYTES // (1024 * 1024)} MiB")
            elif len(self.kept) >= MAX_IMAGES:
                notes.append(f"{size}, not attached: only {MAX_IMAGES} images per result")
            else:
                self.kept.append(CodeImage(data, mime))
                notes.append(f"{size}, attached as image {len(self.kept)}")
        return notes


def _status(execution: Execution, timed_out: float | None) -> str:
    if timed_out is not None:
        return (
            f"timed out after {timed_out:g} s: the run was interrupted; the kernel keeps its "
            "state (what ran before the interrupt is defined)"
        )
    count = "" if execution.execution_count is None else f" {execution.execution_count}"
    if execution.error is not None:
        return f"execution{count}: raised {execution.error.name}"
    return f"execution{count}: done"


def render(
    execution: Execution, *, max_output: int, timed_out: float | None = None
) -> CodeToolResult:
    """The result a model gets for `execution`; `timed_out`: the timeout it ran into."""
    lines = [_status(execution, timed_out)]
    if execution.stdout:
        lines += ["[stdout]", _tail(execution.stdout.rstrip("\n"), max_output)]
    if execution.stderr:
        lines += ["[stderr]", _tail(execution.stderr.rstrip("\n"), max_output)]
    images = _Images()
    shown = 0
    for result in execution.results:
        notes = images.take(result)
        if result.is_main_result:
            title = "result"
        else:
            shown += 1
            title = f"display {shown}"
        lines.append(f"[{title}{': ' if notes else ''}{'; '.join(notes)}]")
        text = _value_text(result)
        if text:
            lines.append(_head(text, max_output))
    if execution.error is not None:
        error = execution.error
        trace = error.traceback or f"{error.name}: {error.value}"
        lines += ["[error]", _tail(trace, max_output)]
    if len(lines) == 1:
        lines.append("(no output)")
    return CodeToolResult("\n".join(lines), tuple(images.kept))
