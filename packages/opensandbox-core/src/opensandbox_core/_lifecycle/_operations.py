"""`OperationScope`: the lifecycle of a backend's session, the one helper both adapters and a
custom agent loop build on.

- `start()` creates (or attaches) once, so that no failure or cancellation leaves the create half
  done (the core's create guard): by default a create cut off by a cancellation runs to its end
  and the session keeps the sandbox (a caller that holds the session hands it out later);
  `start(discard_unfinished=True)`: a create that fails or is cancelled deletes the sandbox it
  made (a caller that gets nothing back then). `start_blocking()` is `start()` for blocking code, on the
  core's portal loop (Ctrl-C waits for the clean-up).
- `operation()` counts the operations in flight: with `close_after_operation` set, the session's
  HTTP clients close as the last one ends (for a backend that may be dropped without being
  closed: a durable engine builds one per step); `aclose()` during an operation defers to its end.
- `discard(why)` deletes the sandbox the session created (a failed run's), logging why; it never
  raises, and a session that attached only closes its clients.
- `sdk_sandbox()` is the OpenSandbox SDK's `Sandbox` on the session's sandbox, sharing the scope's
  transport on each event loop, which `aclose()` closes (a transport the caller passed in the
  connection stays theirs).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ._guard import CreateGuard, discard_sandbox, run_to_completion
from ._loops import PerLoop

if TYPE_CHECKING:
    from opensandbox import Sandbox
    from opensandbox.config import ConnectionConfig

    from opensandbox_core._session import AsyncSandboxSession

__all__ = ["OperationScope"]


async def _close_config(config: ConnectionConfig) -> None:
    await config.close_transport_if_owned()


class OperationScope:
    """Start, count and close around the operations on `session` (construction does no I/O).

    ```python
    scope = OperationScope(session, close_after_operation=True)
    async with scope.operation():
        await scope.start()
        await session.commands.run("true")
    # the session's clients are closed here: no operation is left in flight
    ```
    """

    def __init__(
        self, session: AsyncSandboxSession, *, close_after_operation: bool = False
    ) -> None:
        self.session = session
        self.close_after_operation = close_after_operation
        """Close the clients when the last operation in flight ends."""
        self._operations = 0
        self._sdk_configs: PerLoop[ConnectionConfig] = PerLoop(_close_config)

    @property
    def in_flight(self) -> int:
        """How many operations are running now."""
        return self._operations

    async def start(self, *, discard_unfinished: bool = False) -> str:
        """Create or attach (once), or only renew; return the sandbox id. A create cut off by a
        cancellation runs to its end and the session keeps the sandbox (the caller hands it out);
        with `discard_unfinished=True`, a failed or cancelled create deletes what it made (the
        caller gets nothing back then)."""
        return await CreateGuard(self.session, keep=not discard_unfinished).start()

    def start_blocking(self, *, discard_unfinished: bool = False) -> str:
        """`start()` for blocking code, on the core's portal loop; Ctrl-C waits for the clean-up
        of a create it cut off (a second Ctrl-C leaves at once)."""
        return CreateGuard(self.session, keep=not discard_unfinished).start_blocking()

    async def discard(self, why: str) -> None:
        """Delete the sandbox the session created, saying `why` in the log; never raises an
        error (a cancellation waits for the deletion). A session that attached only closes its
        clients: whoever created the sandbox owns it."""
        await discard_sandbox(self.session, why)

    @contextlib.asynccontextmanager
    async def operation(self) -> AsyncIterator[None]:
        """One operation, counted while it runs; the last to end closes the clients if asked."""
        self._operations += 1
        try:
            yield
        finally:
            self._operations -= 1
            if self._operations == 0 and self.close_after_operation:
                await self._close_now()

    async def sdk_sandbox(self) -> Sandbox:
        """The SDK's `opensandbox.Sandbox` on the session's sandbox (started first), sharing this
        event loop's transport of the scope: it stops working once the scope closes."""
        from opensandbox import Sandbox

        sandbox_id = await self.start()
        return await Sandbox.connect(
            sandbox_id, connection_config=self._shared_sdk_config(), skip_health_check=True
        )

    def _shared_sdk_config(self) -> ConnectionConfig:
        """This loop's SDK config: its transport is the scope's, so a `Sandbox` never closes it
        (a config built with its `transport` given does not own it: the SDK's documented rule)."""
        owned = self._sdk_configs.get_or_make(
            lambda: self.session.connection.build_sdk_config().with_transport_if_missing()
        )
        shared = type(owned)(**{name: getattr(owned, name) for name in owned.model_fields_set})
        assert not shared.owns_transport and shared.transport is owned.transport
        return shared

    async def aclose(self) -> None:
        """Close the clients opened on this event loop, or, with an operation in flight, when the
        last one ends. The sandbox keeps running; a later operation opens new clients."""
        if self._operations:
            self.close_after_operation = True
            return
        await self._close_now()

    async def _close_now(self) -> None:
        async def close() -> None:
            await self._sdk_configs.close_current()
            await self.session.aclose()

        with contextlib.suppress(Exception):
            await run_to_completion(close)
