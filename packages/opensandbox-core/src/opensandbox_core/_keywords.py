"""One description of a sandbox: an adapter's keywords turned into a `SandboxSpec` by one table.

Each adapter declares, in one read-only table, which of its keywords describe a new sandbox and
the `SandboxSpec` field each one sets, with the conversion of its value where the adapter's form
differs (a `timedelta`, a string split like a shell would):

    SPEC_FIELDS = MappingProxyType({
        "image": SpecField("image"),
        "timeout": SpecField("lifetime", validation.idle_lifetime),
    })

`spec_from_keywords(SPEC_FIELDS, values, keyword_defaults(Adapter))` builds the spec from the keywords' values.
With `spec=` the keywords left at their defaults give way to it, and one the caller set so that it
describes the sandbox differently raises `ConfigurationError` naming both, so no value is dropped
silently. `None` for a mapping or sequence field (`metadata`, `volumes`, ...) means empty.

`takes_keywords(Options)` gives a method `method(self, options)` the keyword signature of the
options class (for type checkers through `ParamSpec`, and for `help()`), builds the options from
the keywords (checked, no I/O) and hands the method the built object.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, Final, ParamSpec, TypeVar, cast

from . import _validate
from ._config import SandboxSpec

__all__ = [
    "SpecField",
    "keyword_defaults",
    "spec_from_keywords",
    "takes_keywords",
    "takes_keywords_after_id",
]

_FIELDS: Final = tuple(f.name for f in dataclasses.fields(SandboxSpec))
_EMPTY_WHEN_NONE: Final = frozenset({"container_env", "metadata", "volumes", "extensions"})


@dataclass(frozen=True)
class SpecField:
    """Where an adapter's keyword goes in a `SandboxSpec`: the field `name`, and `convert`, which
    checks the keyword's value and turns it into the field's (`None`: taken as it is)."""

    name: str
    convert: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        _validate.choice(self.name, "SpecField name", _FIELDS)


def _same(a: object, b: object) -> bool:
    """Equal as descriptions: mappings by their items, sequences (not strings) by their items."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return dict(a) == dict(b)
    if isinstance(a, Sequence) and isinstance(b, Sequence):
        return a == b if isinstance(a, str) or isinstance(b, str) else list(a) == list(b)
    return a == b


def keyword_defaults(owner: Callable[..., object]) -> dict[str, object]:
    """Each keyword's default in `owner`'s signature (a class: its constructor's; a dataclass:
    its fields'), for `spec_from_keywords` to tell which keywords a caller set."""
    return {
        name: parameter.default
        for name, parameter in inspect.signature(owner).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }


def spec_from_keywords(
    table: Mapping[str, SpecField],
    values: Mapping[str, object],
    defaults: Mapping[str, object],
    *,
    spec: SandboxSpec | None = None,
    labels: Mapping[str, str] | None = None,
) -> SandboxSpec:
    """The `SandboxSpec` an adapter's keywords describe (checked, no I/O).

    `values`: the keywords as called (defaults included; names not in `table` are ignored);
    `defaults`: each keyword's default, to tell which ones the caller set; `spec`: a spec given
    beside them; `labels`: metadata the adapter adds over the caller's.
    """
    converted: dict[str, Any] = {}
    for keyword, value in values.items():
        if keyword in table:
            entry = table[keyword]
            converted[keyword] = entry.convert(value) if entry.convert else value
    if spec is None:
        fields = {table[kw].name: v for kw, v in converted.items()}
        built = SandboxSpec(
            **{k: v for k, v in fields.items() if not (v is None and k in _EMPTY_WHEN_NONE)}
        )
    else:
        _validate.instance(spec, SandboxSpec, "spec", "an opensandbox_core.SandboxSpec")
        chosen = [kw for kw in converted if not _same(values[kw], defaults.get(kw, ...))]
        disagreeing = {
            kw: table[kw].name
            for kw in chosen
            if not _same(converted[kw], getattr(spec, table[kw].name))
            and not (converted[kw] is None and table[kw].name in _EMPTY_WHEN_NONE)
        }
        _validate.spec_keywords(disagreeing)
        built = spec
    if labels:
        built = dataclasses.replace(built, metadata={**built.metadata, **labels})
    return built


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
