"""The fake execd's canned commands: what it answers when no callback does."""

from __future__ import annotations

import posixpath
import re
import shlex

from opensandbox_core._files._fallback import RECORD_FORMAT
from opensandbox_core._files._portable import GNU_PROBE
from opensandbox_core._wire._framing import PROBE_COMMAND, PROBE_OUTPUT

from ._model import _TMP, _TMP_MARK, FakeCommand, FakeOutcome, FakeSandbox


def _printf(fmt: str, args: list[str]) -> bytes:
    """printf's format escapes and `%s`/`%d`/`%%` (what the canned commands need)."""
    escapes = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "a": "\a", "0": "\0"}
    out: list[str] = []
    items = iter(args)
    i = 0
    while i < len(fmt):
        char = fmt[i]
        if char == "\\" and i + 1 < len(fmt):
            octal = re.match(r"[0-7]{1,3}", fmt[i + 1 :])
            if octal:
                out.append(chr(int(octal[0], 8)))
                i += 1 + len(octal[0])
                continue
            out.append(escapes.get(fmt[i + 1], "\\" + fmt[i + 1]))
            i += 2
            continue
        if char == "%" and i + 1 < len(fmt):
            spec = fmt[i + 1]
            out.append("%" if spec == "%" else next(items, ""))
            i += 2
            continue
        out.append(char)
        i += 1
    # Characters below 256 are bytes (octal escapes), the rest UTF-8 text.
    return b"".join(c.encode("latin-1") if ord(c) < 256 else c.encode() for c in out)


def _probe(command: FakeCommand) -> FakeOutcome:
    match = re.search(r"cd -- ('[^']*'|\S+) &&", command.command)
    workdir = shlex.split(match[1])[0] if match else (command.cwd or "/")
    command.sandbox.dirs.add(workdir)
    command.sandbox._parents(workdir + "/x")
    stderr = f"{workdir}\n{_TMP_MARK}{_TMP}\n".encode()
    return FakeOutcome(stdout=PROBE_OUTPUT, stderr=stderr)


def canned(command: FakeCommand) -> FakeOutcome:
    if PROBE_COMMAND in command.command and _TMP_MARK in command.command:
        return _probe(command)
    inline = _inline_write(command)
    if inline is not None:
        return inline
    argv = command.argv
    if not argv:
        return FakeOutcome(exit_code=0 if argv == [] else 2)
    if argv[0] == "env":
        argv = argv[1:]
        while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0]):
            argv = argv[1:]
        if not argv:
            return FakeOutcome()
    to_stderr = argv[-1] == ">&2"
    if to_stderr:
        argv = argv[:-1]
    name, args = argv[0], argv[1:]
    out = _builtin(name, args)
    if out is None:
        out = _file_command(name, args, command.sandbox)
    if out is None:
        message = f"fake execd: no canned behaviour for {command.command[:80]!r}\n"
        return FakeOutcome(stderr=message.encode(), exit_code=127)
    if isinstance(out, FakeOutcome):
        return out
    return FakeOutcome(stderr=out) if to_stderr else FakeOutcome(stdout=out)


def _builtin(name: str, args: list[str]) -> bytes | FakeOutcome | None:
    """The shell builtins and tiny tools the fake knows: what they print, or how they end."""
    if name == "printf" and args:
        return _printf(args[0], args[1:])
    if name == "echo":
        newline = args[:1] != ["-n"]
        return (" ".join(args if newline else args[1:]) + ("\n" if newline else "")).encode()
    if name in ("true", ":"):
        return b""
    if name == "false":
        return FakeOutcome(exit_code=1)
    if name == "exit":
        return FakeOutcome(exit_code=int(args[0]) if args else 0)
    if name == "sleep" and args:
        return FakeOutcome(delay=float(args[0]))
    return None


def _file_command(name: str, args: list[str], box: FakeSandbox) -> bytes | FakeOutcome | None:
    """`cat`, the library's atomic rename, its GNU tools probe, `realpath -z -m`, `mkdir` and
    `rm` on the fake sandbox's files."""
    if name == "cat" and args:
        path = args[-1]
        if path not in box.files:
            return FakeOutcome(
                stderr=f"cat: {path}: No such file or directory\n".encode(), exit_code=1
            )
        return box.files[path].data
    if name == "sh" and len(args) == 7 and args[0] == "-c" and "mv" in args[1]:
        return _rename(args, box)
    if [name, *args] == GNU_PROBE:  # the fake stands for an image with GNU tools
        return b""
    if name == "find" and args[1:] == ["-maxdepth", "0", "-printf", RECORD_FORMAT]:
        return _record(args[0], box)
    if name == "realpath" and args[:3] == ["-z", "-m", "--"] and len(args) == 4:
        return (posixpath.normpath(args[3]) + "\0").encode()  # the fake has no symlinks
    if name == "mkdir":
        for path in [a for a in args if a.startswith("/")]:
            box._parents(path + "/x")
        return b""
    if name == "rm":
        for path in [a for a in args if a.startswith("/")]:
            box.files.pop(path, None)
            prefix = path.rstrip("/") + "/"
            box.dirs = {d for d in box.dirs if d != path and not d.startswith(prefix)}
            box.files = {p: f for p, f in box.files.items() if not p.startswith(prefix)}
        return b""
    return None


def _record(path: str, box: FakeSandbox) -> bytes | FakeOutcome:
    """`find PATH -maxdepth 0 -printf RECORD_FORMAT`: the record of a file or directory."""
    name = posixpath.basename(path.rstrip("/")) or "/"
    if path in box.dirs:
        return f"d/d/4096/755/0.0/root/root/0/{name}\0".encode()
    file = box.files.get(path)
    if file is None:
        return FakeOutcome(
            stderr=f"find: '{path}': No such file or directory\n".encode(), exit_code=1
        )
    stamp = file.modified.timestamp()
    record = f"f/f/{len(file.data)}/{file.mode:o}/{stamp:.6f}/root/root/0/{name}\0"
    return record.encode()


def rename_args(command: FakeCommand) -> list[str] | None:
    """The arguments of the library's rename command (`_files._rename`), or None."""
    first, _, rest = command.command.partition("\n")
    if not first.startswith("set -- ") or "exec mv -f" not in rest:
        return None
    args = shlex.split(first)[2:]
    return args if len(args) == 7 else None


def marker_of(args: list[str]) -> str:
    """The marker file the rename command waits for ("": none)."""
    return args[2]


def renamed(args: list[str], box: FakeSandbox) -> FakeOutcome:
    """What the library's rename command does on the fake's files (no symlinks here)."""
    temp, target, _, new_mode, mode, uploaded = args[:6]
    if target in box.dirs:
        return FakeOutcome(exit_code=84)
    old = box.files.get(target)
    want = mode or (format(old.mode, "o") if old is not None else new_mode)
    moved = box.files.pop(temp, None)
    if moved is None:
        return FakeOutcome(stderr=f"mv: cannot stat '{temp}'\n".encode(), exit_code=1)
    if want != uploaded:
        moved.mode = int(want, 8)
    box.files[target] = moved
    return FakeOutcome(stdout=f"{want}\n".encode())


def _rename(args: list[str], box: FakeSandbox) -> bytes | FakeOutcome:
    """The library's atomic rename: sh -c SCRIPT sh TEMP TARGET PARENT MODE."""
    temp, target, parent = args[3], args[4], args[5]
    if temp not in box.files:
        return FakeOutcome(stderr=f"mv: cannot stat '{temp}'\n".encode(), exit_code=1)
    if parent:
        box._parents(parent + "/x")
    old = box.files.get(target)
    moved = box.files.pop(temp)
    if old is not None and args[6] == "=":
        moved.mode = old.mode
    box._parents(target)
    box.files[target] = moved
    return b""


_INLINE_CONTENT = re.compile(r"\nprintf '([^']*)' >\"\$t\"")


def _inline_write(command: FakeCommand) -> FakeOutcome | None:
    """The library's one-command write (`_files._inline`): the content is the format of its
    `printf`; None for any other command."""
    first, _, rest = command.command.partition("\n")
    content = _INLINE_CONTENT.search(rest) if first.startswith("set -- ") else None
    if content is None or "exec mv -f" not in rest:
        return None
    args = shlex.split(first)[2:]
    if len(args) != 4:
        return None
    _, target, new_mode, mode = args
    box = command.sandbox
    if target in box.dirs:
        return FakeOutcome(exit_code=84)
    old = box.files.get(target)
    want = mode or (format(old.mode, "o") if old is not None else new_mode)
    box.write(target, _printf(content[1], []), int(want, 8))
    return FakeOutcome(stdout=f"{want}\n".encode())
