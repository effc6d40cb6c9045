"""The lifecycle of the backend's session on the core's `OperationScope` (start once, the SDK
`Sandbox`, closing after the last operation), with errors as the workspace protocol's."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from opensandbox_core import AsyncSandboxSession
from opensandbox_core.adapters import OperationScope

from ._translate import require_asyncio, running_on_asyncio, translate

if TYPE_CHECKING:
    from opensandbox import Sandbox

__all__ = ["SessionLifecycle", "operation"]

logger = logging.getLogger("pydantic_ai_opensandbox._backend")  # the name the docs give


class SessionLifecycle:
    """Start, operation bracketing and closing for a backend holding `_session` and `_scope`."""

    _session: AsyncSandboxSession
    _scope: OperationScope
    _logged_create: bool

    async def _start(self) -> None:
        """Create or attach (once), or only renew; a create finishes even if the caller is cancelled."""
        try:
            await self._scope.start()
        except Exception as exc:
            translate(exc, starting=True)
        finally:
            if not self._logged_create and self._session.owned and self._session.id is not None:
                self._logged_create = True
                logger.info("Created OpenSandbox sandbox %s", self._session.id)

    @contextlib.asynccontextmanager
    async def _operation(self) -> AsyncIterator[None]:
        require_asyncio()
        async with self._scope.operation():
            await self._start()
            try:
                yield
            except Exception as exc:
                translate(exc)

    async def get_sandbox(self) -> Sandbox:
        """The `opensandbox.Sandbox`, for features the workspace API does not cover.

        On a backend with no sandbox yet this creates one, or attaches to the one `ref` names. It
        shares the backend's transport, so it stops working once the backend closes.
        """
        async with self._operation():
            return await self._scope.sdk_sandbox()

    async def aclose(self) -> None:
        """Close the HTTP clients this backend opened on this event loop; the sandbox keeps running.

        A transport passed in `connection` stays open. An operation in flight keeps the clients
        open until the last one ends. A later operation opens new ones and attaches again by ref.
        """
        if running_on_asyncio():
            await self._scope.aclose()


def operation(backend: SessionLifecycle) -> contextlib.AbstractAsyncContextManager[None]:
    """`backend`'s operation scope (the sandbox started or attached, kept open until it ends),
    for the package's other capabilities."""
    return backend._operation()
