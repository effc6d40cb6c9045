"""Property tests: command output is rebuilt exactly from any event chunking, in each framing.

- MODERN: any text, split into events anywhere (even inside a character's worth of text), is
  rebuilt exactly.
- LEGACY: one event per line, line ending stripped, an empty line sent as "\\n": any text that
  ends with "\\n" and contains no "\\r" is rebuilt exactly (what legacy cannot carry is documented
  in `_framing`).
- `OutputBuffer` never keeps more than its limit, never splits a character, keeps a prefix of the
  output, and says `truncated` exactly when something was dropped.
- The event stream (JSON objects as Go writes them, each followed by a blank line) is parsed back
  exactly from any chunking, whatever the texts hold (U+0085, U+2028, U+2029, CR, LF, NUL).
- Raw output bytes decode as Go's encoding/json renders them (one U+FFFD per invalid byte), and
  a cut at a byte limit never leaves part of a character.
"""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from opensandbox_core._wire._framing import (
    PROBE_COMMAND,
    EventSplitter,
    Framing,
    OutputBuffer,
    classify_probe,
    decode_output,
    rebuild,
    whole_characters,
)

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


# -- the event stream and raw output bytes (real execd's wire format) --------------------------
def _go_json(event: dict[str, str]) -> bytes:
    """An event as Go's encoding/json writes it: U+2028/U+2029 escaped, U+0085 raw, no spaces."""
    text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()


def _go_decode(data: bytes) -> str:
    """A reference of Go's rule, byte by byte: a valid UTF-8 sequence is its character; any other
    byte is one U+FFFD (utf8.DecodeRune answers RuneError with size 1)."""
    out: list[str] = []
    i = 0
    while i < len(data):
        for size in (1, 2, 3, 4):
            try:
                char = data[i : i + size].decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.append(char)
            i += size
            break
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)


TRICKY = st.text(
    st.one_of(
        st.characters(exclude_categories=("Cs",)),
        st.sampled_from(["\x85", "\u2028", "\u2029", "\n", "\r", "\x00", "\\", '"']),
    ),
    max_size=60,
)


@given(
    texts=st.lists(TRICKY, max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=20),
)
def test_events_survive_any_text_and_any_chunking(texts: list[str], cuts: list[int]) -> None:
    events = [{"type": "stdout", "text": t} for t in texts]
    stream = b"".join(_go_json(e) + b"\n\n" for e in events)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    splitter = EventSplitter()
    parsed = [e for a, b in itertools.pairwise(points) for e in splitter.feed(stream[a:b])]
    assert parsed + splitter.close() == events


@settings(max_examples=500)
@given(data=st.binary(max_size=64))
def test_raw_output_decodes_like_go(data: bytes) -> None:
    assert decode_output(data) == _go_decode(data)


@given(
    text=st.text(st.characters(exclude_categories=("Cs",)), max_size=50), cut=st.integers(0, 400)
)
def test_a_cut_never_leaves_a_partial_character(text: str, cut: int) -> None:
    data = text.encode()
    kept = whole_characters(data[:cut])
    assert text.startswith(kept.decode("utf-8"))  # strict: no partial character left
    assert len(data[:cut]) - len(kept) < 4
