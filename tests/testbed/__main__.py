"""`python -m testbed start|stop|restart|status [--quiet]` (run with PYTHONPATH=tests).

`restart` picks up changed image inputs (e.g. tests/testbed/execd/execd.py): a running server keeps
the execd files it copied when it served its first sandbox.
"""

from __future__ import annotations

import argparse
import sys

from testbed._proc import TestbedError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed", description=__doc__)
    parser.add_argument("command", choices=["start", "stop", "restart", "status"])
    parser.add_argument(
        "--quiet", action="store_true", help="status: print only running/stopped (exit 0/3)"
    )
    args = parser.parse_args(argv)
    from testbed import _control

    try:
        if args.command == "start":
            return _control.start()
        if args.command == "stop":
            return _control.stop()
        if args.command == "restart":
            return _control.restart()
        return _control.status(args.quiet)
    except TestbedError as exc:
        print(f"testbed {args.command} failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
