"""The live suite's skip rules (tests/live/conftest.py), run offline on stand-in test items.

A test marked `testbed_daemon(*names)` asks its sandboxes for an execd generation through their
OSB_EXECD_PROFILE, which only the testbed's own daemon obeys: it runs on that daemon, and on
another execd image only when the run's profile is one of `names`; else it is skipped with the
reason. `execd_profiles(*names)` follows the run's profile alone.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

LIVE_CONFTEST = Path(__file__).resolve().parents[1] / "live" / "conftest.py"
OWN = "opensandbox-agents/testbed-execd:local"
REAL = "opensandbox/execd:v1.0.19"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("live_conftest_under_test", LIVE_CONFTEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


live = _load()


class StandInItem:
    """What the hook reads of a `pytest.Item`: its path, id and markers; what it adds."""

    def __init__(self, name: str, *marks: pytest.MarkDecorator) -> None:
        self.path = LIVE_CONFTEST.parent / "core" / "test_x.py"
        self.nodeid = f"tests/live/core/test_x.py::{name}"
        self.own_marks = [m.mark for m in marks]

    def iter_markers(self, name: str | None = None) -> Iterator[pytest.Mark]:
        return (m for m in self.own_marks if name is None or m.name == name)

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return next(self.iter_markers(name), None)

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.own_marks.append(marker.mark)

    def skipped(self) -> str | None:
        mark = self.get_closest_marker("skip")
        return None if mark is None else str(mark.kwargs["reason"])


def _collect(
    monkeypatch: pytest.MonkeyPatch, image: str | None, profile: str, *items: StandInItem
) -> None:
    monkeypatch.setenv("OPEN_SANDBOX_DOMAIN", "127.0.0.1:9")
    monkeypatch.setenv("OSB_EXECD_PROFILE", profile)
    if image is None:
        monkeypatch.delenv("OSB_TESTBED_EXECD_IMAGE", raising=False)
        # .testbed/env would give the shared testbed's image: read nothing from it.
        monkeypatch.setattr(live, "read_env_file", lambda path: {})
    else:
        monkeypatch.setenv("OSB_TESTBED_EXECD_IMAGE", image)
    items_any: Any = list(items)
    live.pytest_collection_modifyitems(None, items_any)


def test_own_name_matches_the_testbed() -> None:
    """The conftest knows the testbed's images by the names the testbed builds them under: the
    shared tag and the tag of one build's input hash (`testbed run` pins that one)."""
    assert live.is_testbed_execd(OWN)
    assert live.is_testbed_execd("opensandbox-agents/testbed-execd:5afe7caced884251")
    assert not live.is_testbed_execd(REAL)
    assert not live.is_testbed_execd(None)


def test_on_the_testbed_daemon_every_marked_test_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    ancient = StandInItem("ancient", pytest.mark.testbed_daemon("1.0.16"))
    modern = StandInItem("modern", pytest.mark.testbed_daemon("1.1"))
    plain = StandInItem("plain")
    _collect(monkeypatch, OWN, "1.0.19", ancient, modern, plain)
    assert [i.skipped() for i in (ancient, modern, plain)] == [None, None, None]
    assert all(i.get_closest_marker("live") is not None for i in (ancient, modern, plain))


def test_on_a_real_image_only_the_named_profile_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    v18 = StandInItem("v18", pytest.mark.testbed_daemon("1.0.18"))
    v19 = StandInItem("v19", pytest.mark.testbed_daemon("1.0.19"))
    both = StandInItem("both", pytest.mark.testbed_daemon("1.0.19", "1.0.18"))
    feature = StandInItem("feature", pytest.mark.testbed_daemon())
    plain = StandInItem("plain")
    _collect(monkeypatch, REAL, "1.0.19", v18, v19, both, feature, plain)
    assert (v19.skipped(), both.skipped(), plain.skipped()) == (None, None, None)
    reason = v18.skipped()
    assert reason is not None
    assert "needs the testbed's own execd (execd profile 1.0.18" in reason
    assert f"the sandboxes run the execd image {REAL}, taken as profile 1.0.19" in reason
    assert "a feature of it" in str(feature.skipped())


def test_a_real_image_named_as_1_0_18_runs_the_1_0_18_tests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    v18 = StandInItem("v18", pytest.mark.testbed_daemon("1.0.18"))
    v19 = StandInItem("v19", pytest.mark.testbed_daemon("1.0.19"))
    both = StandInItem("both", pytest.mark.testbed_daemon("1.0.19", "1.0.18"))
    _collect(monkeypatch, "opensandbox/execd:v1.0.18", "1.0.18", v18, v19, both)
    assert (v18.skipped(), both.skipped()) == (None, None)
    assert "execd profile 1.0.19" in str(v19.skipped())


def test_an_unnamed_daemon_is_not_taken_for_the_testbed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without OSB_TESTBED_EXECD_IMAGE nobody says what the sandboxes run: the switch is not
    relied on (a test would otherwise pass or fail by chance)."""
    modern = StandInItem("modern", pytest.mark.testbed_daemon("1.1"))
    _collect(monkeypatch, None, "1.0.19", modern)
    assert "OSB_TESTBED_EXECD_IMAGE unset" in str(modern.skipped())


def test_execd_profiles_follows_the_run_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    only_18 = StandInItem("only_18", pytest.mark.execd_profiles("1.0.18"))
    only_19 = StandInItem("only_19", pytest.mark.execd_profiles("1.0.19", "1.1"))
    _collect(monkeypatch, REAL, "1.0.19", only_18, only_19)
    assert only_19.skipped() is None
    assert str(only_18.skipped()) == (
        "applies to execd profile(s) 1.0.18 only; this run's profile is 1.0.19"
    )


def test_an_unknown_profile_in_a_marker_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    typo = StandInItem("typo", pytest.mark.testbed_daemon("1.0.81"))
    with pytest.raises(pytest.UsageError, match=r"unknown execd profile\(s\) 1\.0\.81"):
        _collect(monkeypatch, OWN, "1.0.19", typo)


def test_start_restarts_the_server_when_osb_execd_image_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`testbed start` on a running testbed keeps it only when OSB_EXECD_IMAGE is the one its
    server was started with: else the sandboxes (and .testbed/env) would keep the old daemon."""
    from testbed import _control

    monkeypatch.setenv("OSB_EXECD_IMAGE", REAL)
    assert _control._execd_image_change({"execd_asked": REAL}) is None
    change = _control._execd_image_change({"execd_image": OWN})
    assert change == f"the server was started with OSB_EXECD_IMAGE=(unset), now it is {REAL}"
    monkeypatch.delenv("OSB_EXECD_IMAGE")
    assert _control._execd_image_change({}) is None
    assert "now it is (unset)" in str(_control._execd_image_change({"execd_asked": REAL}))


def test_a_multi_profile_integration_run_repeats_no_self_profiled_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`nox -s integration` over several profiles: a test whose sandboxes pick their own
    generation runs in the run of its profile only (1.0.16, which no run has, in the first)."""
    runs = ["1.0.19", "1.0.18", "1.1"]
    skip = live.integration_repeat_skip
    assert [skip(["1.1"], profile=p, profiles_run=runs) is None for p in runs] == [
        False,
        False,
        True,
    ]
    assert [skip(["1.0.16"], profile=p, profiles_run=runs) is None for p in runs] == [
        True,
        False,
        False,
    ]
    assert [skip(["1.0.19", "1.0.18"], profile=p, profiles_run=runs) is None for p in runs] == [
        True,
        True,
        False,
    ]
    assert all(skip([], profile=p, profiles_run=runs) is None for p in runs)
    assert skip(["1.1"], profile="1.0.19", profiles_run=["1.0.19"]) is None  # one profile: all run
    assert "1.1 run" in str(skip(["1.1"], profile="1.0.19", profiles_run=runs))
    monkeypatch.setenv("OSB_INTEGRATION_PROFILES", "1.0.19,1.1")
    assert live.integration_profiles() == ["1.0.19", "1.1"]


def test_a_daemon_neutral_test_runs_in_the_first_profile_run_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`daemon_neutral` tests (server API, transport, doctor, lifecycle rules) run once in a
    multi-profile integration session, in its first run; a one-profile run runs them."""
    monkeypatch.setenv("OSB_INTEGRATION_PROFILES", "1.0.19,1.0.18,1.1")
    runs = []
    for profile in ("1.0.19", "1.0.18", "1.1"):
        neutral = StandInItem("neutral", pytest.mark.daemon_neutral)
        plain = StandInItem("plain")
        _collect(monkeypatch, OWN, profile, neutral, plain)
        assert plain.skipped() is None
        runs.append(neutral.skipped())
    assert runs[0] is None
    assert runs[1] == runs[2]
    assert "runs in this session's first profile run (1.0.19)" in str(runs[1])
    monkeypatch.setenv("OSB_INTEGRATION_PROFILES", "1.0.18")
    alone = StandInItem("alone", pytest.mark.daemon_neutral)
    _collect(monkeypatch, OWN, "1.0.18", alone)
    assert alone.skipped() is None
