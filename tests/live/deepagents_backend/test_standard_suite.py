"""The LangChain standard sandbox suite (langchain-tests 1.1.9) against a live sandbox.

The 7 tests that predate deepagents 0.7 are marked xfail (strict, with the reason) in this
folder's conftest.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_tests.integration_tests import SandboxIntegrationTests

from deepagents_opensandbox_backend import OpenSandboxBackend


class TestOpenSandboxStandard(SandboxIntegrationTests):
    @pytest.fixture(scope="class")
    def sandbox(self, testbed_env: dict[str, str]) -> Iterator[OpenSandboxBackend]:
        with OpenSandboxBackend.create() as backend:
            yield backend
