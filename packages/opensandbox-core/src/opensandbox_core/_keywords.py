"""One description of a sandbox: an adapter's keywords turned into a `SandboxSpec` by one table.

Each adapter declares, in one read-only table, which of its keywords describe a new sandbox and
the `SandboxSpec` field each one sets: the field's name, or the name and a conversion of the
keyword's value where the adapter's form differs (a `timedelta`, a string split like a shell
would):

    SPEC_FIELDS = MappingProxyType({
        "image": "image",
        "timeout": ("lifetime", validation.idle_lifetime),
    })

`spec_from_keywords(SPEC_FIELDS, values, Adapter)` builds the spec from the keywords' values;
`Adapter`'s signature (a class: its constructor's; a dataclass: its fields') gives each keyword's
default, to tell which ones the caller set. With `spec=` the keywords left at their defaults give
way to it, and one the caller set so that it describes the sandbox differently raises
`ConfigurationError` naming both, so no value is dropped silently. `None` for a mapping or
sequence field (`metadata`, `volumes`, ...) means empty.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from . import _validate
from ._config import SandboxSpec

__all__ = ["SpecTable", "keyword_defaults", "spec_from_keywords"]

_FIELDS: Final = tuple(f.name for f in dataclasses.fields(SandboxSpec))
_EMPTY_WHEN_NONE: Final = frozenset({"container_env", "metadata", "volumes", "extensions"})


SpecTable = Mapping[str, str | tuple[str, Callable[[Any], Any]]]
"""An adapter's keyword -> the `SandboxSpec` field it sets, or (that field, a conversion that
checks the keyword's value and turns it into the field's)."""


def _same(a: object, b: object) -> bool:
    """Equal as descriptions: mappings by their items, sequences (not strings) by their items."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return dict(a) == dict(b)
    if isinstance(a, Sequence) and isinstance(b, Sequence):
        return a == b if isinstance(a, str) or isinstance(b, str) else list(a) == list(b)
    return a == b


@functools.lru_cache(maxsize=64)
def keyword_defaults(owner: Callable[..., object]) -> Mapping[str, object]:
    """Each keyword's default in `owner`'s signature (a class: its constructor's; a dataclass:
    its fields'), for `spec_from_keywords` to tell which keywords a caller set."""
    return MappingProxyType(
        {
            name: parameter.default
            for name, parameter in inspect.signature(owner).parameters.items()
            if parameter.default is not inspect.Parameter.empty
        }
    )


def spec_from_keywords(
    table: SpecTable,
    values: Mapping[str, object],
    owner: Callable[..., object],
    *,
    spec: SandboxSpec | None = None,
    labels: Mapping[str, str] | None = None,
) -> SandboxSpec:
    """The `SandboxSpec` an adapter's keywords describe (checked, no I/O).

    `table`: each keyword describing a new sandbox -> its `SandboxSpec` field, or (the field, a
    conversion of the value); `values`: the keywords as called (defaults included; names not in
    `table` are ignored); `owner`: the class or function declaring the keywords, whose signature
    gives their defaults (to tell which ones the caller set); `spec`: a spec given beside them;
    `labels`: metadata the adapter adds over the caller's.
    """
    entries = _validate.spec_table(table, _FIELDS)
    defaults = keyword_defaults(owner)
    names = {kw: name for kw, (name, _) in entries.items()}
    converted: dict[str, Any] = {}
    for keyword, value in values.items():
        if keyword in entries:
            convert = entries[keyword][1]
            converted[keyword] = convert(value) if convert else value
    if spec is None:
        fields = {names[kw]: v for kw, v in converted.items()}
        built = SandboxSpec(
            **{k: v for k, v in fields.items() if not (v is None and k in _EMPTY_WHEN_NONE)}
        )
    else:
        _validate.instance(spec, SandboxSpec, "spec", "an opensandbox_core.SandboxSpec")
        chosen = [kw for kw in converted if not _same(values[kw], defaults.get(kw, ...))]
        disagreeing = {
            kw: names[kw]
            for kw in chosen
            if not _same(converted[kw], getattr(spec, names[kw]))
            and not (converted[kw] is None and names[kw] in _EMPTY_WHEN_NONE)
        }
        _validate.spec_keywords(disagreeing)
        built = spec
    if labels:
        built = dataclasses.replace(built, metadata={**built.metadata, **labels})
    return built
