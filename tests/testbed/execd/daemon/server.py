"""The daemon's process: command line, profile check, and the threading HTTP server."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socketserver
import sys
from http.server import ThreadingHTTPServer

from . import config, routes  # noqa: F401 - every route module is loaded before listening
from .goenc import go_duration
from .handler import Handler

socketserver.TCPServer.allow_reuse_address = True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="execd-compatible daemon (stdlib only)")
    ap.add_argument("--host", default=os.environ.get("EXECD_HOST", "0.0.0.0"))
    ap.add_argument(
        "--port", type=int, default=int(os.environ.get("EXECD_PORT") or config.DEFAULT_PORT)
    )
    ap.add_argument("--access-token", default=config.ACCESS_TOKEN)
    ap.add_argument("--graceful-shutdown-timeout", default=None)
    ap.add_argument("--log-level", default=None)
    ap.add_argument("--jupyter-host", default=None)
    ap.add_argument("--jupyter-token", default=None)
    args, _unknown = ap.parse_known_args(argv)
    config.ACCESS_TOKEN = args.access_token or ""
    if args.jupyter_host is not None:
        config.JUPYTER_HOST = args.jupyter_host
    if args.jupyter_token is not None:
        config.JUPYTER_TOKEN = args.jupyter_token
    if args.graceful_shutdown_timeout is not None:
        config.GRACE = go_duration(args.graceful_shutdown_timeout)
    if config.PROFILE not in config.PROFILES:
        sys.stderr.write(
            f"execd: unknown OSB_EXECD_PROFILE {config.PROFILE!r}; "
            f"set it to one of {', '.join(config.PROFILES)} (or leave it unset for 1.0.19).\n"
        )
        return 2
    problem = config.pty_config_problem() or config.code_config_problem()
    if problem:
        sys.stderr.write(f"execd: {problem}.\n")
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # hand the GIL over sooner (default 5 ms): a background command is registered within a few
    # ms of its init event, as upstream's is, also while other requests keep threads busy
    sys.setswitchinterval(0.001)
    srv = Server((args.host, args.port), Handler)
    sys.stderr.write(
        f"execd (testbed stand-in) listening on {args.host}:{srv.server_address[1]} "
        f"profile={config.PROFILE}\n"
    )
    sys.stderr.flush()
    with contextlib.suppress(KeyboardInterrupt, SystemExit):
        srv.serve_forever(poll_interval=0.5)
    return 0
