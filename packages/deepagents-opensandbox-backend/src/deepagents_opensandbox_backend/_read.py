"""`read()` done on the client: the page logic of BaseSandbox's read script, ported line by line.

`BaseSandbox.read` runs a `python3 -c` script in the sandbox (`_READ_COMMAND_TEMPLATE` in
`deepagents/backends/sandbox.py`). The backend instead downloads the file through the native file
API and renders the page here with the same rules, so `ReadResult` is the same field for field
and error string for error string. Cases the port does not reproduce (a file over the download
limit, an invalid UTF-8 byte after the first 8 KiB, unexpected OS errors) return None and the
caller falls back to the script, so those stay exactly as BaseSandbox has them.

Ported from deepagents 0.7.32 on 2026-11-29; `tests/unit/deepagents_backend/test_read_port.py`
compares the port with the original script run locally.
"""

from __future__ import annotations

import base64
import codecs
import errno
from typing import Final

from deepagents.backends.protocol import FileData, ReadResult
from deepagents.backends.sandbox import MAX_BINARY_BYTES, MAX_OUTPUT_BYTES, TRUNCATION_MSG
from deepagents.backends.utils import _get_backend_read_file_type, normalize_read_bounds

__all__ = ["READ_ERRORS", "render_page"]

MAX_LINE_COUNT_BYTES: Final = 1024 * 1024
EMPTY_FILE_REMINDER: Final = "System reminder: File exists but has empty contents"

READ_ERRORS: Final[dict[int, str]] = {
    # errno of the core's OSError  ->  what the read script prints for the same file.
    errno.ENOENT: "file_not_found",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",
    errno.EISDIR: "not_a_file",
    errno.EINVAL: "not_a_file",  # FIFO, socket or device: the core refuses to read it
}


def read_error(file_path: str, code: str) -> ReadResult:
    return ReadResult(error=f"File '{file_path}': {code}")


def render_page(raw: bytes, file_path: str, offset: int, limit: int) -> ReadResult | None:
    """The ReadResult the read script would produce for a regular file holding `raw`.

    None when the script would not print a result (it would crash on a late invalid byte).
    """
    offset, limit = normalize_read_bounds(offset, limit)
    size = len(raw)
    if size == 0:
        return ReadResult(file_data=FileData(content=EMPTY_FILE_REMINDER, encoding="utf-8"))
    if _get_backend_read_file_type(file_path) != "text":
        if size > MAX_BINARY_BYTES:
            return read_error(
                file_path, f"Binary file exceeds maximum preview size of {MAX_BINARY_BYTES} bytes"
            )
        return _base64(raw)
    try:
        codecs.getincrementaldecoder("utf-8")().decode(raw[:8192], final=False)
    except UnicodeDecodeError:
        return _base64(raw)
    if limit <= 0:
        return ReadResult(file_data=FileData(content="", encoding="utf-8"), no_lines_requested=True)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None  # the script dies with a traceback here: let it, via the fallback
    # open(..., newline=None): universal newlines, then readline() splits on "\n".
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    count = len(lines)

    index = 0
    line_count = 0
    returned_lines = 0
    truncated = False
    parts: list[str] = []
    current_bytes = 0
    msg_bytes = len(TRUNCATION_MSG.encode("utf-8"))
    effective_limit = MAX_OUTPUT_BYTES - msg_bytes

    at_eof = False
    while line_count < offset:
        if index >= count:
            at_eof = True
            break
        index += 1
        line_count += 1

    while not at_eof and returned_lines < limit and not truncated:
        if index >= count:
            at_eof = True
            break
        line = lines[index]
        index += 1
        line_count += 1
        piece = line if returned_lines == 0 else "\n" + line
        piece_bytes = len(piece.encode("utf-8"))
        if current_bytes + piece_bytes > effective_limit:
            truncated = True
            remaining_bytes = effective_limit - current_bytes
            if remaining_bytes > 0:
                prefix = piece.encode("utf-8")[:remaining_bytes].decode("utf-8", errors="ignore")
                if prefix:
                    parts.append(prefix)
                    current_bytes += len(prefix.encode("utf-8"))
            break
        parts.append(piece)
        current_bytes += piece_bytes
        returned_lines += 1

    if not at_eof:
        at_eof = index == count  # the script's `f.tell() == st.st_size`

    if returned_lines == 0 and not truncated:
        return read_error(
            file_path, f"Line offset {offset} exceeds file length ({line_count} lines)"
        )

    total_lines: int | None
    if at_eof:
        total_lines = line_count
    elif size <= MAX_LINE_COUNT_BYTES:
        total_lines = count
    else:
        total_lines = None

    content = "".join(parts)
    if truncated:
        content += TRUNCATION_MSG
    if truncated and returned_lines == 0:
        returned_lines = 1
    end_line = offset + returned_lines
    if total_lines is not None:
        next_offset = end_line if end_line < total_lines else None
    else:
        next_offset = end_line
    return ReadResult(
        file_data=FileData(content=content, encoding="utf-8"),
        total_lines=total_lines,
        start_line=offset + 1,
        end_line=end_line,
        next_offset=next_offset,
    )


def _base64(raw: bytes) -> ReadResult:
    return ReadResult(
        file_data=FileData(content=base64.b64encode(raw).decode("ascii"), encoding="base64")
    )
