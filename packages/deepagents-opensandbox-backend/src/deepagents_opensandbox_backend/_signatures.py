"""Keyword signatures from an options class: `takes_keywords(Options)` gives a method
`method(self, options)` the keyword signature of `Options` (for type checkers through
`ParamSpec`, and for `help()`), builds the options from the keywords (checked, no I/O) and hands
the method the built object. The seed's `create(...)`, `connect(sandbox_id, ...)` and
`ThreadSandboxBackend(...)` are made this way from `SandboxOptions`, `AttachOptions` and
`ThreadOptions`."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

__all__ = ["takes_keywords", "takes_keywords_after_id"]

P = ParamSpec("P")
R = TypeVar("R")
O = TypeVar("O")  # noqa: E741 - the options type

_FIRST = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
_ID = inspect.Parameter("sandbox_id", inspect.Parameter.POSITIONAL_ONLY, annotation="str")


def _signature(
    options: Callable[..., Any], order: Sequence[str], *leading: inspect.Parameter
) -> inspect.Signature:
    """The options' parameters as keyword-only ones, those named in `order` first."""
    params = sorted(
        (
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in inspect.signature(options).parameters.values()
        ),
        key=lambda p: order.index(p.name) if p.name in order else len(order),
    )
    return inspect.Signature([*leading, *params])


def _wrap(
    method: Any, build: Callable[..., Any], order: Sequence[str], *leading: inspect.Parameter
) -> Any:
    """`method(first, *ids, options)` called as `wrapper(first, *ids, **keywords)`."""
    count = len(leading) - 1  # positional arguments after `self`: the sandbox id, if any

    def call(first: Any, /, *args: Any, **kwargs: Any) -> Any:
        return method(first, *args[:count], build(*args[count:], **kwargs))

    async def acall(first: Any, /, *args: Any, **kwargs: Any) -> Any:
        coroutine: Coroutine[Any, Any, Any] = call(first, *args, **kwargs)
        return await coroutine

    wrapper: Any = acall if inspect.iscoroutinefunction(method) else call
    functools.update_wrapper(wrapper, method)
    wrapper.__signature__ = _signature(build, order, *leading)
    return wrapper


def takes_keywords(
    options: Callable[P, O], order: Sequence[str] = ()
) -> Callable[[Callable[[Any, O], R]], Callable[Concatenate[Any, P], R]]:
    """Give `method(self_or_cls, options)` the keyword signature of `options` (the keywords
    named in `order` first, then the others as declared)."""
    return lambda method: cast(Any, _wrap(method, options, tuple(order), _FIRST))


def takes_keywords_after_id(
    options: Callable[P, O], order: Sequence[str] = ()
) -> Callable[[Callable[[Any, str, O], R]], Callable[Concatenate[Any, str, P], R]]:
    """`takes_keywords` for `method(cls, sandbox_id, options)`."""
    return lambda method: cast(Any, _wrap(method, options, tuple(order), _FIRST, _ID))
