"""One description of a sandbox: the image defaults the core applies at create, and an adapter's
keyword table turned into a `SandboxSpec` (conversions, `spec=` beside keywords, labels)."""

from __future__ import annotations

from datetime import timedelta
from types import MappingProxyType

import pytest

from opensandbox_core import ConfigurationError, SandboxSpec, Volume
from opensandbox_core._create import create_arguments
from opensandbox_core.adapters import default_entrypoint, spec_from_keywords
from opensandbox_core.validation import idle_lifetime

TABLE = MappingProxyType(
    {
        "image": "image",
        "timeout": ("lifetime", idle_lifetime),
        "metadata": "metadata",
        "volumes": "volumes",
        "entrypoint": "entrypoint",
    }
)
DEFAULTS = {
    "image": "default:1",
    "timeout": timedelta(minutes=30),
    "metadata": None,
    "volumes": (),
    "entrypoint": None,
}


def adapter(
    *,
    image: str = "default:1",
    timeout: timedelta | None = timedelta(minutes=30),
    metadata: dict[str, str] | None = None,
    volumes: tuple[Volume, ...] = (),
    entrypoint: list[str] | None = None,
) -> None:
    """The adapter whose signature declares the keywords of `TABLE` and their defaults."""


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("opensandbox/code-interpreter:v1.1.0", ["/opt/code-interpreter/code-interpreter.sh"]),
        (
            "docker.io/opensandbox/code-interpreter:v1.1.0",
            ["/opt/code-interpreter/code-interpreter.sh"],
        ),
        (
            "localhost:5000/opensandbox/code-interpreter:v1.0.2",
            ["/opt/opensandbox/code-interpreter.sh"],
        ),
        ("opensandbox/code-interpreter:v1.0.1", ["/opt/opensandbox/code-interpreter.sh"]),
        ("python:3.13-slim", ["tail", "-f", "/dev/null"]),
        ("ubuntu", ["tail", "-f", "/dev/null"]),
        ("localhost:5000/python:3.13", ["tail", "-f", "/dev/null"]),
        ("myorg/code-interpreter:v1.1.0", ["tail", "-f", "/dev/null"]),
    ],
)
def test_the_entrypoint_follows_the_image_and_tag(image: str, expected: list[str]) -> None:
    assert default_entrypoint(image) == expected
    # What the core sends at create for a spec that names no entrypoint, whoever built it.
    assert create_arguments(SandboxSpec(image=image), {})["entrypoint"] == expected


@pytest.mark.parametrize(
    "image",
    [
        "opensandbox/code-interpreter:latest",
        "opensandbox/code-interpreter",
        "opensandbox/code-interpreter@sha256:" + "a" * 64,
    ],
)
def test_unknown_code_interpreter_tags_run_whichever_script_is_there(image: str) -> None:
    argv = default_entrypoint(image)
    assert argv[:2] == ["/bin/sh", "-c"]
    assert "/opt/code-interpreter/code-interpreter.sh" in argv[2]
    assert "/opt/opensandbox/code-interpreter.sh" in argv[2]


def test_a_given_entrypoint_wins_and_container_env_reaches_the_create() -> None:
    spec = SandboxSpec(
        image="opensandbox/code-interpreter:v1.1.0",
        entrypoint=["sleep", "1"],
        container_env={"A": "1"},
    )
    arguments = create_arguments(spec, {"k": "v"})
    assert (arguments["entrypoint"], arguments["env"]) == (["sleep", "1"], {"A": "1"})


def test_keywords_become_the_spec_through_the_table() -> None:
    values = {**DEFAULTS, "image": "python:3.13-slim", "timeout": 0, "other": "ignored"}
    spec = spec_from_keywords(TABLE, values, adapter, labels={"adapter": "x"})
    assert spec.image == "python:3.13-slim"
    assert spec.lifetime is None  # converted: 0 is "no limit"
    assert dict(spec.metadata) == {"adapter": "x"}  # None is empty, labels added
    assert spec.volumes == ()
    defaults_only = spec_from_keywords(TABLE, DEFAULTS, adapter)
    assert (defaults_only.image, defaults_only.lifetime) == ("default:1", 1800.0)


def test_a_spec_beside_agreeing_keywords() -> None:
    given = SandboxSpec(image="python:3.13-slim", lifetime=600, metadata={"team": "a"})
    # Keywords at their defaults give way; keywords equal to the spec's values are fine.
    same = {**DEFAULTS, "timeout": timedelta(minutes=10), "metadata": {"team": "a"}}
    spec = spec_from_keywords(TABLE, same, adapter, spec=given, labels={"adapter": "x"})
    assert (spec.image, spec.lifetime) == ("python:3.13-slim", 600)
    assert dict(spec.metadata) == {"team": "a", "adapter": "x"}
    assert spec_from_keywords(TABLE, {**DEFAULTS, "volumes": []}, adapter, spec=given) is given


@pytest.mark.parametrize(
    ("keyword", "value", "field"),
    [
        ("image", "debian:12", "image"),
        ("timeout", 60, "lifetime"),
        ("timeout", None, "lifetime"),
        ("metadata", {"team": "b"}, "metadata"),
        ("volumes", [Volume("v", "/mnt/v", claim_name="c")], "volumes"),
        ("entrypoint", ["sleep", "1"], "entrypoint"),
    ],
)
def test_a_keyword_that_disagrees_with_the_spec_is_refused(
    keyword: str, value: object, field: str
) -> None:
    given = SandboxSpec(image="python:3.13-slim", lifetime=600)
    with pytest.raises(ConfigurationError, match=rf"spec= and {keyword}= \(the spec's {field}\)"):
        spec_from_keywords(TABLE, {**DEFAULTS, keyword: value}, adapter, spec=given)


def test_bad_tables_and_specs_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="spec field of keyword 'timeout'"):
        spec_from_keywords({"timeout": "lifetme"}, DEFAULTS, adapter)
    with pytest.raises(ConfigurationError, match="spec field of keyword 'timeout'"):
        spec_from_keywords({"timeout": ("lifetme", idle_lifetime)}, DEFAULTS, adapter)
    with pytest.raises(ConfigurationError, match="SandboxSpec"):
        spec_from_keywords(TABLE, DEFAULTS, adapter, spec={"image": "x"})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="timeout"):  # converted with the keyword's name
        spec_from_keywords(TABLE, {**DEFAULTS, "timeout": -1}, adapter)
