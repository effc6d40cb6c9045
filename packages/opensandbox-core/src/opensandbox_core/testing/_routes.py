"""The fake execd's HTTP routes (files, status, interrupt) and its event encoding."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import httpx

from opensandbox_core._wire._framing import decode_output

from ._model import FakeSandbox


def refused() -> httpx.Response:
    raise httpx.ConnectError("fake: no sandbox answers at this address")


def error(status: int, code: str, message: str) -> httpx.Response:
    return httpx.Response(status, json={"code": code, "message": message})


def event(kind: str, text: str | None, **extra: Any) -> bytes:
    event: dict[str, Any] = {"type": kind}
    if text is not None:
        event["text"] = text
    event.update(extra)
    event["timestamp"] = int(datetime.now(UTC).timestamp() * 1000)
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def error_event(value: str, traceback: list[str]) -> bytes:
    error = {"ename": "CommandExecError", "evalue": value, "traceback": traceback}
    return event("error", None, error=error)


def texts(raw: bytes, *, legacy: bool) -> list[str]:
    """The event texts execd sends for this output: one per line, terminators stripped and a
    blank line as "\\n" (legacy), or the output whole (modern)."""
    if not raw:
        return []
    text = decode_output(raw)
    if not legacy:
        return [text]
    lines = re.split(r"\r\n|\r|\n", text)
    if lines[-1] == "":
        lines.pop()
    return [line or "\n" for line in lines]


def interrupt(box: FakeSandbox, request: httpx.Request) -> httpx.Response:
    execution_id = request.url.params.get("id", "")
    if execution_id not in box.statuses:
        return error(500, "RUNTIME_ERROR", f"no such session: {execution_id}")
    box.interrupted.add(execution_id)
    return httpx.Response(200)


def status(box: FakeSandbox, request: httpx.Request) -> httpx.Response:
    execution_id = request.url.path.rsplit("/", 1)[-1]
    status = box.statuses.get(execution_id)
    if status is None:
        return error(404, "INVALID_REQUEST_BODY", f"command not found: {execution_id}")
    return httpx.Response(200, json=status)


def _not_found(path: str) -> httpx.Response:
    message = f"file not found. open {path}: no such file or directory"
    return error(404, "FILE_NOT_FOUND", message)


def download(box: FakeSandbox, request: httpx.Request) -> httpx.Response:
    path = request.url.params.get("path", "")
    file = box.files.get(path)
    if file is None:
        return _not_found(path)
    data = file.data
    match = re.fullmatch(r"bytes=(\d+)-(\d*)", request.headers.get("Range", ""))
    if match is None or not data:
        return httpx.Response(200, content=data)
    start = int(match[1])
    end = min(int(match[2]) if match[2] else len(data) - 1, len(data) - 1)
    if start >= len(data):
        return httpx.Response(416, text="invalid range: failed to overlap")
    headers = {"Content-Range": f"bytes {start}-{end}/{len(data)}"}
    return httpx.Response(206, headers=headers, content=data[start : end + 1])


def upload(box: FakeSandbox, request: httpx.Request) -> httpx.Response:
    """Each (metadata, file) pair in order, each written whole before the next (as execd)."""
    content_type = request.headers.get("content-type", "")
    boundary = content_type.split("boundary=", 1)[-1].strip('"').encode()
    meta: dict[str, Any] = {}
    for part in request.content.split(b"--" + boundary)[1:-1]:
        head, _, payload = part.partition(b"\r\n\r\n")
        payload = payload[: -len(b"\r\n")] if payload.endswith(b"\r\n") else payload
        if b'name="metadata"' in head:
            meta = json.loads(payload)
            continue
        path = str(meta.get("path", ""))
        if not path.startswith("/"):
            return error(400, "INVALID_REQUEST_BODY", "the upload has no absolute path")
        mode = int(str(meta.get("mode") or "755"), 8)
        box.write(path, payload, mode & 0o777)
    return httpx.Response(200)


def _entry(box: FakeSandbox, path: str) -> dict[str, Any] | None:
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    if path in box.dirs:
        kind, size, mode, when = "directory", 4096, 755, now
    elif path in box.files:
        file = box.files[path]
        kind, size, mode = "file", len(file.data), int(format(file.mode, "o"))
        when = file.modified.isoformat().replace("+00:00", "Z")
    else:
        return None
    entry: dict[str, Any] = (
        {"path": path, "type": kind} if box.file_api != "1.0.18" else {"path": path}
    )
    return entry | {
        "size": size,
        "modified_at": when,
        "created_at": when,
        "owner": "root",
        "group": "root",
        "mode": mode,
    }


def file_info(box: FakeSandbox, request: httpx.Request) -> httpx.Response:
    answer: dict[str, Any] = {}
    for path in request.url.params.get_list("path"):
        entry = _entry(box, path)
        if entry is None and box.file_api == "1.0.18":
            return error(500, "RUNTIME_ERROR", f"error accessing file: file not found: {path}")
        if entry is None:
            return _not_found(path)
        answer[path] = entry
    return httpx.Response(200, json=answer)


def list_dir(box: FakeSandbox, request: httpx.Request) -> httpx.Response:
    if box.file_api == "1.0.18":
        return httpx.Response(404, text="404 page not found")
    root = request.url.params.get("path", "/").rstrip("/") or "/"
    if root not in box.dirs:
        return _not_found(root)
    prefix = root.rstrip("/") + "/"
    names = {p for p in (*box.dirs, *box.files) if p.startswith(prefix) and p != root}
    children = sorted(p for p in names if "/" not in p[len(prefix) :])
    return httpx.Response(200, json=[_entry(box, p) for p in children])


def make_dirs(box: FakeSandbox, request: httpx.Request) -> httpx.Response:
    for path in json.loads(request.content or b"{}"):
        box._parents(path + "/x")
    return httpx.Response(200)


def move(box: FakeSandbox, request: httpx.Request) -> httpx.Response:
    for item in json.loads(request.content or b"[]"):
        src, dest = str(item["src"]), str(item["dest"])
        if src not in box.files:
            return _not_found(src)
        if dest in box.files or dest in box.dirs:
            message = f"error accessing file: destination path already exists: {dest}"
            return error(500, "RUNTIME_ERROR", message)
        box._parents(dest)
        box.files[dest] = box.files.pop(src)
    return httpx.Response(200)


def remove_files(box: FakeSandbox, request: httpx.Request) -> httpx.Response:
    for path in request.url.params.get_list("path"):
        box.files.pop(path, None)
    return httpx.Response(200)


def remove_dirs(box: FakeSandbox, request: httpx.Request) -> httpx.Response:
    for path in request.url.params.get_list("path"):
        prefix = path.rstrip("/") + "/"
        box.dirs = {d for d in box.dirs if d != path and not d.startswith(prefix)}
        box.files = {p: f for p, f in box.files.items() if not p.startswith(prefix)}
    return httpx.Response(200)
