"""Every request the daemon answers, and the function that answers it: start reading here.

A route is called as `route(handler, query, *segments)`: the handler (handler.py) writes the
answer, `query` is the parsed query string (`{name: [values]}`; the file routes parse it again
the way gin does) and `segments` are the values of the pattern's `{name}` parts, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from . import (
    background,
    commands,
    config,
    download,
    files,
    interpreter,
    metrics,
    proxy,
    pty,
    search,
    sessions,
    upload,
)
from .goenc import ApiError

if TYPE_CHECKING:
    from .handler import Handler

Route = Callable[..., None]

# (method, path, route). Matching, as the daemon has always matched:
# 1. method "*" with a path ending in "/*": every method, any path under that prefix, first;
# 2. a path without `{`: that exact path;
# 3. a path with `{name}` parts: the request path without its outer slashes, split on "/",
#    has as many parts and the same fixed ones (a `{name}` part matches any text, even empty);
#    tried in the order below. (The single-file daemon matched /pty/... only under a literal
#    "/pty/" prefix; here "//pty/x" reaches it too, as "//command/status/x" always did.)
# Anything else is gin's 404 "404 page not found". Every route needs the access token first.
ROUTES: list[tuple[str, str, Route]] = [
    ("*", "/proxy/*", proxy.proxy),
    ("GET", "/ping", commands.ping),
    # commands.py: foreground runs and interrupts; background.py: background runs
    ("POST", "/command", commands.run_command),
    ("DELETE", "/command", commands.interrupt_command),
    ("GET", "/command/status/{id}", background.command_status),
    ("GET", "/command/{id}/logs", background.command_logs),
    # sessions.py
    ("POST", "/session", sessions.create_session),
    ("POST", "/session/{id}/run", sessions.run_session),
    ("DELETE", "/session/{id}", sessions.delete_session),
    # files.py, search.py, upload.py, download.py
    ("GET", "/files/info", files.files_info),
    ("DELETE", "/files", files.remove_files),
    ("POST", "/files/permissions", files.chmod_files),
    ("POST", "/files/mv", files.rename_files),
    ("GET", "/files/search", search.search_files),
    ("POST", "/files/replace", files.replace_content),
    ("POST", "/files/upload", upload.upload),
    ("GET", "/files/download", download.download),
    ("GET", "/directories/list", files.list_directory),
    ("POST", "/directories", files.make_dirs),
    ("DELETE", "/directories", files.remove_dirs),
    # metrics.py
    ("GET", "/metrics", metrics.get_metrics),
    ("GET", "/metrics/watch", metrics.watch_metrics),
    # pty.py (the interactive terminal; its WebSocket in websocket.py)
    ("POST", "/pty", pty.pty_create),
    ("GET", "/pty/{id}", pty.pty_status),
    ("DELETE", "/pty/{id}", pty.pty_delete),
    ("GET", "/pty/{id}/ws", pty.pty_ws),
    # interpreter.py (the code interpreter, through the Jupyter server: jupyter.py)
    ("POST", "/code", interpreter.run_code),
    ("DELETE", "/code", interpreter.interrupt_code),
    ("POST", "/code/context", interpreter.create_context),
    ("GET", "/code/contexts", interpreter.list_contexts),
    ("DELETE", "/code/contexts", interpreter.delete_contexts),
    ("GET", "/code/contexts/{id}", interpreter.get_context),
    ("DELETE", "/code/contexts/{id}", interpreter.delete_context),
]

_PREFIXES = [(p[:-1], r) for m, p, r in ROUTES if m == "*"]
_EXACT = {(m, p): r for m, p, r in ROUTES if m != "*" and "{" not in p}
_PATTERNS = [(m, p.strip("/").split("/"), r) for m, p, r in ROUTES if "{" in p]


def find_route(method: str, path: str) -> tuple[Route, list[str]] | None:
    """The route for a request and its `{name}` segments, or None (404)."""
    for prefix, route in _PREFIXES:
        if path.startswith(prefix):
            return route, []
    exact = _EXACT.get((method, path))
    if exact is not None:
        return exact, []
    parts = path.strip("/").split("/")
    for want_method, pattern, route in _PATTERNS:
        if want_method != method or len(pattern) != len(parts):
            continue
        segments = []
        for fixed, part in zip(pattern, parts, strict=True):
            if fixed.startswith("{"):
                segments.append(part)
            elif fixed != part:
                break
        else:
            return route, segments
    return None


def dispatch(h: Handler, method: str) -> None:
    """One request: the access token, then its route; an ApiError becomes execd's JSON error."""
    url = urlsplit(h.path)
    query: dict[str, Any] = parse_qs(url.query, keep_blank_values=True)
    try:
        if config.ACCESS_TOKEN:
            tok = h.headers.get(config.TOKEN_HEADER) or ""
            if tok != config.ACCESS_TOKEN:
                h.send_json(
                    401,
                    {"error": "Unauthorized: invalid or missing header " + config.TOKEN_HEADER},
                )
                return
        found = find_route(method, url.path)
        if found is None:
            h.send_text(404, "404 page not found", ctype="text/plain")
            return
        route, segments = found
        route(h, query, *segments)
    except ApiError as e:
        h.error_json(e)
    except (BrokenPipeError, ConnectionResetError):
        h.close_connection = True
