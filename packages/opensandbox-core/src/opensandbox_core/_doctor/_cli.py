"""`opensandbox-doctor`: the command line (arguments, `--version`, exit status)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Final

from opensandbox_core._config import Connection
from opensandbox_core._defaults import ENV_API_KEY, ENV_DOMAIN
from opensandbox_core._entry_points import installed_adapters
from opensandbox_core._errors import OpenSandboxError
from opensandbox_core._metadata import OWNER_KEY

from ._context import DEFAULT_IMAGE, DEFAULT_STALE_AFTER, DoctorOptions, parse_duration
from ._registry import run_doctor
from ._report import ProgressPrinter, json_document

__all__ = ["distributions", "main", "versions"]

CORE: Final = "opensandbox-core"
SDK: Final = "opensandbox"

IDLE_RULE: Final = (
    "Sandboxes are judged by idle time and owner, never by age alone, from what the server "
    "reports: a dead one (Failed, Terminated, ...) is idle since it was created; an expired one "
    "that the server has not reaped yet is idle since it expired; an expiring one (expiresAt in "
    "the future) is always kept, since it is renewed while used and the server deletes it by "
    "itself once idle for its lifetime; one without expiry is kept until deleted, unless "
    "--include-no-expiry counts it idle since its creation. Only sandboxes these packages "
    "created are considered; --owner and --match narrow them further."
)


def distributions() -> list[str]:
    """The core, the distributions of the installed adapters (their `opensandbox.adapters`
    entry points, by adapter name) and the SDK."""
    adapters = [a.distribution for a in installed_adapters() if a.distribution is not None]
    return [CORE, *dict.fromkeys(adapters), SDK]


def versions() -> list[tuple[str, str]]:
    """(distribution, version) for the core, the installed adapters, the SDK and Python."""
    found = []
    for name in distributions():
        try:
            found.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            found.append((name, "not installed"))
    found.append(("python", f"{platform.python_version()} ({sys.executable})"))
    return found


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opensandbox-doctor",
        description="Check an OpenSandbox server: reachability, authentication, CORS, host "
        "mounts, execd version, speed, and sandboxes left behind. Each check is printed as it "
        "runs. Exits 1 if a check fails, 0 otherwise (warnings included), 2 on bad usage.",
        epilog=IDLE_RULE,
    )
    parser.add_argument("--version", action="store_true", help="print the versions and exit")
    parser.add_argument("--domain", help=f"host:port or https://host:port (default: ${ENV_DOMAIN})")
    parser.add_argument("--api-key", help=f"the server's API key (default: ${ENV_API_KEY})")
    parser.add_argument(
        "--image",
        default=DEFAULT_IMAGE,
        help=f"image for test sandboxes (default: {DEFAULT_IMAGE})",
    )
    parser.add_argument(
        "--skip-sandbox", action="store_true", help="skip every check that may create a sandbox"
    )
    parser.add_argument(
        "--remove-idle-for",
        dest="remove_idle_for",
        type=parse_duration,
        metavar="AGE",
        help="remove sandboxes of these packages idle for at least AGE (e.g. 2h, 1d) by the "
        "rule below",
    )
    parser.add_argument(
        "--stale-after",
        type=parse_duration,
        default=DEFAULT_STALE_AFTER,
        metavar="AGE",
        help="report sandboxes of these packages idle for at least AGE (default: 1h)",
    )
    parser.add_argument(
        "--owner",
        metavar="TOKEN",
        help=f"only sandboxes whose {OWNER_KEY} tag is TOKEN (a session's owner_token)",
    )
    parser.add_argument(
        "--include-no-expiry",
        action="store_true",
        help="count sandboxes without expiry as idle since their creation",
    )
    parser.add_argument(
        "--match",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only consider sandboxes with this metadata (repeatable) for leftovers",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="HTTP timeout in seconds")
    parser.add_argument(
        "--json", action="store_true", help="print a JSON document (progress goes to stderr)"
    )
    return parser


def _options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> DoctorOptions:
    match: dict[str, str] = {}
    for item in args.match:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--match needs KEY=VALUE, got {item!r}")
        match[key] = value
    if args.timeout <= 0:
        parser.error("--timeout must be a positive number of seconds")
    return DoctorOptions(
        domain=args.domain,
        api_key=args.api_key,
        image=args.image,
        skip_sandbox=args.skip_sandbox,
        remove_idle_for=args.remove_idle_for,
        stale_after=args.stale_after,
        match=match,
        owner=args.owner,
        include_no_expiry=args.include_no_expiry,
        request_timeout=args.timeout,
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        # run_checks removed what this run created before the interrupt reached here
        print("opensandbox-doctor: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `opensandbox-doctor | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.version:
        for name, version in versions():
            print(f"{name} {version}")
        return 0
    options = _options(parser, args)
    try:
        connection = Connection(domain=options.domain)
        address = connection.display_address()
    except (OpenSandboxError, ValueError) as exc:
        parser.error(str(exc))
    # The SDK logs every failed call on its own; the doctor reports each failure once.
    logging.getLogger("opensandbox").addHandler(logging.NullHandler())
    printer = ProgressPrinter(sys.stderr if args.json else sys.stdout, address)
    results = asyncio.run(run_doctor(options, printer))
    printer.close(results)
    document = json_document(address, results)
    if args.json:
        print(json.dumps(document, indent=2, default=str))
    return 0 if document["ok"] else 1
