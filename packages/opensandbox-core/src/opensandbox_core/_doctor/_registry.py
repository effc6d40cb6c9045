"""The doctor's checks as a registry, and the runner that runs them one by one.

Each `Check` declares its name, whether it needs API access (an accepted key, or a server that
wants none), whether it may create a sandbox, and its function. The runner decides SKIPs from
those declarations alone (server unreachable, no usable key, `--skip-sandbox`); a check function
gets the `DoctorContext` and nothing else, so the checks give the same results in any order.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from opensandbox_core._errors import InsecureSandboxWarning

from ._context import CheckResult, DoctorContext, DoctorOptions, Outcome
from ._leftovers import check_leftovers
from ._mounts import check_docker_socket_mount, check_host_path_mount
from ._sandbox import check_execd_framing, check_latency, check_throughput
from ._server import (
    check_api_key,
    check_authentication,
    check_cors,
    check_proxy_routes,
    check_reachable,
)

__all__ = ["CHECKS", "Check", "Listener", "run_checks", "run_doctor"]

CheckFunction = Callable[[DoctorContext], Awaitable[Outcome]]


@dataclass(frozen=True)
class Check:
    """One independent check of the doctor."""

    name: str
    run: CheckFunction
    needs_key: bool = False
    """Needs the API: skipped when the key given is refused, or none is given and one is needed."""
    needs_sandbox: bool = False
    """May create a sandbox: skipped with `--skip-sandbox`."""
    needs_server: bool = True
    """Skipped when the server is not reachable (every check but `reachable`)."""


CHECKS: tuple[Check, ...] = (
    Check("reachable", check_reachable, needs_server=False),
    Check("api-key", check_api_key),
    Check("authentication", check_authentication),
    Check("cors", check_cors),
    Check("proxy-routes", check_proxy_routes),
    Check("leftovers", check_leftovers, needs_key=True),
    Check("docker-socket-mount", check_docker_socket_mount, needs_key=True, needs_sandbox=True),
    Check("host-path-mount", check_host_path_mount, needs_key=True, needs_sandbox=True),
    Check("execd-framing", check_execd_framing, needs_key=True, needs_sandbox=True),
    Check("latency", check_latency, needs_key=True, needs_sandbox=True),
    Check("throughput", check_throughput, needs_key=True, needs_sandbox=True),
)


class Listener:
    """Told about each check as it starts and as it ends (the CLI prints both)."""

    def started(self, name: str) -> None:
        """A check is starting."""

    def finished(self, result: CheckResult) -> None:
        """A check has its result."""


async def _skip_reason(check: Check, ctx: DoctorContext) -> str | None:
    if check.needs_server and not await ctx.reachable():
        return "the server is not reachable (see reachable)"
    if check.needs_sandbox and ctx.options.skip_sandbox:
        return "skipped (--skip-sandbox): this check may create a sandbox"
    if check.needs_key:
        return await ctx.api_access()
    return None


async def _run_one(check: Check, ctx: DoctorContext) -> CheckResult:
    loop = asyncio.get_running_loop()
    started = loop.time()
    reason = await _skip_reason(check, ctx)
    outcome = Outcome("SKIP", reason) if reason is not None else await check.run(ctx)
    return CheckResult(
        name=check.name,
        status=outcome.status,
        summary=ctx.hide_key(outcome.summary),
        fix=ctx.hide_key(outcome.fix) if outcome.fix else None,
        data=outcome.data,
        seconds=loop.time() - started,
    )


async def run_checks(
    options: DoctorOptions,
    checks: Sequence[Check] = CHECKS,
    listener: Listener | None = None,
) -> list[CheckResult]:
    """Run `checks` one after the other; everything the doctor creates is removed on every path."""
    listener = listener or Listener()
    ctx = DoctorContext(options)
    results: list[CheckResult] = []
    try:
        _ = ctx.client  # loading the CA bundle takes a while: not part of the first check's time
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureSandboxWarning)
            for check in checks:
                listener.started(check.name)
                result = await _run_one(check, ctx)
                results.append(result)
                listener.finished(result)
    finally:
        await ctx.aclose()
    return results


async def run_doctor(options: DoctorOptions, listener: Listener | None = None) -> list[CheckResult]:
    """Run every check and return the results in order."""
    return await run_checks(options, CHECKS, listener)
