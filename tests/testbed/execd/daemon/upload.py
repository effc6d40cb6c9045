"""`POST /files/upload`: multipart pairs of a `metadata` part (`{"path","owner","group","mode"}`)
and a `file` part, as execd takes them.

Go's ParseMultipartForm(32 MiB) first reads the whole form (file parts in memory up to 32 MiB
in all, the rest in the temp dir); then metadata and file parts are paired by order and
written one after the other, stopping at the first failing pair. The target's parent
directories are made for the cleaned path, the file is opened by the raw one; modes and
ownership as fileinfo.chmod_file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING
from urllib.parse import unquote

from .fileinfo import chmod_file, file_route
from .goenc import ApiError, path_error
from .gojson import GO_FILE_METADATA, GoJSONError, go_json_decode
from .gopath import go_dir, go_expand_path, mkdir_all
from .handler import BodyReader
from .launch import tmp_dir

if TYPE_CHECKING:
    from .handler import Handler


@file_route
def upload(h: Handler, q: dict) -> None:
    form = _read_upload_form(h)
    metas, files = form.get("metadata", []), form.get("file", [])
    try:
        if not metas:
            raise ApiError(400, "INVALID_FILE_METADATA", "metadata file is missing")
        if not files:
            raise ApiError(400, "INVALID_FILE_CONTENT", "file is missing")
        if len(metas) != len(files):
            raise ApiError(
                400,
                "INVALID_FILE",
                f"metadata and file count mismatch: {len(metas)} vs {len(files)}",
            )
        for meta_part, file_part in zip(metas, files, strict=False):
            meta_part.seek(0)
            try:
                meta = go_json_decode(meta_part.read(), GO_FILE_METADATA, whole=True)
            except GoJSONError as e:
                raise ApiError(
                    400, "INVALID_FILE_METADATA", f"invalid metadata format. {e}"
                ) from None
            assert isinstance(meta, dict)
            if not meta.get("path"):
                raise ApiError(400, "INVALID_FILE_METADATA", "metadata path is empty")
            file_part.seek(0)
            _write_upload(meta, file_part)
    finally:
        for part in metas + files:
            part.close()
    h.send_ok()


def _read_upload_form(h: Handler) -> dict[str, list]:
    """Go's ParseMultipartForm(32 MiB) as gin calls it: the whole form is read before any
    file is written; file parts (those with a filename) stay in memory up to 32 MiB in all,
    the rest is spilled to the temp dir. Any failure is execd's 400."""
    ctype = h.headers.get("Content-Type") or ""
    reader = BodyReader(h.rfile, h.headers)
    boundary = ""
    media = ctype.split(";", 1)[0].strip().lower()
    for item in ctype.split(";")[1:]:
        key, _, value = item.strip().partition("=")
        if key.strip().lower() == "boundary":
            boundary = value.strip().strip('"')
    if media != "multipart/form-data" or not boundary:
        reader.drain()
        raise ApiError(400, "INVALID_FILE", "multipart form is empty")
    budget = 32 << 20
    form: dict[str, list] = {}
    try:
        for headers, body in MultipartParser(reader, boundary.encode()).parts():
            disp = disposition(headers.get("content-disposition", ""))
            name = disp.get("name", "")
            filename = disp.get("filename*") or disp.get("filename") or ""
            if not name or not filename:
                for _ in body:  # a plain form value: not a file part
                    pass
                continue
            spool = (
                tempfile.SpooledTemporaryFile(  # noqa: SIM115 - closed by upload()
                    max_size=budget, dir=tmp_dir(), prefix="multipart-"
                )
                if budget > 0
                else tempfile.TemporaryFile(dir=tmp_dir(), prefix="multipart-")  # noqa: SIM115
            )
            size = 0
            for chunk in body:
                spool.write(chunk)
                size += len(chunk)
            budget -= size
            form.setdefault(name, []).append(spool)
    except ValueError:
        for parts in form.values():
            for part in parts:
                part.close()
        reader.drain()
        raise ApiError(400, "INVALID_FILE", "multipart form is empty") from None
    reader.drain()
    return form


def _write_upload(meta: dict, body: IO[bytes]) -> None:
    target = meta["path"]
    try:
        resolved = go_expand_path(target)
    except ValueError as e:
        raise ApiError(500, "RUNTIME_ERROR", f"error resolving target path {target}. {e}") from None
    parent = go_dir(resolved)
    try:
        mkdir_all(parent, 0o777)
    except OSError as e:
        raise ApiError(
            500,
            "RUNTIME_ERROR",
            f"error creating target directory {parent}. {path_error('mkdir', e.filename, e)}",
        ) from None
    try:
        fd = os.open(resolved, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o777)
    except OSError as e:
        raise ApiError(
            500,
            "RUNTIME_ERROR",
            f"error opening destination file {resolved}. {path_error('open', resolved, e)}",
        ) from None
    _copy_into(fd, body, resolved, parent)
    perm = {
        "mode": meta.get("mode") or 0,
        "owner": meta.get("owner") or "",
        "group": meta.get("group") or "",
    }
    try:
        chmod_file(resolved, perm)
    except ValueError:
        time.sleep(0.02)
        try:
            chmod_file(resolved, perm)
        except ValueError as e:
            raise ApiError(500, "RUNTIME_ERROR", f"error chmoding file {resolved}. {e}") from None


def _copy_into(fd: int, body: IO[bytes], resolved: str, parent: str) -> None:
    """The part's bytes into the open target (closed after), synced with its directory."""
    try:
        while True:
            chunk = body.read(1 << 20)
            if not chunk:
                break
            mv = memoryview(chunk)
            while mv:
                n = os.write(fd, mv)
                mv = mv[n:]
        with contextlib.suppress(OSError):
            os.fsync(fd)
    except OSError as e:
        raise ApiError(
            500,
            "RUNTIME_ERROR",
            f"error copying file {resolved}. {path_error('write', resolved, e)}",
        ) from None
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        dfd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


class MultipartParser:
    """Incremental multipart/form-data parser yielding (headers, body-chunk-iterator)."""

    def __init__(self, reader: BodyReader, boundary: bytes) -> None:
        self.r = reader
        self.delim = b"\r\n--" + boundary
        self.buf = bytearray(b"\r\n")  # lets the first boundary match the same delimiter
        self.done = False

    def _fill(self) -> bool:
        data = self.r.read(262144)
        if not data:
            return False
        self.buf.extend(data)
        return True

    def parts(self) -> Iterator[tuple[dict[str, str], Iterator[bytes]]]:
        # skip preamble up to first delimiter
        while True:
            i = self.buf.find(self.delim)
            if i >= 0:
                del self.buf[: i + len(self.delim)]
                break
            keep = len(self.delim)
            if len(self.buf) > keep:
                del self.buf[: len(self.buf) - keep]
            if not self._fill():
                raise ValueError("multipart: NextPart: EOF")
        while True:
            while len(self.buf) < 2:
                if not self._fill():
                    raise ValueError("multipart: NextPart: EOF")
            if self.buf[:2] == b"--":
                return
            # headers
            while True:
                j = self.buf.find(b"\r\n\r\n")
                if j >= 0:
                    break
                if len(self.buf) > 65536 or not self._fill():
                    raise ValueError("multipart: NextPart: EOF")
            head = bytes(self.buf[:j]).decode("utf-8", "replace")
            del self.buf[: j + 4]
            headers: dict[str, str] = {}
            for line in head.split("\r\n"):
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            yield headers, self._body()
            if not self.done_part:
                for _ in self._body():
                    pass

    def _body(self) -> Iterator[bytes]:
        self.done_part = False
        dl = len(self.delim)
        while True:
            i = self.buf.find(self.delim)
            if i >= 0:
                chunk = bytes(self.buf[:i])
                del self.buf[: i + dl]
                self.done_part = True
                if chunk:
                    yield chunk
                return
            if len(self.buf) > dl:
                cut = len(self.buf) - dl
                chunk = bytes(self.buf[:cut])
                del self.buf[:cut]
                yield chunk
            if not self._fill():
                raise ValueError("multipart: NextPart: unexpected EOF")


def disposition(value: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in value.split(";")[1:]:
        if "=" in item:
            k, v = item.strip().split("=", 1)
            out[k.strip().lower()] = (
                unquote(v.strip().strip('"'))
                if k.strip().lower() == "filename*"
                else v.strip().strip('"')
            )
    return out
