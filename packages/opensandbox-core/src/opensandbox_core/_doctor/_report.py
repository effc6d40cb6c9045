"""The doctor's output: one line per check as it runs, a closing count, and the JSON document.

A line starts with the check's name as soon as the check starts (so a hung server never means
silence) and is completed with its status, summary, the time taken when it was slow, and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, Final, TextIO

from ._context import CheckResult
from ._registry import CHECKS, Listener

__all__ = ["ProgressPrinter", "counts_line", "format_line", "format_text", "json_document"]

SLOW_SECONDS: Final = 1.0
"""Checks that take longer show their time."""
WIDTH: Final = max(len(check.name) for check in CHECKS)


def format_line(result: CheckResult, width: int = WIDTH) -> str:
    """`name  STATUS  summary (time) -- fix: ...` for one check."""
    return f"{result.name:<{width}}  {_tail(result)}"


def _tail(result: CheckResult) -> str:
    text = f"{result.status:<4}  {result.summary}"
    if result.seconds >= SLOW_SECONDS:
        text += f" ({result.seconds:.1f} s)"
    if result.fix and result.status in ("WARN", "FAIL"):
        text += f" -- fix: {result.fix}"
    return text


def counts_line(results: Sequence[CheckResult]) -> str:
    counts = {s: sum(1 for r in results if r.status == s) for s in ("PASS", "WARN", "FAIL", "SKIP")}
    return ", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n) or "no checks"


def format_text(address: str, results: Sequence[CheckResult]) -> str:
    """The whole report at once (what the progress printer prints line by line)."""
    lines = [f"opensandbox-doctor: {address}"]
    lines += [format_line(r) for r in results]
    lines.append(counts_line(results))
    return "\n".join(lines)


def json_document(address: str, results: Sequence[CheckResult]) -> dict[str, Any]:
    return {
        "domain": address,
        "ok": not any(r.status == "FAIL" for r in results),
        "checks": [asdict(r) for r in results],
    }


class ProgressPrinter(Listener):
    """Writes each check's name when it starts and its result when it ends."""

    def __init__(self, stream: TextIO, address: str) -> None:
        self._stream = stream
        self._write(f"opensandbox-doctor: {address}\n")

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()

    def started(self, name: str) -> None:
        self._write(f"{name:<{WIDTH}}  ")

    def finished(self, result: CheckResult) -> None:
        self._write(_tail(result) + "\n")

    def close(self, results: Sequence[CheckResult]) -> None:
        self._write(counts_line(results) + "\n")
