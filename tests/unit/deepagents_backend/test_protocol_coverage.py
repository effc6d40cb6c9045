"""Every backend class the package exports implements every operation of Deep Agents' sandbox
protocol itself, sync and async: none is inherited from deepagents (BaseSandbox's defaults run
`python3 -c` scripts through `execute`, which an image without python3 cannot run).

The protocol's operations are read from the installed deepagents' public classes
(`BackendProtocol`, `SandboxBackendProtocol`, `BaseSandbox`): every public method and property
they define, so an operation a new release adds is checked without editing this test. Runs at
both ends of the supported range (`nox -s deepagents`).
"""

from __future__ import annotations

import inspect

import pytest
from deepagents.backends.protocol import BackendProtocol
from deepagents.backends.sandbox import BaseSandbox

import deepagents_opensandbox_backend

PACKAGE = deepagents_opensandbox_backend.__name__


def protocol_operations() -> set[str]:
    """The public methods and properties defined by BaseSandbox and the protocols it implements."""
    names = set()
    for cls in BaseSandbox.__mro__:
        if cls is object:
            continue
        for name, value in vars(cls).items():
            if name.startswith("_"):
                continue
            if inspect.isfunction(value) or isinstance(value, property | classmethod):
                names.add(name)
    return names


def exported_backends() -> list[type]:
    found = []
    for name in deepagents_opensandbox_backend.__all__:
        if name == "OpenSandboxProvider":
            continue  # deepagents-code's provider: not a backend, and an optional dependency
        value = getattr(deepagents_opensandbox_backend, name)
        if inspect.isclass(value) and issubclass(value, BackendProtocol):
            found.append(value)
    return found


def owner(cls: type, name: str) -> type:
    """The class in `cls`'s MRO whose body defines `name`."""
    return next(k for k in cls.__mro__ if name in vars(k))


def test_the_protocol_is_read_from_the_installed_release() -> None:
    operations = protocol_operations()
    # The operations of every supported release (0.7.30 on), sync and async.
    expected = {"ls", "read", "write", "edit", "glob", "grep", "delete"}
    expected |= {"upload_files", "download_files", "execute", "execute_with_offload"}
    assert {n for n in expected} | {"a" + n for n in expected} | {"id"} <= operations


def test_the_package_exports_its_backends() -> None:
    names = {cls.__name__ for cls in exported_backends()}
    assert {"OpenSandboxBackend", "ThreadSandboxBackend", "TimeTravelSandboxBackend"} <= names


def inherited_operations(cls: type) -> dict[str, str]:
    """The protocol operations `cls` takes from a class outside the package, by owner."""
    inherited = {}
    for name in sorted(protocol_operations()):
        source = owner(cls, name)
        if not source.__module__.startswith(PACKAGE + "."):
            inherited[name] = source.__qualname__
    return inherited


@pytest.mark.parametrize("cls", exported_backends(), ids=lambda c: c.__name__)
def test_no_operation_is_inherited_from_deepagents(cls: type) -> None:
    inherited = inherited_operations(cls)
    assert inherited == {}, f"{cls.__name__} inherits these from deepagents: {inherited}"


def test_the_check_catches_an_inherited_operation() -> None:
    class Bare(BaseSandbox):
        pass

    assert {"ls", "als", "grep", "agrep", "execute_with_offload"} <= set(inherited_operations(Bare))
