"""`ForwardingBackend`: every operation of Deep Agents' sandbox protocol (`OPERATIONS`, sync
and async), forwarded to the `OpenSandboxBackend` the subclass picks for the call (`_current()`
/ `_acurrent()`), with that method's signature and docstring: none falls back to BaseSandbox's
scripts (`tests/unit/deepagents_backend/test_protocol_coverage.py` checks every exported class).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deepagents.backends.sandbox import BaseSandbox

from ._backend import OpenSandboxBackend

__all__ = ["OPERATIONS", "ForwardingBackend"]

OPERATIONS = (
    "execute",
    "execute_with_offload",
    "upload_files",
    "download_files",
    "ls",
    "read",
    "write",
    "edit",
    "glob",
    "grep",
    "delete",
)
"""The protocol's operations; each has an async twin named with an `a` in front."""


class ForwardingBackend(BaseSandbox):
    """A Deep Agents backend whose every operation runs on the `OpenSandboxBackend` that
    `_current()` (blocking) or `_acurrent()` (async) returns for the call."""

    enable_capture_offload = True
    """`execute_with_offload` leaves a large output in the sandbox (see `OpenSandboxBackend`)."""

    def _current(self) -> OpenSandboxBackend:
        raise NotImplementedError

    async def _acurrent(self) -> OpenSandboxBackend:
        raise NotImplementedError


def _forwarders(name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The blocking and async forwarders of the operation `name`."""

    def forward(self: ForwardingBackend, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._current(), name)(*args, **kwargs)

    async def aforward(self: ForwardingBackend, *args: Any, **kwargs: Any) -> Any:
        return await getattr(await self._acurrent(), "a" + name)(*args, **kwargs)

    pairs: tuple[tuple[Callable[..., Any], str], ...] = ((forward, name), (aforward, "a" + name))
    for function, target in pairs:
        wrapped = getattr(OpenSandboxBackend, target)
        function.__name__ = target
        function.__qualname__ = f"ForwardingBackend.{target}"
        function.__doc__ = wrapped.__doc__
        setattr(function, "__wrapped__", wrapped)  # noqa: B010 - `inspect.signature` follows it
    return forward, aforward


for _operation in OPERATIONS:
    _sync, _async = _forwarders(_operation)
    setattr(ForwardingBackend, _operation, _sync)
    setattr(ForwardingBackend, "a" + _operation, _async)
del _operation, _sync, _async
