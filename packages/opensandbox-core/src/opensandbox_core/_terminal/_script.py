"""What the core types into a new terminal, and the filter that takes it out again (pure).

execd starts an interactive `bash` at a terminal's first connection (v1.0.19 can run a
`command` instead, v1.0.18 cannot), and has two habits a client must work around:

- when the process exits, execd closes the terminal before it has read what the process wrote
  last, and sends `exit` without it: the last bytes (the echo of `exit 3`, a command's last
  line) are often missing, at times from its replay buffer too;
- a connection to a terminal whose process has exited starts the process again (the `command`
  too).

So the core types one setup line into the new shell (echo hidden, see below), which ends the
same way on both generations: it `exec`s a wrapper (a `bash -c`, `_wrapper`) that runs the
terminal's program as its child and then

- prints an end mark with the program's exit code, and waits for the client's acknowledgement
  (one byte, `ACK`): the client acknowledges once it has read the end mark, so every byte before
  it has arrived; only then does the process exit;
- ends as the program did (a signal that killed the program is raised again), so execd's own
  exit frame agrees as far as it can.

The program is a `bash -c` of the command (Ctrl-C reaches it as it would the command alone), or
an interactive `bash` (`command=None`; its first prompt prints the ready mark). A connection
after the end starts a plain shell, never the command again. The wrapper never passes `command`
to execd: one path for both generations.

Exit codes as `subprocess` gives them: the exit status, or `-N` when signal N killed the
program. execd says only -1 for any signal, and bash's `$?` cannot tell `exit 143` from SIGTERM,
so the program's parent is a small perl waiter (`_WAITER`) that reads the real wait status and
hands it to the wrapper; it also takes the terminal back for the wrapper when an interactive
shell was killed while it had the terminal (job control). Images without perl (every Debian and
Ubuntu image has it, as `perl-base`) fall back to bash's `$?`, with 129-143 of the signals that
kill (HUP, INT, QUIT, ABRT, KILL, PIPE, TERM) read as those signals. `DELETE /pty` kills the
wrapper's process group (the wrapper, the waiter, a command); an interactive shell and its jobs
are in groups of their own (job control), and end as under execd's own shell: the kernel hangs
up the terminal's foreground group when its session leader, the wrapper, is gone.

The line is one `eval` of one word in `$'...'` quoting, printable ASCII only (`\\xHH` for the
rest, `!` included), so readline inserts every character as typed (no completion, history
expansion or key bindings) and every byte of the command reaches bash exactly. It also gives
the terminal's programs SIGINT and SIGQUIT at their defaults (`_DEFAULT_SIGNALS`). The setup
ends by printing the ready mark; `OutputFilter` drops what came before it (the first prompt, the echo) and the end mark, so the
terminal's output is exactly what its program printed.

What the end mark says is the exit code (`OutputFilter.end_status`). A process that ends without
it (the wrapper killed: `DELETE /pty`, a `kill` of the terminal's process group) has no known
exit code: execd's -1 does not say which signal.
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
_WAITER: Final = (
    "use POSIX (); my $ready = shift; my $g = getpgrp; "
    "$SIG{INT} = $SIG{QUIT} = $SIG{TTOU} = q(IGNORE); my $p = fork; exit 1 unless defined $p; "
    "if ($p == 0) { $SIG{INT} = $SIG{QUIT} = $SIG{TTOU} = q(DEFAULT); POSIX::close(3); "
    "syswrite(STDOUT, $ready); exec {$ARGV[0]} @ARGV; POSIX::_exit(127) } "
    "my $r; do { $r = waitpid($p, 0) } while ($r < 0 && $!{EINTR}); exit 1 if $r != $p; "
    "my $s = $?; POSIX::tcsetpgrp(0, $g) if -t STDIN; open(my $o, q(>&=3)) or exit 1; "
    "print $o ($s & 127 ? -($s & 127) : $s >> 8)"
)
"""`perl -e _WAITER READY CMD...`: print READY and run CMD as a child (SIGINT, SIGQUIT at their
defaults; the waiter ignores them, as a shell waiting for a command does), wait for it, give the
terminal's foreground back to the waiter's process group, and write CMD's exit code to fd 3 as
`subprocess` gives it (`-N`: signal N). The child does not inherit fd 3; it prints READY (the
ready mark, or nothing) right before it becomes CMD, so a Ctrl-C after the mark reaches CMD."""
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


def _wrapper(terminal_id: str, *, ready: bool) -> str:
    """The `bash -c` script that runs its arguments as the terminal's program (module
    docstring); `ready`: the ready mark is printed as the program starts (a command; an
    interactive shell's first prompt prints it). SIGINT and SIGQUIT are ignored by the wrapper
    (and so by the waiter from its start) and reset for the program."""
    mark = quoted(_MARK.format(id=terminal_id) + "ready\x07") if ready else "''"
    return (
        "trap '' INT QUIT; if perl -MPOSIX -e 1 2>/dev/null; then "
        + f'{{ st=$(perl -e {quoted(_WAITER)} {mark} "$@" 3>&1 >&4 4>&-); }} 4>&1; '
        + f"else trap : INT QUIT; printf %s {mark}; "
        + f'"$@"; st=$?; case $st in {_SIGNAL_STATUS}) st=$((128-st));; esac; fi; '
        # No status (the waiter itself was killed): end without a mark, the code is unknown.
        + 'trap - INT QUIT; [ -n "$st" ] || kill -KILL $$; '
        + f"{_printf_mark(terminal_id, 'exit', '$st')}; {_WAIT_ACK}; "
        + '[ "$st" -lt 0 ] && kill -$((-st)) $$; [ "$st" -lt 0 ] && st=$((128-st)); exit "$st"'
    )


def _run(terminal_id: str, cwd: str | None, program: str, *, ready: bool, setup: str = "") -> bytes:
    return _typed(
        f"{_enter(cwd)}{_DEFAULT_SIGNALS}{setup}osb_exec bash --norc --noprofile -c "
        f"{quoted(_wrapper(terminal_id, ready=ready))} osb-terminal {program}"
    )


def interactive_line(terminal_id: str, *, cwd: str | None = None) -> bytes:
    """The setup line of an interactive shell (Enter included): the wrapper in place of
    execd's shell (`exec`, same process), running an interactive bash with Ctrl-C working,
    whose first prompt prints the ready mark."""
    first_prompt = f"unset PROMPT_COMMAND; {_printf_mark(terminal_id, 'ready')}"
    return _run(
        terminal_id,
        cwd,
        "bash --norc --noprofile",
        ready=False,
        setup=f"export PROMPT_COMMAND={quoted(first_prompt)}; ",
    )


def command_line(terminal_id: str, command: str, *, cwd: str | None = None) -> bytes:
    """The setup line that makes `command` the terminal's process (Enter included)."""
    return _run(terminal_id, cwd, f"bash --norc --noprofile -c {quoted(command)}", ready=True)


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
