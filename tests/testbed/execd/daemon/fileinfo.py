"""What every file route shares: execd's file error shape, its mode and ownership rules, its
`FileInfo`, and the query parsing and error-text wrapping of a file route.

The file routes answer like execd v1.0.19 (profiles 1.0.19 and 1.1) or v1.0.18 (profiles 1.0.18
and 1.0.16, `config.LEGACY_FILE_API`), as recorded in tests/data/execd-recordings/.
"""

from __future__ import annotations

import contextlib
import functools
import grp
import os
import pwd
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from . import config
from .goenc import ApiError, go_parse_int, go_text, go_time, path_error
from .gojson import bind_json
from .gopath import go_expand_abs
from .handler import go_parse_query, q1

if TYPE_CHECKING:
    from .handler import Handler

Route = Callable[["Handler", dict], None]


def file_route(method: Route) -> Route:
    """Wraps a file route: the query parsed like Go's, error texts with undecodable bytes sent
    the way Go's JSON encoder sends them (U+FFFD)."""

    @functools.wraps(method)
    def route(h: Handler, q: dict) -> None:
        try:
            method(h, go_parse_query(urlsplit(h.path).query))
        except ApiError as e:
            e.message = go_text(e.message)
            raise

    return route


def file_error(err_text: str, not_found: bool) -> ApiError:
    """execd's handleFileError: a not-exist error is 404, anything else 500."""
    if not_found:
        return ApiError(404, "FILE_NOT_FOUND", f"file not found. {err_text}")
    return ApiError(500, "RUNTIME_ERROR", f"error accessing file: {err_text}")


def read_go_json(h: Handler, schema: object) -> object:
    """execd's bindJSON (json.Decoder) of the request body into `schema`."""
    return bind_json(h.read_body(), schema)


def query_path(query: dict[str, list[str]]) -> str:
    """The required `path` query parameter; execd's 400 without it."""
    p = q1(query, "path")
    if not p:
        raise ApiError(400, "MISSING_QUERY", "missing query parameter 'path'")
    return p


def query_abs(p: str) -> str:
    """pathutil.ExpandAbsPath of a listing's or search's `path`; execd's 500 when it fails. The
    message names the variable execd had just overwritten with "" (Go's `path, err := ...`)."""
    try:
        return go_expand_abs(p)
    except ValueError as e:
        raise ApiError(500, "RUNTIME_ERROR", f"error converting path  to absolute. {e}") from None


def query_int(raw: str, name: str, default: int, minimum: int) -> int:
    """An optional integer query parameter (strconv.Atoi, at least `minimum`); else execd's 400."""
    if not raw:
        return default
    try:
        value = go_parse_int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ApiError(400, "INVALID_REQUEST_BODY", f"invalid query parameter '{name}': {raw}")
    return value


def parse_mode(mode: int) -> int:
    """execd's mode: the decimal digits read as octal (strconv.ParseUint(Itoa(mode), 8, 32))."""
    text = str(mode)
    if not text.isdigit() or any(c in "89" for c in text):
        raise ValueError(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    value = int(text, 8)
    if value >= 1 << 32:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": value out of range')
    return value


def set_ownership(path: str, owner: str, group: str) -> None:
    """SetFileOwnership. v1.0.19: only when an owner or group is given, an unknown name is an
    error. v1.0.18: always chowns; unknown names are ignored and nothing known means root."""
    uid = gid = -1
    if config.LEGACY_FILE_API:
        if owner:
            with contextlib.suppress(KeyError):
                uid = pwd.getpwnam(owner).pw_uid
        if group:
            with contextlib.suppress(KeyError):
                gid = grp.getgrnam(group).gr_gid
        if uid == -1 and gid == -1:
            uid, gid = os.getuid(), os.getgid()
    else:
        if not owner and not group:
            return
        if owner:
            try:
                uid = pwd.getpwnam(owner).pw_uid
            except KeyError:
                raise ValueError(
                    f"failed to lookup user {owner}: user: unknown user {owner}"
                ) from None
        if group:
            try:
                gid = grp.getgrnam(group).gr_gid
            except KeyError:
                raise ValueError(
                    f"failed to lookup group {group}: group: unknown group {group}"
                ) from None
    try:
        os.chown(path, uid, gid)
    except OSError as e:
        raise ValueError(
            f"failed to set owner/group for {path}: {path_error('chown', path, e)}"
        ) from None


def chmod_file(path: str, perm: dict) -> None:
    """ChmodFile: only the 0777 bits of the mode (Go's os.Chmod drops 04000/02000/01000 given
    as plain numbers), then the ownership. Raises ValueError with Go's texts."""
    abs_path = go_expand_abs(path)
    mode = perm.get("mode") or 0
    if mode != 0:
        bits = parse_mode(mode) & 0o777
        try:
            os.chmod(abs_path, bits)
        except OSError as e:
            raise ValueError(path_error("chmod", abs_path, e)) from None
    set_ownership(abs_path, perm.get("owner") or "", perm.get("group") or "")


def file_type(st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return "symlink"
    if stat.S_ISDIR(st.st_mode):
        return "directory"
    if stat.S_ISREG(st.st_mode):
        return "file"
    return "other"


def file_info(path: str, st: os.stat_result, strict_owner: bool = False) -> dict:
    """model.FileInfo of `path` from `st` (v1.0.18: no `type`). An owner or group without a
    name is its number, or with strict_owner (v1.0.18's search) an error."""
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        if strict_owner:
            raise ValueError(
                f"error lookup owner for file {path}: user: unknown userid {st.st_uid}"
            ) from None
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        if strict_owner:
            raise ValueError(
                f"error lookup group for file {path}: group: unknown groupid {st.st_gid}"
            ) from None
        group = str(st.st_gid)
    info: dict = {}
    if path:
        info["path"] = path
    if not config.LEGACY_FILE_API:
        info["type"] = file_type(st)
    info["size"] = st.st_size
    info["modified_at"] = go_time(ns=st.st_mtime_ns)
    info["created_at"] = go_time(ns=st.st_ctime_ns)
    info["owner"] = owner
    info["group"] = group
    info["mode"] = int(oct(st.st_mode & 0o777)[2:])
    return info
