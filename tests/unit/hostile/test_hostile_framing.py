"""Property tests: command output is rebuilt exactly from any event chunking, in each framing.

- MODERN: any text, split into events anywhere (even inside a character's worth of text), is
  rebuilt exactly.
- LEGACY: one event per line, line ending stripped, an empty line sent as "\\n": any text that
  ends with "\\n" and contains no "\\r" is rebuilt exactly (what legacy cannot carry is documented
  in `_framing`).
- `OutputBuffer` never keeps more than its limit, never splits a character, keeps a prefix of the
  output, and says `truncated` exactly when something was dropped.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from opensandbox_core._framing import PROBE_COMMAND, Framing, OutputBuffer, classify_probe, rebuild

# Any text, surrogates excluded (execd's JSON events carry valid Unicode only).
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=400)


def _chunk(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a]


def _legacy_events(output: str) -> list[str]:
    lines = output.split("\n")
    assert lines[-1] == ""
    return [line if line else "\n" for line in lines[:-1]]


def _collect(framing: Framing, events: list[str], limit: int) -> OutputBuffer:
    buffer = OutputBuffer(limit)
    for event in events:
        buffer.add(rebuild(framing, event))
    return buffer


@given(text=TEXT, cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
def test_modern_any_text_any_chunking_is_exact(text: str, cuts: list[int]) -> None:
    events = _chunk(text, cuts)
    assert "".join(events) == text
    buffer = _collect(Framing.MODERN, events, limit=1 << 20)
    assert buffer.text() == text
    assert not buffer.truncated
    assert buffer.total_bytes == len(text.encode("utf-8"))


@given(lines=st.lists(TEXT.map(lambda t: t.replace("\n", "").replace("\r", "")), max_size=40))
def test_legacy_newline_terminated_text_is_exact(lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    buffer = _collect(Framing.LEGACY, _legacy_events(text), limit=1 << 20)
    assert buffer.text() == text
    assert not buffer.truncated


@given(
    text=TEXT,
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40),
    limit=st.integers(min_value=0, max_value=600),
)
def test_output_buffer_keeps_a_bounded_prefix_never_splitting_a_character(
    text: str, cuts: list[int], limit: int
) -> None:
    buffer = _collect(Framing.MODERN, _chunk(text, cuts), limit=limit)
    kept = buffer.text()
    size = len(text.encode("utf-8"))
    assert text.startswith(kept)
    assert len(kept.encode("utf-8")) <= limit
    assert buffer.truncated == (size > limit)
    assert buffer.total_bytes == size
    if not buffer.truncated:
        assert kept == text


@settings(max_examples=300)
@given(events=st.lists(TEXT, max_size=6))
def test_probe_classification_never_mistakes_other_output(events: list[str]) -> None:
    """Only the probe's exact output in some framing is classified; anything else is None or
    the framing that really produces it."""
    verdict = classify_probe(events)
    if verdict is Framing.MODERN:
        assert "".join(events) == "osb\n\nprobe"
    elif verdict is Framing.LEGACY:
        assert events == ["osb", "\n", "probe"]
    elif verdict is Framing.ANCIENT:
        assert events == ["osb", "probe"]
    assert PROBE_COMMAND.startswith("printf ")
