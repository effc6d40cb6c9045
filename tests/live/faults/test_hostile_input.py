"""Hostile paths and command arguments, live, through the core and both adapters.

Every nasty input either works exactly (bytes read back are the bytes written) or fails with the
documented error type, within a bound; none runs a shell injection (the marker file that a
successful injection would create never appears)."""

from __future__ import annotations

import asyncio
import math
import posixpath
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    ConfigurationError,
    OpenSandboxError,
    SandboxSpec,
)

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


def _core_errors() -> tuple[type[BaseException], ...]:
    return (ConfigurationError, OSError, OpenSandboxError)


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
    result = await session.run(["sh", "-c", f"ls -a {BASE} /workspace; test ! -e {MARKER}"])
    assert result.exit_code == 0, f"an injection ran: {MARKER} exists"
    assert (await session.run(["test", "!", "-e", "PWNED"])).exit_code == 0


@pytest.fixture
async def session(sandbox_image: str) -> Any:
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image)) as sb:
        assert (await sb.run(SETUP)).stdout == "ready\n"
        yield sb


async def test_core_file_methods_on_nasty_paths(session: AsyncSandboxSession) -> None:
    allowed = _core_errors()
    outcomes: dict[str, str] = {}
    for index, path in enumerate(PATHS):
        data = bytes([index % 256]) * 7 + path.encode("utf-8", "surrogatepass")
        wrote = await _attempt(lambda p=path, d=data: session.write_bytes(p, d), allowed)
        if wrote is None:
            assert await session.read_bytes(path) == data, path
            info = await session.stat(path)
            assert info.is_file and info.size == len(data)
            parent = posixpath.dirname(path) or "."
            names = [e.name for e in await session.list_dir(parent)]
            assert path.rsplit("/", 1)[-1] in names, path
            await session.remove(path)
            assert not await session.exists(path)
            outcomes[repr(path)[:60]] = "ok"
        else:
            if isinstance(wrote, ConfigurationError):  # only what the docs list
                assert not path or "\0" in path or "\udcff" in path, path
            for call in (session.read_bytes, session.stat, session.remove, session.list_dir):
                await _attempt(lambda c=call, p=path: c(p), allowed)
            outcomes[repr(path)[:60]] = type(wrote).__name__
    for path in SPECIALS:
        for call in (session.read_bytes, session.stat, session.list_dir, session.exists):
            await _attempt(lambda c=call, p=path: c(p), allowed)
        written = await _attempt(lambda p=path: session.write_bytes(p, b"x"), allowed)
        if path != f"{BASE}/sub":
            assert isinstance(written, OSError | OpenSandboxError), (path, written)
    for path in (f"{BASE}/loop", f"{BASE}/fifo", "/dev/zero"):
        assert isinstance(await _attempt(lambda p=path: session.read_bytes(p), allowed), OSError)
    # The working directory and the root are never removed.
    for path in ("/", "/workspace", ".", "/workspace/.."):
        assert isinstance(
            await _attempt(lambda p=path: session.remove(p), allowed), ConfigurationError
        )
    await _no_injection(session)
    print(outcomes)


async def test_pydantic_ai_file_methods_on_nasty_paths(sandbox_image: str) -> None:
    from pydantic_ai_opensandbox import OpenSandboxBackend

    backend = OpenSandboxBackend(image=sandbox_image)
    allowed: tuple[type[BaseException], ...] = (OSError, ValueError, TypeError)
    try:
        await backend.run(SETUP, shell=True)  # noqa: S604
        for index, path in enumerate([*PATHS, *SPECIALS]):
            data = bytes([index % 256]) * 5
            wrote = await _attempt(lambda p=path, d=data: backend.write_bytes(p, d), allowed)
            if wrote is None:
                assert await backend.read_bytes(path) == data, path
                assert (await backend.stat(path)).size == len(data)
                await backend.remove(path)
                assert not await backend.exists(path)
            else:
                for call in (backend.read_bytes, backend.stat, backend.list_dir, backend.remove):
                    await _attempt(lambda c=call, p=path: c(p), allowed)
        await _no_injection(backend.session)
    finally:
        await backend.aclose()
        await backend.session.destroy()


async def test_deepagents_file_methods_on_nasty_paths(sandbox_image: str) -> None:
    from deepagents.backends.protocol import (
        FILE_NOT_FOUND,
        INVALID_PATH,
        IS_DIRECTORY,
        PERMISSION_DENIED,
    )

    from deepagents_opensandbox_backend import OpenSandboxBackend

    documented = {None, FILE_NOT_FOUND, INVALID_PATH, IS_DIRECTORY, PERMISSION_DENIED}
    backend = await OpenSandboxBackend.acreate(image=sandbox_image)
    try:
        await backend.aexecute(SETUP)
        paths = [*PATHS, *SPECIALS]
        files = [(p, bytes([i % 256]) * 5) for i, p in enumerate(paths)]
        async with asyncio.timeout(120):
            uploaded = await backend.aupload_files(files)
            downloaded = await backend.adownload_files(paths)
        assert [u.path for u in uploaded] == paths
        assert [d.path for d in downloaded] == paths
        for (path, data), up, down in zip(files, uploaded, downloaded, strict=True):
            assert up.error in documented, (path, up.error)
            assert down.error in documented, (path, down.error)
            if up.error is None and path not in SPECIALS:
                assert down.content == data, path
            if not path.startswith("/") or "\0" in path:
                assert up.error == INVALID_PATH and down.error == INVALID_PATH
        for path in (f"{BASE}/fifo", "/dev/zero", f"{BASE}/loop"):
            assert (await backend.adownload_files([path]))[0].error is not None
        await _no_injection(backend.session)
    finally:
        await backend.akill()


async def test_core_newline_in_file_name(sandbox_image: str) -> None:
    from opensandbox_core import Connection

    connection = Connection(request_timeout=5)
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image), connection=connection) as sb:
        for name in ("a\nb", f"\n touch {MARKER}"):
            await sb.run(["mkdir", "-p", BASE])
            await sb.write_bytes(f"{BASE}/{name}", b"data")
            await _no_injection(sb)
            assert await sb.read_bytes(f"{BASE}/{name}") == b"data"


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


async def test_core_refuses_bad_command_arguments(session: AsyncSandboxSession) -> None:
    for command in ([], "", "   ", ["ls", "a\0b"], "echo \0", HUGE_ARGV, b"ls", 42):
        with pytest.raises(ConfigurationError):
            await session.run(command)  # type: ignore[arg-type]
    for timeout in BAD_TIMEOUTS:
        with pytest.raises(ConfigurationError):
            await session.run("true", timeout=timeout)
    for env in BAD_ENVS:
        with pytest.raises(ConfigurationError):
            await session.run("true", env=env)
    # A huge shell string is not refused up front; it runs or fails as a result, never hangs.
    async with asyncio.timeout(60):
        try:
            result = await session.run("echo " + "z" * 1_200_000, timeout=30)
        except OpenSandboxError:
            pass
        else:
            assert result.exit_code != 0 or len(result.stdout) == 1_200_001
    # Values that are fine: `=` and newlines in values, quotes, non-ASCII.
    env = {"A": "x=y", "B": "l1\nl2", "C": 'it\'s "q" $(touch /tmp/hostile/PWNED)', "D": "é"}
    result = await session.run(["sh", "-c", 'printf "%s|" "$A" "$B" "$C" "$D"'], env=env)
    assert result.stdout == "|".join(env.values()) + "|"
    await _no_injection(session)


async def test_pydantic_ai_refuses_bad_command_arguments(sandbox_image: str) -> None:
    from pydantic_ai_opensandbox import OpenSandboxBackend

    backend = OpenSandboxBackend(image=sandbox_image)
    try:
        for command, shell in (
            ([], False),
            ("", True),
            ("ls", False),
            (["ls"], True),
            (["a\0"], False),
            (HUGE_ARGV, False),
            (b"ls", False),
        ):
            with pytest.raises((TypeError, ValueError)):
                await backend.run(command, shell=shell)  # type: ignore[arg-type]
        for timeout in BAD_TIMEOUTS:
            with pytest.raises((TypeError, ValueError)):
                await backend.run(["true"], timeout=timeout)
        for env in BAD_ENVS:
            with pytest.raises((TypeError, ValueError)):
                await backend.run(["true"], env=env)
        assert (await backend.run(["printf", "%s", "$(x)"])).stdout == "$(x)"
    finally:
        await backend.aclose()
        await backend.session.destroy()


async def test_deepagents_refuses_bad_command_arguments(sandbox_image: str) -> None:
    from deepagents_opensandbox_backend import OpenSandboxBackend

    backend = await OpenSandboxBackend.acreate(image=sandbox_image)
    try:
        for command in ("", "  ", "echo \0"):
            with pytest.raises(ValueError):
                await backend.aexecute(command)
        for timeout in [t for t in BAD_TIMEOUTS if t != 0]:
            with pytest.raises(ValueError):
                await backend.aexecute("true", timeout=timeout)
        assert (await backend.aexecute("true", timeout=0)).exit_code == 0  # 0: no limit
        for env in BAD_ENVS:
            with pytest.raises((ValueError, TypeError)):
                OpenSandboxBackend.create(env=env)
    finally:
        await backend.akill()
