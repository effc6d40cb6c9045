"""Output reconstruction from execd event texts, for each framing (LEGACY's rebuild is the
fallback and what streaming callbacks see; the exact LEGACY result comes from execd's raw
output files, tested in test_wire_replay)."""

from __future__ import annotations

import pytest

from opensandbox_core._wire._framing import (
    SUPPORTED_EXECD_IMAGE,
    UPGRADE_EXECD,
    Framing,
    OutputBuffer,
    classify_probe,
    describe,
    rebuild,
    whole_characters,
)


def _legacy_events(output: str) -> list[str]:
    """What execd 1.0.x sends for `output`: one event per line, endings stripped, "\\n" if empty."""
    lines = output.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line if line else "\n" for line in lines]


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (["osb\n\nprobe"], Framing.MODERN),
        (["o", "sb\n", "\npr", "obe"], Framing.MODERN),
        (["osb", "\n", "probe"], Framing.LEGACY),
        (["osb", "probe"], Framing.ANCIENT),
        (["something else"], None),
        ([], None),
    ],
)
def test_classify_probe(texts: list[str], expected: Framing | None) -> None:
    assert classify_probe(texts) is expected


@pytest.mark.parametrize(
    "output",
    ["a\n\nb\n", "\n\n\n", "x\n", "line one\n\n\nline four\n", "é\n\n☃\n", "x" * 70000 + "\n"],
)
def test_legacy_rebuild_is_exact_when_output_ends_with_newline(output: str) -> None:
    rebuilt = "".join(rebuild(Framing.LEGACY, t) for t in _legacy_events(output))
    assert rebuilt == output


def test_legacy_cannot_recover_a_missing_final_newline() -> None:
    # Documented limit: "a\nb" and "a\nb\n" arrive identically; the newline is assumed.
    assert "".join(rebuild(Framing.LEGACY, t) for t in _legacy_events("a\nb")) == "a\nb\n"


def test_modern_rebuild_is_concatenation() -> None:
    chunks = ["a\r\n", "", "\n", "b", "c\n"]
    assert "".join(rebuild(Framing.MODERN, c) for c in chunks) == "a\r\n\nbc\n"


def test_output_buffer_keeps_everything_under_limit() -> None:
    buf = OutputBuffer(limit=10)
    buf.add("abc")
    buf.add("def")
    assert buf.text() == "abcdef"
    assert not buf.truncated


def test_output_buffer_truncates_at_a_character_boundary() -> None:
    buf = OutputBuffer(limit=5)
    buf.add("ab")
    buf.add("€€")  # 3 bytes each: only one fits in the remaining 3 bytes
    buf.add("more")
    assert buf.text() == "ab€"
    assert buf.truncated
    assert buf.total_bytes == 2 + 6 + 4
    assert len(buf.text().encode()) <= 5


def test_output_buffer_memory_is_bounded() -> None:
    buf = OutputBuffer(limit=1024)
    for _ in range(10_000):
        buf.add("x" * 1000)
    assert len(buf.text()) == 1024
    assert buf.total_bytes == 10_000_000


def test_every_generation_is_described_for_users() -> None:
    assert "exact" in describe(Framing.MODERN)
    assert "v1.0.17 to v1.0.19" in describe(Framing.LEGACY)
    assert "v1.0.16 or older" in describe(Framing.ANCIENT)


def test_upgrade_advice_names_a_real_tag_pattern() -> None:
    assert SUPPORTED_EXECD_IMAGE == "opensandbox/execd:v1.0.19"
    assert f'execd_image = "{SUPPORTED_EXECD_IMAGE}"' in UPGRADE_EXECD
    assert "vX.Y.Z" in UPGRADE_EXECD


@pytest.mark.parametrize(
    ("data", "kept"),
    [
        (b"ab", b"ab"),
        (b"a\xe2\x82", b"a"),  # the first two bytes of a three-byte character
        (b"a\xe2\x82\xac", b"a\xe2\x82\xac"),
        (b"\xf0\x9d\x84", b""),
        (b"a\xff", b"a\xff"),  # an invalid byte is kept: it decodes to U+FFFD
        (b"", b""),
    ],
)
def test_whole_characters_drops_only_a_cut_character(data: bytes, kept: bytes) -> None:
    assert whole_characters(data) == kept
