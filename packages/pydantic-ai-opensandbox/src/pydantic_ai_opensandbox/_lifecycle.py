"""The lifecycle of the Pydantic AI backend's session: create or attach once per operation (a
create finishes even if its caller is cancelled, so the ref is kept), the per-loop SDK config
shared with `get_sandbox()`, and closing the HTTP clients when the last operation ends."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from opensandbox_core import AsyncSandboxSession, CreateGuard, run_to_completion

from ._translate import require_asyncio, running_on_asyncio, translate

if TYPE_CHECKING:
    from opensandbox import Sandbox
    from opensandbox.config import ConnectionConfig

__all__ = ["SessionLifecycle", "operation"]

logger = logging.getLogger("pydantic_ai_opensandbox._backend")  # the name the docs give


class SessionLifecycle:
    """Start, operation bracketing and closing for a backend holding `_session`."""

    _session: AsyncSandboxSession
    _logged_create: bool
    _operations: int
    _close_after_operation: bool
    _sdk_configs: dict[asyncio.AbstractEventLoop, ConnectionConfig]

    # -- lifecycle ----------------------------------------------------------------------------
    async def _start(self) -> None:
        """Create or attach (once), or only renew; a create finishes even if the caller is cancelled."""
        try:
            # keep=True: the session keeps what the create made (the ref is this backend's).
            await CreateGuard(self._session, keep=True).start()
        except Exception as exc:
            translate(exc, starting=True)
        finally:
            self._log_create()

    def _log_create(self) -> None:
        if not self._logged_create and self._session.owned and self._session.id is not None:
            self._logged_create = True
            logger.info("Created OpenSandbox sandbox %s", self._session.id)

    @contextlib.asynccontextmanager
    async def _operation(self) -> AsyncIterator[None]:
        require_asyncio()
        self._operations += 1
        try:
            await self._start()
            try:
                yield
            except Exception as exc:
                translate(exc)
        finally:
            self._operations -= 1
            if self._operations == 0 and self._close_after_operation:
                await self._close_now()

    async def get_sandbox(self) -> Sandbox:
        """The `opensandbox.Sandbox`, for features the workspace API does not cover.

        On a backend with no sandbox yet this creates one, or attaches to the one `ref` names. It
        shares the backend's transport, so it stops working once the backend closes.
        """
        from opensandbox import Sandbox

        async with self._operation():
            sandbox_id = self._session.id
            assert sandbox_id is not None
            return await Sandbox.connect(
                sandbox_id, connection_config=self._shared_sdk_config(), skip_health_check=True
            )

    def _shared_sdk_config(self) -> ConnectionConfig:
        """This loop's SDK config: its transport is the backend's, so a `Sandbox` never closes it
        (a config built with its `transport` given does not own it: the SDK's documented rule)."""
        loop = asyncio.get_running_loop()
        owned = self._sdk_configs.get(loop)
        if owned is None:
            owned = self._session.connection.build_sdk_config().with_transport_if_missing()
            self._sdk_configs[loop] = owned
        shared = type(owned)(**{name: getattr(owned, name) for name in owned.model_fields_set})
        assert not shared.owns_transport and shared.transport is owned.transport
        return shared

    async def aclose(self) -> None:
        """Close the HTTP clients this backend opened on this event loop; the sandbox keeps running.

        A transport passed in `connection` stays open. An operation in flight keeps the clients
        open until the last one ends. A later operation opens new ones and attaches again by ref.
        """
        if not running_on_asyncio():
            return
        if self._operations:
            self._close_after_operation = True
            return
        await self._close_now()

    async def _close_now(self) -> None:
        async def close() -> None:
            loop = asyncio.get_running_loop()
            config = self._sdk_configs.pop(loop, None)
            for other in [lp for lp in self._sdk_configs if lp.is_closed()]:
                self._sdk_configs.pop(other, None)
            if config is not None:
                await config.close_transport_if_owned()
            await self._session.aclose()

        with contextlib.suppress(Exception):
            await run_to_completion(close)


def operation(backend: SessionLifecycle) -> contextlib.AbstractAsyncContextManager[None]:
    """`backend`'s operation scope (the sandbox started or attached, kept open until it ends),
    for the package's other capabilities."""
    return backend._operation()
