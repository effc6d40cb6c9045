"""Fixtures of the Deep Agents backend's live tests: a sandbox from the seed's default image."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deepagents_opensandbox_backend import OpenSandboxBackend

_GLOB_DRIFT = (
    "langchain-tests 1.1.9 predates deepagents 0.7: it expects glob to give names relative to "
    "the searched folder, and deepagents 0.7's BaseSandbox.glob gives absolute paths"
)
_WRITE_DRIFT = (
    "langchain-tests 1.1.9 predates deepagents 0.7: it expects write() of an existing file to "
    "fail, and deepagents 0.7's BaseSandbox.write overwrites it"
)
# Strict: a drift test that starts passing (a new deepagents or langchain-tests) fails the run,
# so the list is kept true. Checked on deepagents 0.7.32: all 7 fail, for these reasons.
DRIFT_TESTS = {
    "test_glob": _GLOB_DRIFT,
    "test_glob_basic_pattern": _GLOB_DRIFT,
    "test_glob_hidden_files_explicitly": _GLOB_DRIFT,
    "test_glob_with_directories": _GLOB_DRIFT,
    "test_glob_with_character_class": _GLOB_DRIFT,
    "test_glob_with_question_mark": _GLOB_DRIFT,
    "test_write_existing_file_fails": _WRITE_DRIFT,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        reason = DRIFT_TESTS.get(item.originalname)
        if item.path.name == "test_standard_suite.py" and reason is not None:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True, raises=AssertionError))


@pytest.fixture(scope="module")
def backend(testbed_env: dict[str, str]) -> Iterator[OpenSandboxBackend]:
    """A sandbox created the way the README does it (default image, key from the environment)."""
    with OpenSandboxBackend.create() as created:
        yield created
