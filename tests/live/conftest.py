"""Live tests: they run against the testbed (`nox -s testbed -- start`, or `nox -s integration`).

Every test under tests/live is marked `live`. When OPEN_SANDBOX_DOMAIN is unset, the settings are
read from `.testbed/env`. No answering testbed is an error, not a skip.

Two markers say what a test needs of the sandboxes' execd (see docs/testbed.md):
- `execd_profiles(*names)`: this run's profile (`--profile`, `OSB_EXECD_PROFILE` in
  `.testbed/env`) must be one of `names`.
- `testbed_daemon(*names)`: the test's sandboxes ask for a generation with
  `container_env={"OSB_EXECD_PROFILE": ...}` (or use another feature of the testbed's own daemon), which
  only the testbed's own daemon obeys. When the sandboxes run another execd image (the testbed
  writes the image they run as OSB_TESTBED_EXECD_IMAGE), such a test runs only if this run's
  profile, the generation the user named for that image, is one of `names`; else it is skipped
  with the reason. When `nox -s integration` runs several profiles in turn (it sets
  OSB_INTEGRATION_PROFILES), a test marked for named profiles runs once, in the run of its own
  profile (a test for a profile no run has, such as 1.0.16, in the first run): on the testbed's
  daemon its sandboxes pick their generation themselves, so the other runs would repeat it.

A third, `daemon_neutral`, marks tests of what no execd generation changes: the server's API, the
transport (TLS, proxies, a server restart, a stalled network), the doctor, secrets in logs,
lifecycle and ownership rules, durable engines. When `nox -s integration` runs several profiles
in turn, such a test runs in the first run only; a run of one profile runs it as usual.
"""

from __future__ import annotations

import os
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence

import pytest

from testbed import ENV_FILE, read_env_file
from testbed._images import is_testbed_execd
from testbed._server import MODELLED_ONLY, PROFILES

KNOWN_PROFILES = PROFILES + MODELLED_ONLY

_HERE = os.path.dirname(os.path.abspath(__file__))
_problem: str | None = None


def _load_testbed_env() -> dict[str, str]:
    if not os.environ.get("OPEN_SANDBOX_DOMAIN"):
        for key, value in read_env_file(ENV_FILE).items():
            os.environ.setdefault(key, value)
    keys = ("OPEN_SANDBOX_DOMAIN", "OPEN_SANDBOX_API_KEY", "OSB_TESTBED_IMAGE")
    env = {k: v for k, v in os.environ.items() if k.startswith(("OPEN_SANDBOX_", "OSB_"))}
    env.setdefault("OPENSANDBOX_DISABLE_METRICS", os.environ.get("OPENSANDBOX_DISABLE_METRICS", ""))
    missing = [k for k in keys if not env.get(k)]
    if missing:
        raise RuntimeError(
            f"no testbed settings: {', '.join(missing)} unset (neither in the environment nor in "
            f"{ENV_FILE}): run `nox -s testbed -- start` first"
        )
    return env


def _check_server(env: dict[str, str]) -> None:
    domain = env["OPEN_SANDBOX_DOMAIN"]
    protocol = env.get("OPEN_SANDBOX_PROTOCOL") or "http"
    url = f"{protocol}://{domain}/health"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - the testbed's URL
            if resp.status == 200:
                return
            raise RuntimeError(f"{url} answered {resp.status}")
    except (urllib.error.URLError, OSError) as exc:
        raise RuntimeError(
            f"no OpenSandbox server answers at {url} ({exc}): "
            "start the testbed with `nox -s testbed -- start`"
        ) from exc


def _setting(name: str) -> str:
    return (os.environ.get(name) or read_env_file(ENV_FILE).get(name) or "").strip()


def execd_profile() -> str:
    """The execd generation profile that this run's sandboxes get (env, else `.testbed/env`)."""
    return _setting("OSB_EXECD_PROFILE") or PROFILES[0]


def sandbox_execd_image() -> str | None:
    """The execd image this run's sandboxes get, as the testbed wrote it (None: not known)."""
    return _setting("OSB_TESTBED_EXECD_IMAGE") or None


def _daemon_words(image: str | None) -> str:
    if image is None:
        return "an execd the testbed did not name (OSB_TESTBED_EXECD_IMAGE unset)"
    return f"the execd image {image}"


def profile_skip(names: Sequence[str], *, profile: str) -> str | None:
    """Why a test marked `execd_profiles(*names)` does not run (None: it runs)."""
    if profile in names:
        return None
    return f"applies to execd profile(s) {', '.join(names)} only; this run's profile is {profile}"


def testbed_daemon_skip(
    names: Sequence[str], *, execd_image: str | None, profile: str
) -> str | None:
    """Why a test marked `testbed_daemon(*names)` does not run on sandboxes that run
    `execd_image` in a run of `profile` (None: it runs).

    The testbed's own daemon obeys a sandbox's OSB_EXECD_PROFILE, so every such test runs on
    it. Another daemon ignores it and behaves as one generation, the run's profile (the one
    the user named with `--profile`): the test then runs only if it holds for that profile.
    """
    if is_testbed_execd(execd_image):
        return None
    if profile in names:
        return None
    wants = f"execd profile {' or '.join(names)}" if names else "a feature of it"
    return (
        f"needs the testbed's own execd ({wants}, chosen by OSB_EXECD_PROFILE in the sandbox's "
        f"env, which another daemon ignores); the sandboxes run {_daemon_words(execd_image)}, "
        f"taken as profile {profile}"
    )


def integration_repeat_skip(
    names: Sequence[str], *, profile: str, profiles_run: Sequence[str]
) -> str | None:
    """Why a `testbed_daemon(*names)` test is left to another run of a multi-profile
    integration session (`profiles_run`, in order) on the testbed's daemon (None: it runs)."""
    if not names or len(profiles_run) < 2:
        return None
    own = [name for name in names if name in profiles_run]
    home = own if own else [profiles_run[0]]
    if profile in home:
        return None
    return (
        f"runs in this session's execd profile {' or '.join(home)} run (its sandboxes pick "
        "their generation themselves on the testbed's daemon)"
    )


def integration_profiles() -> list[str]:
    """The profiles `nox -s integration` runs in turn (OSB_INTEGRATION_PROFILES), if any."""
    value = os.environ.get("OSB_INTEGRATION_PROFILES", "")
    return [name for name in value.split(",") if name]


def daemon_neutral_skip(*, profile: str, profiles_run: Sequence[str]) -> str | None:
    """Why a `daemon_neutral` test is left to another run of a multi-profile integration
    session (`profiles_run`, in order): it runs in the first one only (None: it runs)."""
    if len(profiles_run) < 2 or profile == profiles_run[0]:
        return None
    return (
        f"no execd generation changes what it tests: it runs in this session's first profile "
        f"run ({profiles_run[0]})"
    )


def _checked_names(item: pytest.Item, marker: pytest.Mark) -> tuple[str, ...]:
    names = tuple(str(name) for name in marker.args)
    unknown = [name for name in names if name not in KNOWN_PROFILES]
    if unknown:
        raise pytest.UsageError(
            f"{item.nodeid}: @{marker.name}({', '.join(names)}): unknown execd profile(s) "
            f"{', '.join(unknown)} (known: {', '.join(KNOWN_PROFILES)})"
        )
    return names


def skip_reason(item: pytest.Item, *, execd_image: str | None, profile: str) -> str | None:
    """Why `item` does not run on these sandboxes, by its markers (None: it runs)."""
    for marker in item.iter_markers("execd_profiles"):
        reason = profile_skip(_checked_names(item, marker), profile=profile)
        if reason is not None:
            return reason
    for marker in item.iter_markers("testbed_daemon"):
        names = _checked_names(item, marker)
        reason = testbed_daemon_skip(names, execd_image=execd_image, profile=profile)
        if reason is None and is_testbed_execd(execd_image):
            reason = integration_repeat_skip(
                names, profile=profile, profiles_run=integration_profiles()
            )
        if reason is not None:
            return reason
    if item.get_closest_marker("daemon_neutral") is not None:
        return daemon_neutral_skip(profile=profile, profiles_run=integration_profiles())
    return None


def pytest_report_header(config: pytest.Config) -> list[str]:
    image = sandbox_execd_image()
    lines = [f"execd profile: {execd_profile()} (OSB_EXECD_PROFILE)"]
    if is_testbed_execd(image):
        lines.append(f"execd: the testbed's own daemon ({image})")
    else:
        lines.append(
            f"execd: {_daemon_words(image)}, not the testbed's own daemon: tests marked "
            "testbed_daemon for another profile are skipped"
        )
    asked = os.environ.get("OSB_EXECD_IMAGE", "").strip()
    if asked and asked != image:
        lines.append(
            f"NOTE: OSB_EXECD_IMAGE={asked}, but the sandboxes run {_daemon_words(image)} "
            "(the testbed fell back, or was started before: `nox -s testbed -- restart`)"
        )
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    profile = execd_profile()
    image = sandbox_execd_image()
    for item in items:
        if str(item.path).startswith(_HERE + os.sep):
            item.add_marker(pytest.mark.live)
        reason = skip_reason(item, execd_image=image, profile=profile)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
    # The long tests first (stable otherwise): the workers then end at about the same time
    # instead of one finishing a 40 s test alone at the end.
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(scope="session")
def testbed_env() -> dict[str, str]:
    """The testbed's connection settings (OPEN_SANDBOX_*, OSB_TESTBED_*); fails when none answers."""
    global _problem
    if _problem:
        pytest.fail(_problem, pytrace=False)
    try:
        env = _load_testbed_env()
        _check_server(env)
    except RuntimeError as exc:
        _problem = str(exc)
    if _problem:
        pytest.fail(_problem, pytrace=False)
    os.environ.setdefault("OPENSANDBOX_DISABLE_METRICS", "1")
    return env


@pytest.fixture(scope="session")
def sandbox_image(testbed_env: dict[str, str]) -> str:
    """The image to create sandboxes from (the testbed's Debian image)."""
    return testbed_env["OSB_TESTBED_IMAGE"]


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """Python's own Ctrl-C handler for the test, as an interactive program has it.

    A process started in the background by a shell without job control inherits SIGINT ignored,
    and Python then never raises KeyboardInterrupt: the tests that press Ctrl-C (a SIGINT to the
    main thread) would pass or fail by how the runner was started.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
