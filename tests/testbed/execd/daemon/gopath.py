"""Paths as execd resolves them (its pathutil, Go's os.Expand, path/filepath and os.MkdirAll /
os.RemoveAll): one implementation for a command's `cwd`, the file routes and the daemon's own
EXECD_ENVS file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Callable

from .goenc import go_errno, path_error

_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _go_env_ref_names(path: str) -> list[str]:
    """Names of `$NAME` / `${NAME}` references (identifiers only), as execd validates them: an
    unclosed `${NAME` is no reference (os.Expand then eats the `${`)."""
    return [m.group(1) or m.group(2) for m in _ENV_REFERENCE.finditer(path)]


SHELL_SPECIAL = set("*#$@!?-0123456789")


def go_os_expand(text: str, getenv: Callable[[str], str]) -> str:
    """Go's os.Expand: ``$NAME``/``${NAME}`` and the shell's special names; bad ``${`` eaten."""
    out: list[str] = []
    i = j = 0
    while j < len(text):
        if text[j] == "$" and j + 1 < len(text):
            out.append(text[i:j])
            rest = text[j + 1 :]
            name, width = "", 0
            if rest[0] == "{":
                if len(rest) > 2 and rest[1] in SHELL_SPECIAL and rest[2] == "}":
                    name, width = rest[1], 3
                else:
                    close = rest.find("}", 1)
                    if close == 1:
                        width = 2  # "${}": bad syntax, eaten
                    elif close > 1:
                        name, width = rest[1:close], close + 1
                    else:
                        width = 1  # "${" without "}": eaten
            elif rest[0] in SHELL_SPECIAL:
                name, width = rest[0], 1
            else:
                while width < len(rest) and (
                    rest[width].isascii() and (rest[width].isalnum() or rest[width] == "_")
                ):
                    width += 1
                name = rest[:width]
            if name:
                out.append(getenv(name))
            elif width == 0:
                out.append("$")  # "$" not followed by a name stays
            j += width
            i = j + 1
        j += 1
    out.append(text[i:])
    return "".join(out)


def go_clean(path: str) -> str:
    """Go's filepath.Clean (lexical: no symlinks resolved)."""
    if not path:
        return "."
    rooted = path.startswith("/")
    parts: list[str] = []
    for seg in path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not rooted:
                parts.append("..")
            continue
        parts.append(seg)
    joined = "/".join(parts)
    if rooted:
        return "/" + joined
    return joined or "."


def go_dir(path: str) -> str:
    """Go's filepath.Dir: everything before the last slash, cleaned."""
    return go_clean(path[: path.rfind("/") + 1])


def go_base(path: str) -> str:
    """Go's filepath.Base: the last element, trailing slashes ignored."""
    if not path:
        return "."
    path = path.rstrip("/")
    if not path:
        return "/"
    return path[path.rfind("/") + 1 :] or "/"


def go_expand_path(path: str, env: dict[str, str] | None = None) -> str:
    """execd's pathutil.ExpandPathWithEnv: `$NAME`/`${NAME}` must be defined, then os.Expand
    (positional/special names and `${}` vanish, a `$` before anything else stays) and a leading
    `~` becomes HOME. Raises ValueError with execd's text."""
    if not path:
        return ""
    merged = dict(os.environ)
    merged.update(env or {})
    missing = sorted({name for name in _go_env_ref_names(path) if name not in merged})
    if missing:
        raise ValueError("path references undefined environment variables: " + ",".join(missing))
    expanded = go_os_expand(path, lambda name: merged.get(name, ""))
    if expanded == "~" or expanded.startswith(("~/", "~\\")):
        home = os.environ.get("HOME", "")
        if not home:
            raise ValueError("$HOME is not defined")
        return home if expanded == "~" else go_clean(home + "/" + expanded[2:])
    return expanded


def go_abs(path: str) -> str:
    """Go's filepath.Abs: joined to the daemon's working directory and cleaned."""
    if path.startswith("/"):
        return go_clean(path)
    return go_clean(os.getcwd() + "/" + path)


def go_expand_abs(path: str) -> str:
    """execd's pathutil.ExpandAbsPath."""
    return go_abs(go_expand_path(path))


def load_extra_env() -> dict[str, str]:
    path = os.environ.get("EXECD_ENVS", "")
    if not path:
        return {}
    try:
        with open(go_expand_path(path), encoding="utf-8", errors="replace") as fh:
            data = fh.read()
    except (OSError, ValueError):
        return {}
    out: dict[str, str] = {}
    for line in data.split("\n"):
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def mkdir_all(path: str, mode: int) -> None:
    """Go's os.MkdirAll: OSError(errno, text, path) as Go's *PathError("mkdir", path)."""
    try:
        st = os.stat(path)
    except OSError:
        pass
    else:
        if stat.S_ISDIR(st.st_mode):
            return
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
    i = len(path) - 1
    while i >= 0 and path[i] == "/":
        i -= 1
    while i >= 0 and path[i] != "/":
        i -= 1
    parent = path[: max(i, 0)]
    if parent:
        mkdir_all(parent, mode)
    try:
        os.mkdir(path, mode)
    except OSError as e:
        with contextlib.suppress(OSError):
            if stat.S_ISDIR(os.lstat(path).st_mode):
                return
        raise OSError(e.errno, e.strerror, path) from None


def remove_all(path: str) -> str:
    """Go's os.RemoveAll; "" on success, else Go's error text (paths as Go names them)."""
    if not path:
        return ""
    if path == "." or path.endswith("/."):
        return f"RemoveAll {path}: invalid argument"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ""
    except NotADirectoryError as e:
        # A file in the middle: Go opens that as the parent and unlinkat fails in it.
        if not os.path.lexists(go_dir(path)):
            return ""
        return f"unlinkat {go_base(path)}: {go_errno(e)}"
    except OSError as e:
        return path_error("lstat", path, e)

    def remove_tree(p: str, name: str, pst: os.stat_result) -> str:
        if not stat.S_ISDIR(pst.st_mode):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
            except OSError as e:
                return f"unlinkat {name}: {go_errno(e)}"
            return ""
        try:
            names = os.listdir(p)
        except OSError as e:
            return path_error("open", p, e)
        for child in names:
            full = p.rstrip("/") + "/" + child
            try:
                cst = os.lstat(full)
            except FileNotFoundError:
                continue
            err = remove_tree(full, child, cst)
            if err:
                return err
        try:
            os.rmdir(p)
        except FileNotFoundError:
            pass
        except OSError as e:
            return f"unlinkat {name}: {go_errno(e)}"
        return ""

    return remove_tree(path, go_base(path), st)
