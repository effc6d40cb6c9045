"""What the core types into a new terminal, and the filter that takes it out again (pure).

execd starts an interactive `bash` at a terminal's first connection (v1.0.19 can run a
`command` instead, v1.0.18 cannot), and has two habits a client must work around:

- when the process exits, execd closes the terminal before it has read what the process wrote
  last, and sends `exit` without it: the last bytes (the echo of `exit 3`, a command's last
  line) are often missing, at times from its replay buffer too;
- a connection to a terminal whose process has exited starts the process again (the `command`
  too).

So the core types one setup line into the new shell (echo hidden, see below), which ends the
same way on both generations:

- interactive (`command=None`): an `EXIT` trap that prints an end mark with the exit status
  and then waits for the client's acknowledgement (one byte, `ACK`);
- a command: `exec` of a `bash -c` wrapper that runs the command (in a `bash -c` of its own, so
  Ctrl-C reaches it as it would the command alone), prints the end mark with its status and
  waits for the acknowledgement, then ends as the command did: a status of 129-143 of a signal
  that kills (HUP, INT, QUIT, ABRT, KILL, PIPE, TERM) is re-raised, so execd reports -1 as for
  a command killed by a signal (and the end mark says -1 too: it always carries the exit code
  execd will report).

The client acknowledges once it has read the end mark, so every byte before it has arrived;
the process exits only then. A connection after the end starts a plain shell, never the
command again. The wrapper never passes `command` to execd: one path for both generations.

The line is one `eval` of one word in `$'...'` quoting, printable ASCII only (`\\xHH` for the
rest, `!` included), so readline inserts every character as typed (no completion, history
expansion or key bindings) and every byte of the command reaches bash exactly. It also gives
the terminal's programs SIGINT and SIGQUIT at their defaults (`_DEFAULT_SIGNALS`). The setup ends by printing the ready mark;
`OutputFilter` drops what came before it (the first prompt, the echo) and the end mark, so the
terminal's output is exactly what its program printed.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["ACK", "OutputFilter", "command_line", "interactive_line"]

ACK: Final = b"\x06"
"""The byte that acknowledges the end mark (ASCII ACK; other keystrokes waiting are skipped)."""
_MARK: Final = "\x1b]6464;{id};"  # an OSC sequence that terminals ignore
_SAFE: Final = frozenset(set(range(0x20, 0x7F)) - set(b"'\\!"))
_WAIT_ACK: Final = "while read -rsn1 k; do [ \"$k\" = $'\\006' ] && break; done"
_SIGNAL_STATUS: Final = "129|130|131|134|137|141|143"
_DEFAULT_SIGNALS: Final = (
    "osb_exec() { if env --default-signal=INT,QUIT true 2>/dev/null; then "
    'exec env --default-signal=INT,QUIT "$@"; fi; '
    "if command -v perl >/dev/null 2>&1; then "
    'exec perl -e \'$SIG{INT}=$SIG{QUIT}="DEFAULT"; exec {$ARGV[0]} @ARGV\' "$@"; fi; '
    'exec "$@"; }; '
)
"""`osb_exec CMD...`: exec CMD with SIGINT and SIGQUIT at their defaults. A daemon started in the
background by a non-interactive shell (`execd &`, as images' bootstrap scripts do) has them
ignored, and passes that on: bash cannot undo it (a signal ignored at a shell's start stays
ignored), so Ctrl-C would reach no program. coreutils' `env --default-signal` (8.31+) or perl
undo it; without either the shell runs as it is."""


def quoted(text: str | bytes) -> str:
    """`text` as one bash word in `$'...'` quoting made of printable ASCII only, without `!`
    (history expansion) and `\\t` (completion): readline inserts it as typed."""
    data = text.encode() if isinstance(text, str) else text
    return "$'" + "".join(chr(b) if b in _SAFE else f"\\x{b:02x}" for b in data) + "'"


def _printf_mark(terminal_id: str, what: str, status: str = "") -> str:
    mark = _MARK.format(id=terminal_id).replace("\x1b", "\\033") + what
    fmt = f"{mark};%d\\007" if status else f"{mark}\\007"
    return f"printf {quoted(fmt)}" + (f' "{status}"' if status else "")


def _enter(cwd: str | None) -> str:
    """Enter a directory that execd's own `cwd` would expand (`$`, `~`), made if missing."""
    if cwd is None:
        return ""
    return f"mkdir -p -- {quoted(cwd)} && cd -- {quoted(cwd)} || exit 97; "


def _typed(script: str) -> bytes:
    """The line typed into execd's shell to run `script`: one `eval` of one quoted word."""
    return f" eval {quoted(script)}\r".encode()


def interactive_line(terminal_id: str, *, cwd: str | None = None) -> bytes:
    """The setup line of an interactive shell (Enter included): a new interactive bash in
    place of execd's (`exec`, same process) with Ctrl-C working, whose first prompt sets the
    `EXIT` trap and prints the ready mark."""
    on_exit = f"{_printf_mark(terminal_id, 'exit', '$?')}; {_WAIT_ACK}"
    first_prompt = (
        f"unset PROMPT_COMMAND; trap {quoted(on_exit)} EXIT; {_printf_mark(terminal_id, 'ready')}"
    )
    return _typed(
        f"{_enter(cwd)}{_DEFAULT_SIGNALS}export PROMPT_COMMAND={quoted(first_prompt)}; "
        "osb_exec bash --norc --noprofile"
    )


def command_line(terminal_id: str, command: str, *, cwd: str | None = None) -> bytes:
    """The setup line that makes `command` the terminal's process (Enter included)."""
    wrapper = (
        f"trap : INT QUIT; {_printf_mark(terminal_id, 'ready')}; "
        'bash --norc --noprofile -c "$1"; rc=$?; st=$rc; trap - INT QUIT; '
        f"case $rc in {_SIGNAL_STATUS}) st=-1;; esac; "
        f"{_printf_mark(terminal_id, 'exit', '$st')}; {_WAIT_ACK}; "
        '[ "$st" = -1 ] && kill -$((rc-128)) $$; exit "$rc"'
    )
    return _typed(
        f"{_enter(cwd)}{_DEFAULT_SIGNALS}osb_exec bash --norc --noprofile -c "
        f"{quoted(wrapper)} osb-terminal {quoted(command)}"
    )


class OutputFilter:
    """The terminal's raw output in, what its program printed out (`feed`).

    Until the ready mark (`setup=True`) everything is held back and dropped with the mark; from
    the end mark on everything is dropped, and `end_status` holds the status it carried. Bytes
    that may be the start of an end mark are held until the next bytes tell.
    """

    def __init__(self, terminal_id: str, *, setup: bool) -> None:
        mark = _MARK.format(id=terminal_id).encode()
        self._ready = mark + b"ready\x07"
        self._end_prefix = mark + b"exit;"
        self._end = re.compile(re.escape(self._end_prefix) + rb"(-?[0-9]{1,6})\x07")
        self._held = bytearray()
        self.in_setup = setup
        self.end_status: int | None = None
        self.setup_output = b""  # what the setup printed before its ready mark

    @property
    def ended(self) -> bool:
        return self.end_status is not None

    @property
    def held(self) -> bytes:
        """What is held back (before the ready mark: what the setup printed so far)."""
        return bytes(self._held)

    def feed(self, data: bytes) -> bytes:
        if self.ended:
            return b""
        if not self.in_setup and not self._held and b"\x1b" not in data:
            return data  # no mark can start here: most output, at once
        self._held += data
        if self.in_setup:
            at = self._held.find(self._ready)
            if at < 0:
                return b""
            self.setup_output = bytes(self._held[:at])
            del self._held[: at + len(self._ready)]
            self.in_setup = False
        return self._live()

    def end_setup(self) -> bytes:
        """No ready mark is coming (a terminal attached to, opened without the core's setup,
        or whose start is no longer kept): what was held is output after all."""
        if not self.in_setup:
            return b""
        self.in_setup = False
        return self._live()

    def _live(self) -> bytes:
        held = self._held
        found = self._end.search(held)
        if found is not None:
            self.end_status = int(found.group(1))
            out = bytes(held[: found.start()])
            held.clear()
            return out
        keep = self._partial_mark(held)
        out = bytes(held[: len(held) - keep])
        del held[: len(held) - keep]
        return out

    def _partial_mark(self, data: bytearray) -> int:
        """How many bytes at the end of `data` may be the start of an end mark."""
        prefix = self._end_prefix
        start = data.rfind(b"\x1b", max(0, len(data) - len(prefix) - 8))
        if start < 0:
            return 0
        tail = bytes(data[start:])
        if prefix.startswith(tail):
            return len(tail)
        if tail.startswith(prefix) and re.fullmatch(rb"-?[0-9]{0,6}", tail[len(prefix) :]):
            return len(tail)
        return 0
