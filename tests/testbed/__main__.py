"""`python -m testbed start|stop|restart|status|run|busybox|prepare [--profile P] [--quiet]`
(PYTHONPATH=tests).

`--profile` (or env OSB_EXECD_PROFILE) chooses the execd generation that the testbed daemon
behaves like in every sandbox: 1.0.19 (default), 1.0.18 or 1.1. `start` with another profile than
the running one restarts the server. `restart` picks up changed image inputs (e.g. the daemon,
tests/testbed/execd/daemon): a running server keeps the execd files it copied when it served its
first sandbox. `run --profile P -- COMMAND...` runs a command against an extra server of its own
with the work tree's daemon in profile P, leaving the testbed's server alone. `busybox` prints
the path of Debian's static busybox (the busybox image's), fetched with apt-get when not cached.
`prepare` starts Docker and makes the images and caches without starting a server (CI overlaps
it with the checks that need none).
"""

from __future__ import annotations

import argparse
import sys

from testbed._proc import TestbedError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed", description=__doc__)
    parser.add_argument(
        "command", choices=["start", "stop", "restart", "status", "run", "busybox", "prepare"]
    )
    parser.add_argument(
        "--quiet", action="store_true", help="status: print only running/stopped (exit 0/3)"
    )
    parser.add_argument(
        "--profile", default=None, help="execd generation profile: 1.0.19 (default), 1.0.18, 1.1"
    )
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    rest = argv[split + 1 :]
    from testbed import _control

    if rest and args.command != "run":
        parser.error(f"unexpected arguments: {' '.join(rest)}")
    try:
        if args.command == "start":
            return _control.start(args.profile)
        if args.command == "stop":
            return _control.stop()
        if args.command == "restart":
            return _control.restart(args.profile)
        if args.command == "run":
            from testbed import _run

            return _run.run(rest, args.profile)
        if args.command == "busybox":
            from testbed._busybox import busybox_binary

            print(busybox_binary())
            return 0
        if args.command == "prepare":
            return _control.prepare()
        return _control.status(args.quiet)
    except TestbedError as exc:
        print(f"testbed {args.command} failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
