"""Live tests: they run against the testbed (`nox -s testbed -- start`, or `nox -s integration`).

Every test under tests/live is marked `live`. When OPEN_SANDBOX_DOMAIN is unset, the settings are
read from `.testbed/env`. No answering testbed is an error, not a skip.
"""

from __future__ import annotations

import os
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from testbed import ENV_FILE, read_env_file

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


def execd_profile() -> str:
    """The execd generation profile that this run's sandboxes get (env, else `.testbed/env`)."""
    return (
        os.environ.get("OSB_EXECD_PROFILE")
        or read_env_file(ENV_FILE).get("OSB_EXECD_PROFILE")
        or "1.0.19"
    )


def pytest_report_header(config: pytest.Config) -> str:
    return f"execd profile: {execd_profile()} (OSB_EXECD_PROFILE)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    profile = execd_profile()
    for item in items:
        if str(item.path).startswith(_HERE + os.sep):
            item.add_marker(pytest.mark.live)
        marker = item.get_closest_marker("execd_profiles")
        if marker is not None and profile not in marker.args:
            item.add_marker(
                pytest.mark.skip(
                    reason=f"applies to execd profile(s) {', '.join(marker.args)} only; "
                    f"this run's profile is {profile}"
                )
            )


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
