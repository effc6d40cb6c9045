"""Backend behaviours beyond the conformance suite, and the 8 MiB native-vs-shell measurement."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

import pytest
from pydantic_ai.exceptions import UserError
from pydantic_ai.workspaces import (
    CommandResult,
    Workspace,
    WorkspaceCommand,
    WorkspaceError,
    WorkspaceRef,
    WorkspaceUnavailableError,
)

from opensandbox_core import AsyncSandboxSession, SandboxSpec, UnsupportedDaemonError
from pydantic_ai_opensandbox import OpenSandboxBackend


@pytest.mark.testbed_daemon("1.0.16")
async def test_ancient_execd_raises_unavailable_with_the_fix(
    sandbox_image: str, created_refs: list[WorkspaceRef]
) -> None:
    # The testbed daemon drops blank lines like execd v1.0.16 and older when asked to.
    session = AsyncSandboxSession(
        SandboxSpec(image=sandbox_image, container_env={"OSB_EXECD_PROFILE": "1.0.16"})
    )
    with pytest.raises(UnsupportedDaemonError):
        await session.start()
    assert session.id is not None
    ref = WorkspaceRef(provider="opensandbox", id=session.id)
    created_refs.append(ref)
    await session.aclose()
    backend = OpenSandboxBackend(ref=ref)
    with pytest.raises(WorkspaceUnavailableError) as info:
        await backend.run(["true"])
    assert "drops the blank lines" in str(info.value)
    assert 'execd_image = "opensandbox/execd:v1.0.19"' in str(info.value)
    await backend.aclose()


@pytest.mark.parametrize(
    "profile", [pytest.param(p, marks=pytest.mark.testbed_daemon(p)) for p in ("1.0.19", "1.0.18")]
)
async def test_line_framed_execd_works_with_exact_output(
    sandbox_image: str, created_refs: list[WorkspaceRef], profile: str
) -> None:
    """Older execd (v1.0.17+, line-framed) works: output is byte-exact, nothing is refused."""
    session = AsyncSandboxSession(
        SandboxSpec(image=sandbox_image, container_env={"OSB_EXECD_PROFILE": profile})
    )
    await session.start()
    assert session.id is not None
    ref = WorkspaceRef(provider="opensandbox", id=session.id)
    created_refs.append(ref)
    await session.aclose()
    backend = OpenSandboxBackend(ref=ref)
    result = await backend.run(["printf", "a\\r\\nb\\n\\nc"])
    assert result.exit_code == 0
    assert result.stdout == "a\r\nb\n\nc"
    await backend.aclose()


async def test_deleted_working_dir_raises_workspace_error(
    make_backend: Callable[..., OpenSandboxBackend],
) -> None:
    backend = make_backend(working_dir="/tmp/doomed")
    assert (await backend.run(["sh", "-c", "rm -rf /tmp/doomed"])).exit_code == 0
    with pytest.raises(WorkspaceError) as info:
        await backend.run(["true"])
    assert not isinstance(info.value, WorkspaceUnavailableError)
    await backend.aclose()


async def test_get_sandbox_reaches_the_same_sandbox(
    make_backend: Callable[..., OpenSandboxBackend],
) -> None:
    backend = make_backend()
    sandbox = await backend.get_sandbox()
    assert backend.ref is not None and sandbox.id == backend.ref.id
    await Workspace(backend).write_text("sdk.txt", "via the sdk")
    assert await sandbox.files.read_file("/workspace/sdk.txt") == "via the sdk"
    await sandbox.close()  # leaves the backend's transport open
    assert (await backend.run(["cat", "sdk.txt"])).stdout == "via the sdk"
    await backend.aclose()


async def test_env_and_sandbox_timeout_apply_to_an_attached_sandbox(
    make_backend: Callable[..., OpenSandboxBackend],
) -> None:
    created = make_backend(env={"FROM_BACKEND": "one"})
    assert (await created.run(["sh", "-c", 'printf %s "$FROM_BACKEND"'])).stdout == "one"
    assert created.ref is not None
    attached = OpenSandboxBackend(ref=created.ref, env={"FROM_BACKEND": "two"}, sandbox_timeout=600)
    assert attached.ref is created.ref or attached.ref == created.ref
    assert (await attached.run(["sh", "-c", 'printf %s "$FROM_BACKEND"'])).stdout == "two"
    assert "two" not in repr(attached)
    await attached.aclose()
    await created.aclose()


def test_trio_raises_user_error() -> None:
    trio = pytest.importorskip("trio")
    backend = OpenSandboxBackend(image="python:3.13-slim")

    async def main() -> None:
        for call in (
            backend.working_dir,
            lambda: backend.run(["true"]),
            lambda: backend.read_bytes("/x"),
            backend.get_sandbox,
        ):
            with pytest.raises(UserError):
                await call()

    trio.run(main)
    assert backend.ref is None


class _CommandsOnly:
    """Only `SupportsCommands`, by delegation: pydantic-ai then moves files through its shell."""

    def __init__(self, inner: OpenSandboxBackend) -> None:
        self._inner = inner

    @property
    def ref(self) -> WorkspaceRef | None:
        return self._inner.ref

    async def working_dir(self) -> str:
        return await self._inner.working_dir()

    async def run(
        self,
        command: WorkspaceCommand,
        *,
        shell: bool = False,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> CommandResult:
        return await self._inner.run(command, shell=shell, env=env, timeout=timeout)


@pytest.mark.long
async def test_measure_8_mib_round_trip_native_vs_shell(
    make_backend: Callable[..., OpenSandboxBackend], capsys: pytest.CaptureFixture[str]
) -> None:
    """The conformance suite's 8 MiB round trip, through the native file API and the shell path."""
    backend = make_backend()
    data = b"x" * (8 * 1024 * 1024)
    timings: dict[str, tuple[float, float]] = {}
    for name, workspace in (
        ("native", Workspace(backend)),
        ("commands-only", Workspace(_CommandsOnly(backend))),  # type: ignore[arg-type]
    ):
        path = f"/workspace/large-{name}.bin"
        started = time.perf_counter()
        await workspace.write_bytes(path, data)
        written = time.perf_counter()
        assert await workspace.read_bytes(path) == data
        done = time.perf_counter()
        timings[name] = (written - started, done - written)
    await backend.aclose()
    with capsys.disabled():
        print()
        for name, (write, read) in timings.items():
            print(
                f"8 MiB round trip, {name:>13}: write {write:6.2f} s, read {read:6.2f} s, "
                f"total {write + read:6.2f} s"
            )
    assert sum(timings["native"]) < sum(timings["commands-only"])


async def test_a_cancelled_first_operation_keeps_the_sandbox_its_create_made(
    sandbox_image: str, testbed_env: dict[str, str]
) -> None:
    """The backend's create runs to its end when the operation that started it is cancelled
    (the ref must not be lost): the backend knows its sandbox and its next operation uses it."""
    from opensandbox.config import ConnectionConfig

    from testbed.fault_tools import WithholdingProxy, run_asgi

    proxy = WithholdingProxy(testbed_env["OPEN_SANDBOX_DOMAIN"], every=1, hold=4)
    with run_asgi(proxy.app) as address:
        connection = ConnectionConfig(
            domain=address, api_key=testbed_env.get("OPEN_SANDBOX_API_KEY") or None
        )
        backend = OpenSandboxBackend(image=sandbox_image, connection=connection)
        task = asyncio.ensure_future(backend.run(["echo", "never"]))
        await asyncio.sleep(1.5)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert proxy.withheld == 1
        ref = backend.ref
        assert ref is not None, "the create finished and the backend kept its ref"
        try:
            assert (await backend.run(["echo", "kept"])).stdout == "kept\n"
            assert proxy.creates == 1, "the next operation used the sandbox, no second create"
        finally:
            await backend.session.destroy()
            await backend.aclose()
