"""Fixtures of the Deep Agents backend's live tests: a sandbox from the seed's default image."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deepagents_opensandbox_backend import OpenSandboxBackend

DRIFT_REASON = (
    "langchain-tests 1.1.9 predates deepagents 0.7: glob now returns absolute file paths only, "
    "and write() overwrites; fails for every BaseSandbox"
)
DRIFT_TESTS = frozenset(
    {
        "test_glob",
        "test_glob_basic_pattern",
        "test_glob_hidden_files_explicitly",
        "test_glob_with_directories",
        "test_glob_with_character_class",
        "test_glob_with_question_mark",
        "test_write_existing_file_fails",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name == "test_standard_suite.py" and item.originalname in DRIFT_TESTS:
            item.add_marker(pytest.mark.xfail(reason=DRIFT_REASON, strict=False))


@pytest.fixture(scope="module")
def backend(testbed_env: dict[str, str]) -> Iterator[OpenSandboxBackend]:
    """A sandbox created the way the README does it (default image, key from the environment)."""
    with OpenSandboxBackend.create() as created:
        yield created
