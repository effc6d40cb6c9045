"""The file and directory routes other than search, download and upload: `/files/info`,
`DELETE /files`, `/files/permissions`, `/files/mv`, `/files/replace`, `POST /directories`,
`DELETE /directories` and `/directories/list` (v1.0.19 only).

Statuses, `{"code","message"}` texts (Go `*PathError` wording) and header sets as execd v1.0.19
and v1.0.18 answer; README.md, "Files", lists the rules.
"""

from __future__ import annotations

import itertools
import os
import stat
from typing import TYPE_CHECKING

from . import config
from .fileinfo import (
    chmod_file,
    file_error,
    file_info,
    file_route,
    query_abs,
    query_int,
    query_path,
    read_go_json,
)
from .goenc import ApiError, go_errno, go_sorted_map, path_error
from .gojson import GO_PERMISSION_MAP, GO_RENAME_LIST, GO_REPLACE_MAP
from .gopath import go_dir, go_expand_abs, go_expand_path, mkdir_all, remove_all
from .handler import q1

if TYPE_CHECKING:
    from .handler import Handler


@file_route
def files_info(h: Handler, q: dict) -> None:
    resp: dict[str, object] = {}
    for p in q.get("path", []):
        try:
            ap = go_expand_abs(p)
        except ValueError as e:
            raise file_error(f"invalid path {p}: {e}", False) from None
        if config.LEGACY_FILE_API:
            # v1.0.18: os.Stat (follows symlinks); "not found" lost its cause, so 500.
            try:
                st = os.stat(ap)
            except FileNotFoundError:
                raise file_error(f"file not found: {p}", False) from None
            except OSError as e:
                raise file_error(
                    f"error accessing file {p}: {path_error('stat', ap, e)}", False
                ) from None
        else:
            try:
                st = os.lstat(ap)
            except FileNotFoundError as e:
                raise file_error(
                    f"file not found: {p}: {path_error('lstat', ap, e)}", True
                ) from None
            except OSError as e:
                raise file_error(
                    f"error accessing file {p}: {path_error('lstat', ap, e)}", False
                ) from None
        resp[p] = file_info(ap, st)
    h.send_json(200, go_sorted_map(resp))


@file_route
def remove_files(h: Handler, q: dict) -> None:
    for p in q.get("path", []):
        try:
            try:
                ap = go_expand_abs(p)
            except ValueError as e:
                raise ValueError(f"invalid path: {e}") from None
            try:
                st = os.stat(ap)  # follows: a dangling link "does not exist" and stays
            except FileNotFoundError:
                continue
            except OSError as e:
                raise ValueError(path_error("stat", ap, e)) from None
            if stat.S_ISDIR(st.st_mode):
                raise ValueError(f"path is a directory: {p}")
            try:
                os.remove(ap)
            except OSError as e:
                raise ValueError(f"failed to remove file: {path_error('remove', ap, e)}") from None
        except ValueError as e:
            raise ApiError(500, "RUNTIME_ERROR", f"error removing file {p}. {e}") from None
    h.send_ok()


@file_route
def chmod_files(h: Handler, q: dict) -> None:
    req = read_go_json(h, GO_PERMISSION_MAP) or {}
    assert isinstance(req, dict)
    for p, perm in req.items():
        try:
            chmod_file(p, perm or {})
        except ValueError as e:
            raise ApiError(
                500, "RUNTIME_ERROR", f"error changing permissions for {p}. {e}"
            ) from None
    h.send_ok()


@file_route
def rename_files(h: Handler, q: dict) -> None:
    req = read_go_json(h, GO_RENAME_LIST) or []
    assert isinstance(req, list)
    for item in req:
        item = item or {}
        src_req, dst_req = item.get("src") or "", item.get("dest") or ""
        try:
            src = go_expand_abs(src_req)
        except ValueError as e:
            raise file_error(f"invalid source path: {e}", False) from None
        try:
            dst = go_expand_abs(dst_req)
        except ValueError as e:
            raise file_error(f"invalid destination path: {e}", False) from None
        try:
            os.stat(src)
        except FileNotFoundError as e:
            if config.LEGACY_FILE_API:
                raise file_error(f"source path not found: {src_req}", False) from None
            raise file_error(
                f"source path not found: {src_req}: {path_error('stat', src, e)}", True
            ) from None
        except OSError:
            pass
        try:
            mkdir_all(go_dir(dst), 0o755)
        except OSError as e:
            raise file_error(
                f"failed to create destination directory: {path_error('mkdir', e.filename, e)}",
                isinstance(e, FileNotFoundError),
            ) from None
        if os.path.exists(dst):
            raise file_error(f"destination path already exists: {dst_req}", False)
        try:
            os.rename(src, dst)
        except OSError as e:
            raise file_error(
                f"failed to rename file: rename {src} {dst}: {go_errno(e)}",
                isinstance(e, FileNotFoundError),
            ) from None
    h.send_ok()


@file_route
def make_dirs(h: Handler, q: dict) -> None:
    req = read_go_json(h, GO_PERMISSION_MAP) or {}
    assert isinstance(req, dict)
    for d, perm in req.items():
        try:
            ap = go_expand_abs(d)
        except ValueError as e:
            raise file_error(str(e), False) from None
        existed = os.path.exists(ap)
        try:
            mkdir_all(ap, 0o777)
        except OSError as e:
            raise file_error(
                path_error("mkdir", e.filename, e), isinstance(e, FileNotFoundError)
            ) from None
        # v1.0.19 sets the mode and owner of a new directory only; v1.0.18 of every one.
        if config.LEGACY_FILE_API or not existed:
            try:
                chmod_file(ap, perm or {})
            except ValueError as e:
                raise file_error(str(e), False) from None
    h.send_ok()


@file_route
def remove_dirs(h: Handler, q: dict) -> None:
    for d in q.get("path", []):
        try:
            resolved = go_expand_path(d)
        except ValueError as e:
            raise ApiError(500, "RUNTIME_ERROR", f"error resolving directory {d}. {e}") from None
        err = remove_all(resolved)
        if err:
            raise ApiError(500, "RUNTIME_ERROR", f"error removing directory {d}. {err}")
    h.send_ok()


@file_route
def list_directory(h: Handler, q: dict) -> None:
    if config.LEGACY_FILE_API:  # the route came with v1.0.19
        h.send_text(404, "404 page not found", ctype="text/plain")
        return
    p = query_path(q)
    depth = query_int(q1(q, "depth"), "depth", 1, minimum=0)
    ap = query_abs(p)
    try:
        st = os.lstat(ap)
    except OSError as e:
        raise file_error(path_error("lstat", ap, e), isinstance(e, FileNotFoundError)) from None
    if stat.S_ISLNK(st.st_mode):
        raise ApiError(
            400, "INVALID_REQUEST_BODY", f"path is a symbolic link, refusing to traverse: {ap}"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise ApiError(400, "INVALID_REQUEST_BODY", f"path is not a directory: {ap}")
    out: list[dict] = []

    def walk(d: str, level: int) -> None:
        try:
            names = sorted(os.listdir(d), key=os.fsencode)
        except OSError as e:
            raise ValueError(path_error("open", d, e)) from None
        for name in names:
            full = d.rstrip("/") + "/" + name
            try:
                est = os.lstat(full)
            except OSError as e:
                raise ValueError(path_error("lstat", full, e)) from None
            out.append(file_info(full, est))
            if stat.S_ISDIR(est.st_mode) and level + 1 < depth:
                walk(full, level + 1)

    if depth > 0:
        try:
            walk(ap, 0)
        except ValueError as e:
            raise ApiError(500, "RUNTIME_ERROR", f"error listing directory {ap}. {e}") from None
    h.send_json(200, out)


@file_route
def replace_content(h: Handler, q: dict) -> None:
    verbose = q1(q, "verbose") == "true" and not config.LEGACY_FILE_API
    req = read_go_json(h, GO_REPLACE_MAP) or {}
    assert isinstance(req, dict)
    results: dict[str, object] = {}
    for p, item in req.items():
        item = item or {}
        try:
            ap = go_expand_abs(p)
        except ValueError as e:
            raise file_error(str(e), False) from None
        try:
            st = os.stat(ap)
        except OSError as e:
            raise file_error(path_error("stat", ap, e), isinstance(e, FileNotFoundError)) from None
        try:
            with open(ap, "rb") as fh:
                content = fh.read()
        except IsADirectoryError as e:
            raise file_error(path_error("read", ap, e), False) from None
        except OSError as e:
            raise file_error(path_error("open", ap, e), isinstance(e, FileNotFoundError)) from None
        old = (item.get("old") or "").encode()
        new = (item.get("new") or "").encode()
        if not old:
            if not config.LEGACY_FILE_API:
                raise ApiError(400, "INVALID_REQUEST_BODY", "old content must not be empty")
            # v1.0.18: Go's ReplaceAll with "" inserts `new` around every character.
            cuts = _utf8_boundaries(content)
            pieces = [content[a:b] for a, b in itertools.pairwise(cuts)]
            replaced = new + b"".join(piece + new for piece in pieces)
        else:
            replaced = content.replace(old, new)
        try:
            fd = os.open(ap, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, st.st_mode & 0o777)
            with os.fdopen(fd, "wb") as fh:
                fh.write(replaced)
        except OSError as e:
            raise file_error(path_error("open", ap, e), isinstance(e, FileNotFoundError)) from None
        if verbose:
            results[p] = {"replacedCount": content.count(old)}
    if verbose:
        h.send_json(200, go_sorted_map(results))
    else:
        h.send_ok()


def _utf8_boundaries(data: bytes) -> list[int]:
    """Offsets where Go's strings.ReplaceAll(s, "", x) inserts: the start, and after each UTF-8
    sequence (each byte of an invalid one counts alone)."""
    out = [0]
    i = 0
    while i < len(data):
        b = data[i]
        size = 2 if 0xC2 <= b <= 0xDF else 3 if 0xE0 <= b <= 0xEF else 4 if 0xF0 <= b <= 0xF4 else 1
        if size > 1:
            try:
                data[i : i + size].decode("utf-8")
            except UnicodeDecodeError:
                size = 1
        i += size
        out.append(i)
    return out


# -- Go's net/http response shapes for the file routes ------------------------------------------
