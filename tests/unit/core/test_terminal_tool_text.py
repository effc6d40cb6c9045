"""The terminal tools' key notation (`keystrokes`), their output as text (`OutputText`), waiting
for text after the echo, and placing a replay: what a model's keys become on the wire, and how a
terminal's bytes reach the model."""

from __future__ import annotations

import pytest

from opensandbox_core import ConfigurationError
from opensandbox_core._terminal_tools._entry import Entry, _found, echo_of
from opensandbox_core._terminal_tools._keys import keystrokes
from opensandbox_core._terminal_tools._output import OutputText

# -- keystrokes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "sent"),
    [
        ("6*7<Enter>", b"6*7\r"),
        ("ls\n", b"ls\r"),  # a line break is Enter
        ("a\r\nb\rc", b"a\rb\rc"),
        ("<Ctrl-C>", b"\x03"),
        ("<ctrl+d>", b"\x04"),
        ("<C-z>", b"\x1a"),
        ("<^C>", b"\x03"),
        ("<Ctrl-[>", b"\x1b"),
        ("<Ctrl-\\>", b"\x1c"),
        ("<Ctrl-?>", b"\x7f"),
        ("<Ctrl-@>", b"\x00"),
        ("<Tab><Esc><Backspace><Space>", b"\t\x1b\x7f "),
        ("<Up><Down><Right><Left>", b"\x1b[A\x1b[B\x1b[C\x1b[D"),
        ("<Home><End><PageUp><PageDown>", b"\x1b[H\x1b[F\x1b[5~\x1b[6~"),
        ("<Insert><Delete>", b"\x1b[2~\x1b[3~"),
        ("<F1><F4><F5><F12>", b"\x1bOP\x1bOS\x1b[15~\x1b[24~"),
        ("<ENTER><enter><Return>", b"\r\r\r"),
        ("<Ctrl-C><Ctrl-C>", b"\x03\x03"),
    ],
)
def test_key_names_become_the_bytes_a_terminal_sends(keys: str, sent: bytes) -> None:
    assert keystrokes(keys) == sent


@pytest.mark.parametrize(
    "keys",
    [
        "cat <file>",  # no key is named "file"
        "diff <(ls) <(ls -a)",
        "echo '<b>bold</b>'",
        "a < b > c",  # blanks inside: not a name
        "<Ctrl-1>",  # no control character for '1'
        "<>",
        "<verylongkeyname>",
        "x <<EOF",
        "",
    ],
)
def test_text_that_names_no_key_is_typed_as_it_is(keys: str) -> None:
    assert keystrokes(keys) == keys.encode()


def test_lt_types_a_bracket_where_it_would_start_a_name() -> None:
    assert keystrokes("echo <lt>Enter>") == b"echo <Enter>"
    assert keystrokes("<<Enter>") == b"<\r"


def test_text_is_typed_as_utf8() -> None:
    assert keystrokes("naïve ✓<Enter>") == "naïve ✓\r".encode()


@pytest.mark.parametrize("keys", [None, b"ls\r", 3, "\ud800"])
def test_keys_that_cannot_be_typed_are_refused(keys: object) -> None:
    with pytest.raises(ConfigurationError, match="keys"):
        keystrokes(keys)  # type: ignore[arg-type]


# -- output as text -------------------------------------------------------------------------------


def test_line_endings_become_newlines_and_the_rest_is_kept() -> None:
    text = OutputText(1000)
    piece = text.render(b"a\r\nb\rc\t\x1b[31md\x07\r\n")
    assert piece.text == "a\nb\rc\t\x1b[31md\x07\n"
    assert piece.elided == 0


def test_a_line_ending_split_between_pieces_is_one_newline() -> None:
    text = OutputText(1000)
    assert text.render(b"one\r").text == "one"
    assert text.render(b"\ntwo").text == "\ntwo"


def test_a_carriage_return_held_back_comes_out_with_the_next_piece_or_at_the_end() -> None:
    text = OutputText(1000)
    assert text.render(b"50%\r").text == "50%"
    assert text.render(b"60%").text == "\r60%"
    assert text.render(b"\r", final=True).text == "\r"


def test_a_character_split_between_pieces_is_whole_in_the_second() -> None:
    text = OutputText(1000)
    encoded = "✓ done".encode()
    assert text.render(encoded[:1]).text == ""
    assert text.render(encoded[1:]).text == "✓ done"


def test_bytes_that_are_not_utf8_become_replacement_characters() -> None:
    text = OutputText(1000)
    assert text.render(b"a\xff\xfeb\xc3").text == "a\ufffd\ufffdb"
    assert text.render(b"", final=True).text == "\ufffd"  # the unfinished character, at the end


def test_a_piece_over_the_cap_keeps_its_tail_and_counts_what_it_left_out() -> None:
    text = OutputText(10)
    piece = text.render(b"0123456789abcdefghij")
    assert piece.text == "abcdefghij"
    assert piece.elided == 10
    assert text.render(b"k").elided == 0


def test_the_cap_cuts_at_a_character() -> None:
    text = OutputText(4)
    data = "aé✓".encode()  # 1 + 2 + 3 bytes: the last 4 start inside "é"
    piece = text.render(data)
    assert piece.text == "✓"  # not a replacement character for half of "é"
    assert piece.elided == 3
    assert len(data) == piece.elided + len("✓".encode())


def test_bytes_held_from_an_earlier_piece_count_when_the_cap_drops_them() -> None:
    text = OutputText(4)
    assert text.render(b"ok\xe2\x9c").text == "ok"  # two bytes of a character held
    piece = text.render(b"123456")
    assert piece.text == "3456"
    assert piece.elided == 2 + 2


def test_skipped_bytes_are_counted_in_the_next_piece() -> None:
    text = OutputText(100)
    text.render(b"x\r")  # a carriage return held
    text.skip(1000)
    piece = text.render(b"tail")
    assert (piece.text, piece.elided) == ("tail", 1001)


@pytest.mark.parametrize("limit", [0, -1, 1.5, "10"])
def test_the_cap_must_be_a_positive_int(limit: object) -> None:
    with pytest.raises(ConfigurationError, match="max_output"):
        OutputText(limit)  # type: ignore[arg-type]


# -- waiting for text, and reaching a terminal again ------------------------------------------------


def test_wait_for_text_is_looked_for_after_the_echo_of_the_typed_line() -> None:
    typed = keystrokes('read -p "Name? " n<Enter>')
    echo = echo_of(typed)
    assert echo == b'read -p "Name? " n'
    assert not _found(b"Name? ", bytearray(b'read -p "Name? " n\r\n'), echo)
    assert not _found(b"Name? ", bytearray(b'read -p "Na'), echo)  # the echo, still arriving
    assert _found(b"Name? ", bytearray(b'read -p "Name? " n\r\nName? '), echo)


def test_wait_for_text_matches_line_endings_as_the_model_reads_them() -> None:
    assert _found(b"42\n>>> ", bytearray(b"6*7\r\n42\r\n>>> "), b"6*7")
    assert _found(b"42\r\n", bytearray(b"42\r\n"), b"")


@pytest.mark.parametrize(
    ("typed", "echo"),
    [
        (b"\x03", b""),  # a control key: echoed as ^C, nothing skipped
        (b"\x1b[A", b""),
        (b"x" * 80 + b"\r", b""),  # wider than the terminal: echoed scrolled
        ("é\r".encode(), b""),
        (b"ls\rpwd\r", b"ls"),
    ],
)
def test_only_a_plain_first_line_counts_as_the_echo(typed: bytes, echo: bytes) -> None:
    assert echo_of(typed) == echo


def _entry(given: bytes) -> Entry:
    entry = Entry("t1", OutputText(1000))
    entry.took(given)
    return entry


def test_a_replay_gives_only_what_the_model_has_not_seen() -> None:
    entry = _entry(b"$ echo one\r\none\r\n$ ")
    entry.skip_seen(b"$ echo one\r\none\r\n$ two\r\n")
    assert entry.carry == b"two\r\n"
    assert entry.note is None


def test_a_replay_that_starts_later_is_placed_by_the_last_bytes_seen_and_says_so() -> None:
    seen = bytes(range(256)) * 3
    entry = _entry(seen)
    entry.skip_seen(seen[-300:] + b"new")  # the sandbox kept only the end
    assert entry.carry == b"new"
    assert entry.note is not None and "may repeat some output, or miss some" in entry.note


def test_a_replay_that_shares_nothing_with_what_was_seen_is_given_whole_and_says_so() -> None:
    entry = _entry(b"old output")
    entry.skip_seen(b"unrelated")
    assert entry.carry == b"unrelated"
    assert entry.note is not None


def test_a_terminal_reached_for_the_first_time_gives_its_replay_with_a_note() -> None:
    entry = Entry("t9", OutputText(1000))
    entry.skip_seen(b"earlier\r\n$ ")
    assert entry.carry == b"earlier\r\n$ "
    assert entry.note is not None and entry.note.startswith("[reached terminal t9 again")
    assert entry.given == len(b"earlier\r\n$ ")
