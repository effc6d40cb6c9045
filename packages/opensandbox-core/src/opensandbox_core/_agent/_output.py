"""A command's output shaped for an agent: stdout and marked stderr, and the preview of an
output left in the sandbox (`run_offloaded`): head and tail lines around a marker, or a
leading excerpt closed by a notice, cut exactly as `head -n` / `tail -n` would cut the file."""

from __future__ import annotations

from dataclasses import dataclass

from opensandbox_core._commands._offload import OffloadedRun

__all__ = ["PreviewLayout", "combined_output", "head_lines", "tail_lines"]


def combined_output(stdout: str, stderr: str, stderr_prefix: str | None) -> str:
    """stdout, then stderr with every line starting with `stderr_prefix` (on a line of its own,
    never glued to stdout's last line). Without a prefix, the two joined as printed."""
    if stderr_prefix is None or not stderr:
        return stdout + stderr
    head = stdout if not stdout or stdout.endswith("\n") else stdout + "\n"
    lines = stderr.split("\n")
    tail = lines.pop() if lines[-1] == "" else None  # stderr ended with a line break
    marked = "\n".join(stderr_prefix + line for line in lines)
    return head + marked + ("\n" if tail is not None else "")


def head_lines(data: bytes, count: int) -> bytes:
    """`head -n count` of `data`: up to and including its `count`-th line break."""
    end = -1
    for _ in range(count):
        end = data.find(b"\n", end + 1)
        if end < 0:
            return data
    return data[: end + 1]


def tail_lines(data: bytes, count: int) -> bytes:
    """`tail -n count` of `data`: its last `count` lines, an unterminated last line counting."""
    start = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(count):
        start = data.rfind(b"\n", 0, start)
        if start < 0:
            return data
    return data[start + 1 :]


@dataclass(frozen=True, kw_only=True)
class PreviewLayout:
    """How an offloaded output is previewed, and the words the preview uses.

    `marker` (formatted with `omitted_lines`) stands between the head and tail lines when
    there are more lines than both hold; `cut_notice` precedes it when a byte budget cut a line.
    With fewer lines, the output's first `head_bytes + tail_bytes` bytes, then `clip` (or
    `clip_capped` when the capture cap was reached; formatted with `captured_bytes`)."""

    head_lines: int
    tail_lines: int
    head_bytes: int
    tail_bytes: int
    marker: str
    cut_notice: str
    clip: str
    clip_capped: str

    @property
    def read_bytes(self) -> int:
        """What to read of the file's head and of its tail (`run_offloaded(preview_bytes=)`)."""
        return self.head_bytes + self.tail_bytes

    def preview(self, run: OffloadedRun) -> tuple[bytes, bool]:
        """The preview of an offloaded output, and whether it holds `marker`."""
        omitted = run.lines - self.head_lines - self.tail_lines
        if omitted <= 0:
            excerpt = run.head[: self.read_bytes]
            if run.size > self.read_bytes:
                notice = self.clip_capped if run.truncated else self.clip
                excerpt += b"\n" + notice.format(captured_bytes=run.size).encode() + b"\n"
            return excerpt, False
        head = run.head[: self.head_bytes]
        tail = run.tail[-self.tail_bytes :]
        # Did the byte caps cut the line excerpts? One byte more of the tail tells where its
        # lines start.
        whole_tail = tail_lines(run.tail[-(self.tail_bytes + 1) :], self.tail_lines)
        cut = head.count(b"\n") < self.head_lines or len(whole_tail) > self.tail_bytes
        parts = [head_lines(head, self.head_lines)]
        if cut:
            parts.append(b"\n" + self.cut_notice.encode() + b"\n")
        parts.append(self.marker.format(omitted_lines=omitted).encode() + b"\n")
        parts.append(tail_lines(tail, self.tail_lines))
        return b"".join(parts), True
