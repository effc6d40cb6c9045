"""Small per-package drivers, so that one scenario body runs for the core and each adapter.

A driver creates a sandbox through its package (the core's `AsyncSandboxSession`, the Pydantic
AI backend, the Deep Agents backend) and exposes the few operations the shared fault, hostile
and secrets scenarios need, each going through that package's own public API. `unavailable` is
the error the package raises once the sandbox or its daemon is gone, `died` what a command that
was running when the daemon died raises.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from opensandbox_core import (
    AsyncSandboxSession,
    SandboxSpec,
    SandboxUnavailableError,
    ServerError,
)

PACKAGES = ["core", "pydantic_ai", "deepagents"]
MISSING = "no-such-sandbox"


@dataclass
class Driver:
    """One package's view of one sandbox (see the module docstring)."""

    package: str
    session: AsyncSandboxSession  # the core session behind the package's object
    sandbox_id: str
    backend: Any  # the package's own object (the session itself for the core)
    run: Callable[[str, float], Awaitable[tuple[int, str]]]
    write: Callable[[str, bytes], Awaitable[Any]]
    read: Callable[[str], Awaitable[bytes]]
    attach_and_run: Callable[[], Awaitable[Any]]  # a new client on the same sandbox id
    attach_missing: Callable[[], Awaitable[Any]]  # a new client on a sandbox that never existed
    unavailable: type[BaseException]  # what every call raises once the sandbox is gone
    died: tuple[type[BaseException], ...]  # what a command raises when its daemon dies under it
    extra: dict[str, Callable[[], Awaitable[Any]]] = field(default_factory=dict)


@asynccontextmanager
async def open_driver(
    package: str,
    image: str,
    *,
    env: Mapping[str, str] | None = None,
    lifetime: int = 600,
    api_key: str | None = None,
) -> AsyncIterator[Driver]:
    """A driver on a fresh sandbox, destroyed on exit whatever the scenario did."""
    if package == "core":
        async with _core(image, env, lifetime, api_key) as driver:
            yield driver
    elif package == "pydantic_ai":
        async with _pydantic(image, env, lifetime, api_key) as driver:
            yield driver
    elif package == "deepagents":
        async with _deep(image, env, lifetime, api_key) as driver:
            yield driver
    else:
        raise ValueError(f"unknown package {package!r}")


@asynccontextmanager
async def _core(
    image: str, env: Mapping[str, str] | None, lifetime: int, api_key: str | None
) -> AsyncIterator[Driver]:
    from opensandbox_core import Connection

    connection = Connection(api_key=api_key) if api_key else None
    session = AsyncSandboxSession(
        SandboxSpec(image=image, lifetime=lifetime), connection=connection, env=env
    )
    try:
        sid = await session.start()

        async def run(command: str, timeout: float) -> tuple[int, str]:
            result = await session.commands.run(command, timeout=timeout)
            return result.exit_code, result.stdout

        yield Driver(
            package="core",
            session=session,
            sandbox_id=sid,
            backend=session,
            run=run,
            write=session.files.write_bytes,
            read=session.files.read_bytes,
            attach_and_run=lambda: AsyncSandboxSession.attach(
                sid, connection=connection
            ).commands.run("true"),
            attach_missing=lambda: AsyncSandboxSession.attach(
                MISSING, connection=connection
            ).commands.run("true"),
            unavailable=SandboxUnavailableError,
            died=(SandboxUnavailableError, ServerError),
            extra={"list_dir": lambda: session.files.list_dir(".")},
        )
    finally:
        await session.destroy()


@asynccontextmanager
async def _pydantic(
    image: str, env: Mapping[str, str] | None, lifetime: int, api_key: str | None
) -> AsyncIterator[Driver]:
    from opensandbox.config import ConnectionConfig
    from pydantic_ai.workspaces import WorkspaceRef, WorkspaceUnavailableError

    from pydantic_ai_opensandbox import OpenSandboxBackend

    domain = os.environ.get("OPEN_SANDBOX_DOMAIN")
    config = ConnectionConfig(domain=domain, api_key=api_key) if api_key else None
    backend = OpenSandboxBackend(image=image, sandbox_timeout=lifetime, env=env, connection=config)
    attached: list[OpenSandboxBackend] = []
    try:
        await backend.run(["true"])
        assert backend.ref is not None
        ref = backend.ref

        async def run(command: str, timeout: float) -> tuple[int, str]:
            result = await backend.run(command, shell=True, timeout=timeout)  # noqa: S604
            return result.exit_code, result.stdout

        def other(target: WorkspaceRef = ref) -> OpenSandboxBackend:
            attached.append(OpenSandboxBackend(ref=target, connection=config))
            return attached[-1]

        missing = WorkspaceRef(provider="opensandbox", id=MISSING)

        yield Driver(
            package="pydantic_ai",
            session=backend.session,
            sandbox_id=ref.id,
            backend=backend,
            run=run,
            write=backend.write_bytes,
            read=backend.read_bytes,
            attach_and_run=lambda: other().run(["true"]),
            attach_missing=lambda: other(missing).run(["true"]),
            unavailable=WorkspaceUnavailableError,
            died=(WorkspaceUnavailableError,),
            extra={
                "stat": lambda: backend.stat("a.txt"),
                "attached list_dir": lambda: other().list_dir("."),
            },
        )
    finally:
        for extra in attached:
            await extra.aclose()
        await backend.aclose()
        await backend.session.destroy()


@asynccontextmanager
async def _deep(
    image: str, env: Mapping[str, str] | None, lifetime: int, api_key: str | None
) -> AsyncIterator[Driver]:
    import asyncio

    from deepagents_opensandbox_backend import OpenSandboxBackend

    backend = await OpenSandboxBackend.acreate(
        image=image, timeout=lifetime, env=env, api_key=api_key
    )
    try:

        async def run(command: str, timeout: float) -> tuple[int, str]:
            response = await backend.aexecute(command, timeout=max(1, round(timeout)))
            if response.exit_code is None:
                raise AssertionError(f"no exit code: {response.output!r}")
            return response.exit_code, response.output

        async def write(path: str, data: bytes) -> None:
            (result,) = await backend.aupload_files([(_absolute(path), data)])
            if result.error is not None:
                raise OSError(f"upload of {path} failed: {result.error}")

        async def read(path: str) -> bytes:
            (result,) = await backend.adownload_files([_absolute(path)])
            if result.error is not None or result.content is None:
                raise OSError(f"download of {path} failed: {result.error}")
            return result.content

        yield Driver(
            package="deepagents",
            session=backend.session,
            sandbox_id=backend.id,
            backend=backend,
            run=run,
            write=write,
            read=read,
            attach_and_run=lambda: OpenSandboxBackend.aconnect(backend.id, api_key=api_key),
            attach_missing=lambda: OpenSandboxBackend.aconnect(MISSING, api_key=api_key),
            unavailable=SandboxUnavailableError,
            died=(SandboxUnavailableError, ServerError),
            # The blocking side too (what the execute tool calls), off the event loop.
            extra={"blocking execute": lambda: asyncio.to_thread(backend.execute, "echo hi")},
        )
    finally:
        await backend.akill()


def _absolute(path: str) -> str:
    return path if path.startswith("/") else f"/workspace/{path}"


# -- hostile inputs: what each package accepts and how it refuses ---------------------------------


class Refused(OSError):
    """A Deep Agents transfer that answered with an error string (`code`) instead of raising."""

    def __init__(self, path: str, code: str) -> None:
        super().__init__(f"{path!r}: {code}")
        self.code = code


@dataclass
class HostileOps:
    """One package's file and command calls for the shared hostile-input scenarios.

    File calls raise on refusal (`errors`); `refusal_ok(path, exc)` says whether that refusal
    is the documented one for that path. Commands: `run_command(command)` runs what the package
    takes as a command (`bad_commands` must all be refused with `argument_errors`), and
    `run_timeout` / `run_env` run `true` with a timeout or an env. Optional calls are None where
    the package has no such call.
    """

    errors: tuple[type[BaseException], ...]
    write: Callable[[str, bytes], Awaitable[Any]]
    read: Callable[[str], Awaitable[bytes]]
    refusal_ok: Callable[[str, BaseException], bool]
    size: Callable[[str], Awaitable[int]] | None
    names: Callable[[str], Awaitable[list[str]]] | None
    remove: Callable[[str], Awaitable[Any]] | None
    exists: Callable[[str], Awaitable[bool]] | None
    batch: Callable[[list[tuple[str, bytes]]], Awaitable[list[str | None]]] | None
    argument_errors: tuple[type[BaseException], ...]
    bad_commands: list[Any]
    run_command: Callable[[Any], Awaitable[Any]]
    run_timeout: Callable[[Any], Awaitable[int]]
    no_limit_timeouts: tuple[Any, ...]  # timeouts that mean "no limit" here, not refused
    run_env: Callable[[Any], Awaitable[str]]  # runs printf of $A $B $C $D with that env
    env_per_call: bool  # False: env is given at create only (run_env then only refuses)
    run_argv: Callable[[list[str]], Awaitable[str]] | None
    protects_roots: bool  # removing "/", the working directory... is refused up front


PRINT_ENV = 'printf "%s|" "$A" "$B" "$C" "$D"'


def hostile_ops(driver: Driver, huge_argv: list[str]) -> HostileOps:
    """The hostile-input operations of `driver`'s package (see `HostileOps`)."""
    if driver.package == "core":
        return _core_ops(driver.session, huge_argv)
    if driver.package == "pydantic_ai":
        return _pydantic_ops(driver.backend, huge_argv)
    return _deep_ops(driver.backend)


def _core_ops(session: AsyncSandboxSession, huge_argv: list[str]) -> HostileOps:
    from opensandbox_core import ConfigurationError, OpenSandboxError

    async def size(path: str) -> int:
        info = await session.files.stat(path)
        return info.size if info.is_file else -1

    async def names(parent: str) -> list[str]:
        return [e.name for e in await session.files.list_dir(parent)]

    async def run_env(env: Any) -> str:
        return (await session.commands.run(["sh", "-c", PRINT_ENV], env=env)).stdout

    async def run_argv(argv: list[str]) -> str:
        return (await session.commands.run(argv)).stdout

    def refusal_ok(path: str, exc: BaseException) -> bool:
        # Refused up front only for what the docs list: empty, NUL, not encodable.
        return (
            not isinstance(exc, ConfigurationError)
            or not path
            or "\0" in path
            or ("\udcff" in path)
        )

    return HostileOps(
        errors=(ConfigurationError, OSError, OpenSandboxError),
        write=session.files.write_bytes,
        read=session.files.read_bytes,
        refusal_ok=refusal_ok,
        size=size,
        names=names,
        remove=session.files.remove,
        exists=session.files.exists,
        batch=None,
        argument_errors=(ConfigurationError,),
        bad_commands=[[], "", "   ", ["ls", "a\0b"], "echo \0", huge_argv, b"ls", 42],
        run_command=session.commands.run,
        run_timeout=lambda t: _exit(session.commands.run("true", timeout=t)),
        no_limit_timeouts=(),
        run_env=run_env,
        env_per_call=True,
        run_argv=run_argv,
        protects_roots=True,
    )


async def _exit(call: Awaitable[Any]) -> int:
    return int((await call).exit_code)


def _pydantic_ops(backend: Any, huge_argv: list[str]) -> HostileOps:
    async def size(path: str) -> int:
        return int((await backend.stat(path)).size)

    async def run_env(env: Any) -> str:
        return str((await backend.run(["sh", "-c", PRINT_ENV], env=env)).stdout)

    async def run_argv(argv: list[str]) -> str:
        return str((await backend.run(argv)).stdout)

    async def run_command(spec: tuple[Any, bool]) -> Any:
        command, shell = spec
        return await backend.run(command, shell=shell)

    bad = [([], False), ("", True), ("ls", False), (["ls"], True), (["a\0"], False)]
    return HostileOps(
        errors=(OSError, ValueError, TypeError),
        write=backend.write_bytes,
        read=backend.read_bytes,
        refusal_ok=lambda path, exc: True,
        size=size,
        names=None,
        remove=backend.remove,
        exists=backend.exists,
        batch=None,
        argument_errors=(TypeError, ValueError),
        bad_commands=[*bad, (huge_argv, False), (b"ls", False)],
        run_command=run_command,
        run_timeout=lambda t: _exit(backend.run(["true"], timeout=t)),
        no_limit_timeouts=(),
        run_env=run_env,
        env_per_call=True,
        run_argv=run_argv,
        protects_roots=True,
    )


def _deep_ops(backend: Any) -> HostileOps:
    from deepagents.backends.protocol import (
        FILE_NOT_FOUND,
        INVALID_PATH,
        IS_DIRECTORY,
        PERMISSION_DENIED,
    )

    from deepagents_opensandbox_backend import OpenSandboxBackend

    documented = {FILE_NOT_FOUND, INVALID_PATH, IS_DIRECTORY, PERMISSION_DENIED}

    async def write(path: str, data: bytes) -> None:
        (result,) = await backend.aupload_files([(path, data)])
        if result.error is not None:
            raise Refused(path, result.error)

    async def read(path: str) -> bytes:
        (result,) = await backend.adownload_files([path])
        if result.error is not None or result.content is None:
            raise Refused(path, str(result.error))
        return bytes(result.content)

    async def names(parent: str) -> list[str]:
        listed = await backend.als(parent)
        return [e["path"].rsplit("/", 1)[-1] for e in listed.entries or []]

    def refusal_ok(path: str, exc: BaseException) -> bool:
        if not isinstance(exc, Refused) or exc.code not in documented:
            return False
        # Relative paths and NUL are invalid_path, as for every Deep Agents file operation.
        return exc.code == INVALID_PATH or (path.startswith("/") and "\0" not in path)

    async def batch(files: list[tuple[str, bytes]]) -> list[str | None]:
        paths = [p for p, _ in files]
        uploaded = await backend.aupload_files(files)
        downloaded = await backend.adownload_files(paths)
        assert [u.path for u in uploaded] == paths and [d.path for d in downloaded] == paths
        errors: list[str | None] = []
        for (path, data), up, down in zip(files, uploaded, downloaded, strict=True):
            assert up.error is None or up.error in documented, (path, up.error)
            assert down.error is None or down.error in documented, (path, down.error)
            if not path.startswith("/") or "\0" in path:
                assert up.error == INVALID_PATH and down.error == INVALID_PATH, path
            if up.error is None and down.error is None:
                assert down.content == data, path
            errors.append(up.error)
        return errors

    async def run_command(command: Any) -> Any:
        return await backend.aexecute(command)

    async def run_timeout(timeout: Any) -> int:
        response = await backend.aexecute("true", timeout=timeout)
        return int(response.exit_code)

    async def run_env(env: Any) -> str:
        # Deep Agents takes env at create (no I/O before the checks); a valid one is given to
        # the driver's sandbox instead (`open_driver(env=...)`), so print that.
        OpenSandboxBackend.create(env=env)
        raise AssertionError(f"env {env!r} was accepted")

    return HostileOps(
        # Refused: a transfer's error string; ValueError: a path BaseSandbox's scripts cannot
        # encode (a lone surrogate) raises UnicodeEncodeError there.
        errors=(Refused, ValueError),
        write=write,
        read=read,
        refusal_ok=refusal_ok,
        size=None,
        names=names,
        remove=None,  # BaseSandbox's delete is `rm -rf` on the path: not for hostile paths
        exists=None,
        batch=batch,
        argument_errors=(ValueError, TypeError),
        bad_commands=["", "  ", "echo \0"],
        run_command=run_command,
        run_timeout=run_timeout,
        no_limit_timeouts=(0,),  # 0 means no limit for the execute tool
        run_env=run_env,
        env_per_call=False,
        run_argv=None,
        protects_roots=False,
    )
