"""Creating a sandbox and finding it again: the lifecycle's create step.

The id is known the moment the server answers the create. When that answer is lost (timeout,
dropped connection, 502/503/504) the sandbox is found again by the ownership tag the session put
in its metadata, instead of creating a second one. `_reach` then makes the sandbox usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from opensandbox_core import _errors
from opensandbox_core._config import SandboxSpec
from opensandbox_core._create import create_arguments
from opensandbox_core._errors import ServerError
from opensandbox_core._metadata import ADAPTER_KEY, LIBRARY_KEY, LIBRARY_VALUE, OWNER_KEY

if TYPE_CHECKING:
    from opensandbox.services.sandbox import Sandboxes

__all__ = ["Creator"]

logger = logging.getLogger(__name__)


_RECOVER_POLL: Final = 0.5


class Creator:
    """Creates one session's sandbox, at most once, and recovers it when the answer is lost."""

    def __init__(
        self,
        spec: SandboxSpec,
        *,
        owner_token: Callable[[], str],
        request_timeout: float,
        recover_timeout: float,
        address: Callable[[], str],
    ) -> None:
        self._spec = spec
        self._token = owner_token
        self._request_timeout = request_timeout
        self._recover_timeout = recover_timeout
        self._address = address
        self._sent = False

    async def create(self, sandboxes: Sandboxes) -> str:
        """The id of this session's new sandbox (created now, or found from an earlier try)."""
        spec = self._spec
        # The project's labels (`_metadata`): an adapter names itself in the spec's metadata.
        metadata = {ADAPTER_KEY: "core", **spec.metadata}
        metadata.update({OWNER_KEY: self._token(), LIBRARY_KEY: LIBRARY_VALUE})
        if not self._sent:
            self._sent = True
            try:
                # Bounded here: a transport the caller passed in may have no timeout of its own.
                async with asyncio.timeout(self._request_timeout):
                    response = await sandboxes.create_sandbox(**create_arguments(spec, metadata))
            except asyncio.CancelledError:
                raise  # `_sent` stays True: the next start looks for the sandbox first
            except Exception as exc:
                if not _errors.is_lost_response(exc):
                    self._sent = False
                    with _errors.translated(f"create a sandbox from image {spec.image!r}"):
                        raise
                logger.warning(
                    "The create response was lost (%s); looking for the sandbox by its tag",
                    type(exc).__name__,
                )
                return await self._recover(sandboxes, exc)
            return str(response.id)
        # A previous create attempt may have reached the server: find it before creating again.
        found = await self.find_by_tag(sandboxes)
        if found is not None:
            return found
        self._sent = False
        return await self.create(sandboxes)

    async def find_by_tag(self, sandboxes: Sandboxes) -> str | None:
        from opensandbox.models.sandboxes import SandboxFilter

        token = self._token()
        result = await sandboxes.list_sandboxes(
            SandboxFilter(metadata={OWNER_KEY: token}, page_size=20)
        )
        items = [s for s in result.sandbox_infos if (s.metadata or {}).get(OWNER_KEY) == token]
        if not items:
            return None
        items.sort(key=lambda s: s.created_at)
        for extra in items[1:]:  # never expected; keep one, remove duplicates we own
            with contextlib.suppress(Exception):
                await sandboxes.kill_sandbox(extra.id)
        return str(items[0].id)

    async def _recover(self, sandboxes: Sandboxes, cause: Exception) -> str:
        """Find the sandbox of a create whose answer was lost, for `recover_timeout` seconds.

        Each listing is bounded by what is left of that time: the SDK's transport retries a
        GET that times out, which would otherwise stretch a server that never answers to
        several request timeouts per listing.
        """
        deadline = time.monotonic() + self._recover_timeout
        last_error: Exception | None = None
        while (left := deadline - time.monotonic()) > 0:
            try:
                async with asyncio.timeout(min(left, self._request_timeout)):
                    found = await self.find_by_tag(sandboxes)
            except Exception as exc:
                last_error = exc
                found = None
            if found is not None:
                logger.info("Recovered sandbox %s after a lost create response", found)
                return found
            await asyncio.sleep(min(_RECOVER_POLL, max(0.0, deadline - time.monotonic())))
        self._sent = False
        detail = f" (last listing error: {type(last_error).__name__})" if last_error else ""
        if isinstance(cause, TimeoutError):
            lost = f"the server did not answer the create within {self._request_timeout:g} s"
        else:
            lost = f"the server's answer to the create was lost ({type(cause).__name__})"
        raise ServerError(
            f"Could not create a sandbox at {self._address()}: {lost}, and no sandbox with "
            f"this session's tag appeared in the {self._recover_timeout:g} s after{detail}. "
            "It is safe to retry.",
            retryable=True,
        ) from cause
