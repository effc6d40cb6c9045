"""The unit tier's order: its longest tests first, so that the xdist workers end together.

Otherwise the order is the files' (stable). The tier's workers take tests in this order and
steal from each other at the end (`--dist worksteal` in noxfile.py), so a long test left for
the end would be run alone while the other worker has nothing left to do.
"""

from __future__ import annotations

import pytest

FIRST = (
    # a second or more of CPU or of waiting each (`--durations` on 2 cores), longest first
    "test_repo_rules.py::test_no_private_name_of_another_package_and_no_exec_of_its_source",
    "core/test_line_pages.py::test_sequential_pages_come_from_a_few_large_reads",
    "deepagents_backend/test_grep_port.py::test_grep_equals_base_sandboxs",
    "core/test_terminal_offline.py::test_keep_alive_against_the_silence_rule",
    "core/test_line_pages.py::test_windows_held_stay_within_the_budget",
    "core/test_facet_wire.py::test_a_server_that_never_answers_fails_in_the_time_the_message_says",
    "core/test_offline_session.py::test_timeout_interrupts_a_command_the_daemon_did_not_stop",
    "core/test_pool_offline.py::test_acquire_",
    "test_repo_rules.py::test_the_core_names_no_framework",
    "test_size_rules.py::",
    "core/test_terminal_offline.py::test_a_dropped_connection_is_made_again",
    "core/test_sandbox_caches.py::test_forget_while_other_threads_fill_the_cache",
    "core/test_create_guard.py::test_a_create_that_never_becomes_usable_is_deleted",
    "test_repo_rules.py::test_dependency_direction",
    "test_repo_rules.py::test_argument_checks_live_in_validate",
    "hostile/",
)


def _rank(item: pytest.Item) -> int:
    node = item.nodeid.removeprefix("tests/unit/")
    return next((i for i, prefix in enumerate(FIRST) if node.startswith(prefix)), len(FIRST))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_rank)
