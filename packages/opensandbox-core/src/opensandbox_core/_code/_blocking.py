"""`BlockingCode`: the blocking twin of `session.code` (`SandboxSession.code`): each method
runs its async twin on the portal loop (`_portal`), as the session's own blocking methods do,
with the same parameters (`functools.wraps`: `help()` and `inspect.signature` show them)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from opensandbox_core._portal import portal

from ._facet import CodeInterpreter

__all__ = ["BlockingCode"]

T = TypeVar("T")
P = ParamSpec("P")


def _twin(
    method: Callable[Concatenate[CodeInterpreter, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[BlockingCode, P], T]:
    attribute = method.__name__

    @functools.wraps(method)
    def twin(self: BlockingCode, /, *args: P.args, **kwargs: P.kwargs) -> T:
        bound: Callable[P, Coroutine[Any, Any, T]] = getattr(self._code, attribute)
        return portal.run(bound(*args, **kwargs))

    twin.__qualname__ = f"BlockingCode.{attribute}"
    return twin


class BlockingCode:
    """Blocking twin of `CodeInterpreter` (`SandboxSession.code`): same methods, same
    parameters, same behaviour."""

    def __init__(self, code: CodeInterpreter) -> None:
        self._code = code

    @property
    def async_code(self) -> CodeInterpreter:
        """The async facet behind this one (same session, same contexts)."""
        return self._code

    def __repr__(self) -> str:
        return f"Blocking{self._code!r}"

    run = _twin(CodeInterpreter.run)
    create_context = _twin(CodeInterpreter.create_context)
    contexts = _twin(CodeInterpreter.contexts)
    delete_context = _twin(CodeInterpreter.delete_context)
    interrupt = _twin(CodeInterpreter.interrupt)
