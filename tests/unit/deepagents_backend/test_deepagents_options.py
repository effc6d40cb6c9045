"""The Deep Agents backend's one options object: the public signatures it gives, its checks before
any I/O, secrets kept out of reprs, and the stderr marking of `execute()`'s output."""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import fields
from datetime import timedelta
from pathlib import Path

import pytest

from deepagents_opensandbox_backend import DEFAULT_IMAGE, OpenSandboxBackend, ThreadSandboxBackend
from deepagents_opensandbox_backend._options import AttachOptions, SandboxOptions, ThreadOptions
from deepagents_opensandbox_backend._run import combined_output
from opensandbox_core import ConfigurationError, EgressRule, NetworkPolicy, SandboxSpec, Volume
from opensandbox_core._files._upload import upload_directory
from opensandbox_core._metadata import ADAPTER_KEY

pytestmark = pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")

SEED_DEFAULTS = {  # seed 000's parameter table of create()
    "domain": None,
    "image": DEFAULT_IMAGE,
    "entrypoint": None,
    "api_key": None,
    "use_server_proxy": False,
    "timeout": timedelta(minutes=30),
}


def _params(function: object) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(function).parameters)  # type: ignore[arg-type]


def test_create_and_acreate_keep_the_seed_signature() -> None:
    for create in (OpenSandboxBackend.create, OpenSandboxBackend.acreate):
        params = _params(create)
        assert list(params)[:6] == list(SEED_DEFAULTS)
        assert {name: params[name].default for name in SEED_DEFAULTS} == SEED_DEFAULTS
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
        assert set(params) == {f.name for f in fields(SandboxOptions)}
    assert inspect.iscoroutinefunction(OpenSandboxBackend.acreate)
    assert not inspect.iscoroutinefunction(OpenSandboxBackend.create)
    assert inspect.iscoroutinefunction(OpenSandboxBackend.aconnect)


def test_connect_and_threads_take_their_options() -> None:
    for connect in (OpenSandboxBackend.connect, OpenSandboxBackend.aconnect):
        params = _params(connect)
        assert next(iter(params)) == "sandbox_id"
        assert set(params) - {"sandbox_id"} == {f.name for f in fields(AttachOptions)}
        assert params["timeout"].default is None  # attaching keeps the creator's lifetime
    params = _params(ThreadSandboxBackend)
    assert set(params) == {f.name for f in fields(ThreadOptions)}
    assert params["namespace"].default == "default"


def test_bad_options_fail_before_any_io() -> None:
    with pytest.raises(ValueError, match="absolute"):
        OpenSandboxBackend.create(working_dir="relative", domain="127.0.0.1:9")
    with pytest.raises(ConfigurationError, match="not both"):
        asyncio.run(
            OpenSandboxBackend.acreate(
                domain="127.0.0.1:9",
                allow_internet_access=False,
                network_policy=NetworkPolicy(egress=[EgressRule("allow", "pypi.org")]),
            )
        )
    with pytest.raises(ConfigurationError, match="timeout"):
        OpenSandboxBackend.connect("sbx", timeout=-1, domain="127.0.0.1:9")
    with pytest.raises(TypeError, match="stderr_prefix"):
        SandboxOptions(stderr_prefix=b"x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="namespace"):
        ThreadSandboxBackend(namespace="no spaces")
    with pytest.raises(ConfigurationError, match="volumes"):
        SandboxOptions(volumes=["/host:/mnt"])  # type: ignore[list-item]


def test_options_build_the_core_spec_and_hide_secrets() -> None:
    options = SandboxOptions(
        api_key="sk-hidden-key",
        env={"TOKEN": "hidden-token"},
        image="python:3.13-slim",
        metadata={"team": "a"},
        volumes=[Volume("data", "/mnt/data", claim_name="shared")],
        timeout=0,
    )
    spec = options.sandbox_spec({"extra": "b"})
    assert dict(spec.metadata) == {"team": "a", "extra": "b", ADAPTER_KEY: "deepagents"}
    assert spec.lifetime is None  # 0 is the seed's "no limit"
    assert spec.entrypoint is None  # the image's own, picked by the core at create
    assert [v.name for v in spec.volumes] == ["data"]
    assert spec.container_env == {}  # env is every command's, not the container's
    assert "sk-hidden-key" not in repr(options) and "hidden-token" not in repr(options)
    session = options.create()
    assert session.id is None and session.spec is not None  # built, nothing sent
    assert session.env == {"TOKEN": "hidden-token"}


def test_a_string_entrypoint_is_split_like_a_shell_would() -> None:
    options = SandboxOptions(entrypoint="/opt/custom.sh --flag 'a b'")
    assert list(options.sandbox_spec().entrypoint or ()) == ["/opt/custom.sh", "--flag", "a b"]
    assert SandboxOptions(entrypoint=["tail", "-f"]).sandbox_spec().entrypoint == ["tail", "-f"]
    with pytest.raises(ValueError, match="empty"):
        SandboxOptions(entrypoint="  ")


@pytest.mark.parametrize(
    ("stdout", "stderr", "expected"),
    [
        ("out\n", "err\n", "out\n! err\n"),
        ("out", "e1\ne2", "out\n! e1\n! e2"),
        ("", "only\n\n", "! only\n! \n"),
        ("out\n", "", "out\n"),
    ],
)
def test_stderr_marking(stdout: str, stderr: str, expected: str) -> None:
    assert combined_output(stdout, stderr, "! ") == expected
    assert combined_output(stdout, stderr, None) == stdout + stderr  # the default: as printed


class _Recorder:
    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, int | None]] = {}
        self.dirs: list[str] = []

    async def make_dir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None:
        self.dirs.append(path)

    async def write_bytes(
        self, path: str, data: object, *, mode: int | None = None, timeout: float | None = None
    ) -> None:
        assert isinstance(data, bytes)
        self.files[path] = (data, mode)


def test_upload_rules_offline(tmp_path: Path) -> None:
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "a.py").write_text("a")
    (tmp_path / "keep" / "secrets.key").write_text("k")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "x.js").write_text("x")
    (tmp_path / "nested" / ".gnupg").mkdir(parents=True)
    (tmp_path / "nested" / ".gnupg" / "k").write_text("k")
    writer = _Recorder()
    report = asyncio.run(upload_directory(writer, tmp_path, "/r", exclude=["node_modules/"]))
    assert set(writer.files) == {"/r/keep/a.py"}
    assert writer.files["/r/keep/a.py"][0] == b"a"
    assert report.skipped == {
        "keep/secrets.key": "secret",
        "nested/.gnupg/": "secret",
        "node_modules/": "excluded",
    }
    assert "/r/nested" in writer.dirs  # left empty by the skip: still created


def test_a_spec_describes_the_sandbox_instead_of_the_keywords() -> None:
    given = SandboxSpec(image="python:3.13-slim", lifetime=None, secure_access=True)
    options = SandboxOptions(spec=given, env={"A": "1"}, timeout=0)  # 0 and None agree
    session = options.create({"label": "x"})
    assert session.spec is not None and session.spec.secure_access
    assert (session.spec.image, session.spec.lifetime) == ("python:3.13-slim", None)
    assert dict(session.spec.metadata) == {ADAPTER_KEY: "deepagents", "label": "x"}
    assert session.env == {"A": "1"}
    # A keyword that describes the sandbox differently is refused before any I/O.
    with pytest.raises(ValueError, match=r"spec= and timeout= \(the spec's lifetime\)"):
        OpenSandboxBackend.create(spec=given, timeout=60, domain="127.0.0.1:9")
    with pytest.raises(ValueError, match=r"spec= and image= \(the spec's image\)"):
        ThreadSandboxBackend(spec=given, image="debian:12")
