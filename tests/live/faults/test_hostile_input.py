"""Hostile paths and command arguments, live, through the core and both adapters.

Every nasty input either works exactly (bytes read back are the bytes written) or fails with the
documented error type, within a bound; none runs a shell injection (the marker file that a
successful injection would create never appears). Each scenario is one body run for every
package through its driver (`tests/live/_drivers.py`: `hostile_ops` holds what differs between
the packages: how a call refuses, which calls exist)."""

from __future__ import annotations

import asyncio
import math
import posixpath
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from _drivers import PACKAGES, PRINT_ENV, HostileOps, hostile_ops, open_driver

from opensandbox_core import AsyncSandboxSession, OpenSandboxError

BASE = "/tmp/hostile"
MARKER = f"{BASE}/PWNED"
INJECTIONS = [
    f"$(touch {MARKER})",
    f"`touch {MARKER}`",
    f"; touch {MARKER}",
    f"' ; touch {MARKER} ; '",
    f'" ; touch {MARKER} ; "',
    f"| touch {MARKER}",
    f"&& touch {MARKER}",
]
NAMES = [
    *INJECTIONS,
    "plain.txt",
    "tab\there",
    "q'uote\"s",
    "-rf",
    "--",
    "*",
    "~",
    "$HOME",
    "price$5.txt",  # execd removes `$5`, `$$`, `${}`, `$@`... and expands `$NAME`, `~`
    "pid$$",
    "brace${}",
    "x$UNDEFINED_NAME",
    "${HOME}",
    "~root",
    "ends$",
    "spaces in name",
    "ünïcødé-€-😀",
    "back\\slash",
    "x" * 255,  # the longest name
    "x" * 256,  # one too long
    "\x01\x7f",
    "\udcff",  # not UTF-8 (a lone surrogate)
    "a\0b",  # NUL
]
PATHS = [
    *(f"{BASE}/{n.replace('/', '_')}" for n in NAMES),
    "relative.txt",
    "../hostile-up.txt",
    f"{BASE}/../hostile/dotdot.txt",
    f"{BASE}/{'d' * 200}/" * 1 + "/".join(["e" * 200] * 25) + "/deep.txt",  # > PATH_MAX
    f"{BASE}//double//slash.txt",
    f"{BASE}/trailing/",
    "",
]
SPECIALS = [f"{BASE}/loop", f"{BASE}/fifo", "/dev/zero", "/proc/self/mem", f"{BASE}/sub"]
SETUP = f"mkdir -p {BASE}/sub && cd {BASE} && ln -sfn loop loop && mkfifo fifo && echo ready"


async def _attempt(
    call: Callable[[], Awaitable[Any]], allowed: tuple[type[BaseException], ...]
) -> Any:
    """The call's value, or the allowed exception it raised; a hang (60 s) or any other
    exception fails the test. A library timeout (CommandTimeoutError, an allowed
    OpenSandboxError) is an answer, not a hang: only the guard's own expiry counts as one."""
    guard = asyncio.timeout(60)
    try:
        async with guard:
            return await call()
    except Exception as exc:
        if guard.expired():
            raise AssertionError(f"hung: {call}") from exc
        if isinstance(exc, allowed):
            return exc
        raise


async def _no_injection(session: AsyncSandboxSession) -> None:
    result = await session.commands.run(
        ["sh", "-c", f"ls -a {BASE} /workspace; test ! -e {MARKER}"]
    )
    assert result.exit_code == 0, f"an injection ran: {MARKER} exists"
    assert (await session.commands.run(["test", "!", "-e", "PWNED"])).exit_code == 0


async def _round_trip(ops: HostileOps, index: int, path: str, outcomes: dict[str, str]) -> None:
    """Write, read back, stat, list, remove one path; or check its refusal and that every other
    call on it answers (value or allowed error) without hanging."""
    data = bytes([index % 256]) * 7 + path.encode("utf-8", "surrogatepass")
    wrote = await _attempt(lambda: ops.write(path, data), ops.errors)
    if wrote is None:
        assert await ops.read(path) == data, path
        if ops.size is not None:
            assert await ops.size(path) == len(data), path
        if ops.names is not None:
            parent = posixpath.dirname(path) or "."
            assert path.rsplit("/", 1)[-1] in await ops.names(parent), path
        if ops.remove is not None and ops.exists is not None:
            await ops.remove(path)
            assert not await ops.exists(path), path
        outcomes[repr(path)[:60]] = "ok"
        return
    assert isinstance(wrote, BaseException) and ops.refusal_ok(path, wrote), (path, wrote)
    calls = [ops.read, ops.size, ops.names, ops.remove, ops.exists]
    for call in [c for c in calls if c is not None]:
        await _attempt(lambda c=call: c(path), ops.errors)
    outcomes[repr(path)[:60]] = type(wrote).__name__


@pytest.mark.long
@pytest.mark.parametrize("package", PACKAGES)
async def test_file_methods_on_nasty_paths(package: str, sandbox_image: str) -> None:
    async with open_driver(package, sandbox_image) as driver:
        assert (await driver.run(SETUP, 60)) == (0, "ready\n")
        ops = hostile_ops(driver, HUGE_ARGV)
        outcomes: dict[str, str] = {}
        for index, path in enumerate(PATHS):
            await _round_trip(ops, index, path, outcomes)
        for path in SPECIALS:
            calls = [ops.read, ops.size, ops.names, ops.exists]
            for call in [c for c in calls if c is not None]:
                await _attempt(lambda c=call, p=path: c(p), ops.errors)
            written = await _attempt(lambda p=path: ops.write(p, b"x"), ops.errors)
            if path != f"{BASE}/sub":
                assert isinstance(written, ops.errors), (path, written)
        for path in (f"{BASE}/loop", f"{BASE}/fifo", "/dev/zero"):
            assert isinstance(await _attempt(lambda p=path: ops.read(p), ops.errors), ops.errors)
        if ops.batch is not None:  # a batch answers per path, in order, within a bound
            files = [(p, bytes([i % 256]) * 5) for i, p in enumerate([*PATHS, *SPECIALS])]
            async with asyncio.timeout(120):
                errors = await ops.batch(files)
            assert len(errors) == len(files)
        if ops.protects_roots and ops.remove is not None:
            # The working directory and the root are never removed.
            remove = ops.remove
            for path in ("/", "/workspace", ".", "/workspace/.."):
                refused = await _attempt(lambda p=path: remove(p), ops.errors)
                assert isinstance(refused, ValueError), (path, refused)
        await _no_injection(driver.session)
        print(package, outcomes)


@pytest.mark.parametrize("package", PACKAGES)
async def test_newline_in_file_name(package: str, sandbox_image: str) -> None:
    async with open_driver(package, sandbox_image) as driver:
        ops = hostile_ops(driver, HUGE_ARGV)
        assert (await driver.run(f"mkdir -p {BASE}", 30))[0] == 0
        for name in ("a\nb", f"\n touch {MARKER}"):
            async with asyncio.timeout(60):
                await ops.write(f"{BASE}/{name}", b"data")
                await _no_injection(driver.session)
                assert await ops.read(f"{BASE}/{name}") == b"data"
            if ops.names is not None and "/" not in name:
                assert name in await ops.names(BASE), name


# -- commands ------------------------------------------------------------------------------------

BAD_TIMEOUTS: list[Any] = [-1, 0, -0.5, math.nan, math.inf, -math.inf, 10**12, "5", True]
BAD_ENVS: list[Any] = [
    {1: "x"},
    {"A": 1},
    {"A": None},
    {"A=B": "x"},
    {"": "x"},
    {"A\0": "x"},
    {"A": "x\0y"},
    {b"A": "x"},
    ["A", "x"],
]
HUGE_ARGV = ["echo", *(["y" * 100_000] * 12)]  # 1.2 MB


@pytest.mark.parametrize("package", PACKAGES)
async def test_bad_command_arguments_are_refused(package: str, sandbox_image: str) -> None:
    env = {"A": "x=y", "B": "l1\nl2", "C": 'it\'s "q" $(touch /tmp/hostile/PWNED)', "D": "é"}
    expected = "|".join(env.values()) + "|"
    async with open_driver(package, sandbox_image, env=env) as driver:
        ops = hostile_ops(driver, HUGE_ARGV)
        for command in ops.bad_commands:
            with pytest.raises(ops.argument_errors):
                await ops.run_command(command)
        for timeout in BAD_TIMEOUTS:
            if timeout in ops.no_limit_timeouts and type(timeout) is int:
                assert await ops.run_timeout(timeout) == 0, timeout  # no limit, not refused
                continue
            with pytest.raises(ops.argument_errors):
                await ops.run_timeout(timeout)
        for bad_env in BAD_ENVS:
            with pytest.raises(ops.argument_errors):
                await ops.run_env(bad_env)
        # A huge shell string is not refused up front; it runs or fails as a result, never hangs.
        async with asyncio.timeout(60):
            try:
                code, out = await driver.run("echo " + "z" * 1_200_000, 30)
            except (OpenSandboxError, ValueError, OSError):
                pass
            else:
                assert code != 0 or len(out) == 1_200_001
        # Values that are fine: `=` and newlines in values, quotes, non-ASCII; given at create
        # (every package) and per call (where the package takes env per call).
        assert await driver.run(PRINT_ENV, 30) == (0, expected)
        if ops.env_per_call:
            assert await ops.run_env(env) == expected
        if ops.run_argv is not None:  # argv items are literal
            assert await ops.run_argv(["printf", "%s", "$(x)"]) == "$(x)"
        await _no_injection(driver.session)
