"""`python -m bench [--quick] [--only SECTION ...] [--out DIR]`: run the benchmark, write the report."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import secrets
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import _cases, _code, _output_cost, _terminal, _wire
from bench._machine import machine_info
from bench._report import markdown, targets

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = (
    "commands",
    "transfers",
    "memory",
    "create",
    "scale",
    "deepagents_tools",
    "generations",
    "output_cost",
    "terminal",
    "code_run",
    "wire",
)


def _section(name: str) -> Any:
    """The coroutine function that runs the section `name`."""
    for module in (_output_cost, _terminal, _code, _wire):
        if hasattr(module, name):
            return getattr(module, name)
    return getattr(_cases, name)


def _load_env() -> None:
    from testbed import ENV_FILE, read_env_file

    if not os.environ.get("OPEN_SANDBOX_DOMAIN"):
        if not ENV_FILE.exists():
            raise SystemExit(f"no testbed settings in {ENV_FILE}: run `nox -s testbed -- start`")
        for key, value in read_env_file(ENV_FILE).items():
            os.environ.setdefault(key, value)
    os.environ.setdefault("OPENSANDBOX_DISABLE_METRICS", "1")


BENCH_EXECD_TAG = "opensandbox-agents/testbed-execd:bench"


@contextlib.contextmanager
def _current_daemon() -> Iterator[None]:
    """An extra server (the shared one is left alone) whose sandboxes run the testbed daemon as
    it is in the work tree, built under a tag of the bench's own."""
    from testbed import _images
    from testbed._extra import extra_server
    from testbed._paths import HOST_VOLUMES

    daemon, bootstrap = _images._execd_sources()
    _images._layer(
        _images.SANDBOX_TAG,
        BENCH_EXECD_TAG,
        {"/execd": (daemon, 0o755), "/bootstrap.sh": (bootstrap.read_bytes(), 0o755)},
        ['CMD ["tail", "-f", "/dev/null"]'],
    )
    os.environ["OSB_TESTBED_EXECD_IMAGE"] = BENCH_EXECD_TAG
    key = secrets.token_urlsafe(24)
    with extra_server(api_key=key, allowed_host_paths=[str(HOST_VOLUMES)]) as server:
        os.environ["OPEN_SANDBOX_DOMAIN"] = server.domain
        os.environ["OPEN_SANDBOX_API_KEY"] = key
        os.environ["OSB_TESTBED_SERVER_PID"] = str(server.pid)
        yield


def _clean(value: Any) -> Any:
    """NaN is not JSON: write null instead."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    server_pid = os.environ.get("OSB_TESTBED_SERVER_PID")
    ctx = _cases.Context(
        image=os.environ.get("OSB_TESTBED_IMAGE", "opensandbox-agents/testbed-sandbox:bookworm"),
        quick=args.quick,
        server_pid=int(server_pid) if server_pid and server_pid.isdigit() else None,
    )
    results: dict[str, Any] = {"quick": args.quick, "machine": machine_info(ROOT)}
    started = time.perf_counter()
    try:
        await _cases.open_clients(ctx)
        for section in args.only or SECTIONS:
            if section == "deepagents_tools" and ctx.deepagents is None:
                continue
            print(f"[bench] {section} ...", file=sys.stderr, flush=True)
            section_started = time.perf_counter()
            results[section] = await _section(section)(ctx)
            print(
                f"[bench] {section} done in {time.perf_counter() - section_started:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        await _cases.close_clients(ctx)
    results["notes"] = ctx.notes
    results["duration_s"] = time.perf_counter() - started
    results["targets"] = targets(results)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (about 3 minutes)")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    parser.add_argument(
        "--current-daemon",
        action="store_true",
        help="run against an extra server whose sandboxes get the testbed daemon of the work tree "
        "(the shared testbed keeps the image it was started with); writes latest-current-daemon.*",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("opensandbox").setLevel(logging.CRITICAL)  # the SDK logs every retry
    _load_env()
    with _current_daemon() if args.current_daemon else contextlib.nullcontext():
        results = _clean(asyncio.run(_run(args)))
    results["server"] = "extra server, work-tree daemon" if args.current_daemon else "testbed"
    name = "latest-current-daemon" if args.current_daemon else "latest"
    args.out.mkdir(parents=True, exist_ok=True)
    text = markdown(results)
    (args.out / f"{name}.md").write_text(text)
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    print(text)
    print(f"[bench] wrote {args.out / name}.md and .json", file=sys.stderr)


if __name__ == "__main__":
    main()
