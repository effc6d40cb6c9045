"""Native `ls`, `glob`, `grep`, `edit` and paged `read` against BaseSandbox's own scripts on the same live sandbox.

Each native result must equal `BaseSandbox.<tool>(backend, ...)` exactly (field for field, in
the same order), for hostile names and for files that change between pages, on every execd
generation profile of the testbed daemon.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable, Iterator

import pytest
from deepagents.backends.protocol import WriteResult
from deepagents.backends.sandbox import BaseSandbox

from deepagents_opensandbox_backend import DEFAULT_IMAGE, OpenSandboxBackend
from deepagents_opensandbox_backend._filesystem import native_read
from deepagents_opensandbox_backend._listing import DirectoryEntry, list_directory
from deepagents_opensandbox_backend._search import native_glob
from opensandbox_core import EditError, NotTextError, SandboxSpec
from opensandbox_core.adapters import run_blocking

ROOT = "/workspace/native-tools"
MIB = 1024 * 1024

HOSTILE_NAMES = [
    "plain.txt",
    "with space",
    "q'uote",
    'd"quote',
    "nl\nname",
    "tab\tname",
    "é中文🎉",
    "price$5.txt",
    "$HOME",
    "-leading-dash",
    "*star?[x]{a,b}",
    "back\\slash",
    " lead-space",
    ".hidden",
    "cr\rname",
    "crlf\r\nname",
    "nel\u0085name",
    "ls\u2028name",
    "trail-space  ",
    "vt\vff\fname",
]
NON_UTF8_NAME = "bad\udcffname"
"""Made in the sandbox from the byte 0xFF; Python's `os.scandir` names it with a surrogate."""

SETUP = r"""
set -e
root="$1"
rm -rf -- "$root"
mkdir -p -- "$root/dir/sub/deeper/deepest" "$root/empty"
shift
for name in "$@"; do printf 'x\n' > "$root/dir/$name"; mkdir -p -- "$root/dir/sub/$name.d"; done
printf -v bad 'bad\377name'
printf 'x\n' > "$root/dir/$bad"; mkdir -p -- "$root/dir/sub/$bad.d"
: > "$root/dir/empty-file"
printf '\0\1\2\377' > "$root/dir/binary.bin"
ln -s sub "$root/dir/link-to-dir"
ln -s plain.txt "$root/dir/link-to-file"
ln -s missing "$root/dir/dangling"
ln -s "$root/dir" "$root/link-to-root-dir"
mkfifo "$root/dir/fifo"
for i in $(seq 1 50); do : > "$root/dir/sub/deeper/deepest/f$i"; done
"""


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(p, marks=pytest.mark.testbed_daemon(p)) for p in ("1.0.19", "1.0.18", "1.1")
    ],
)
def tools_backend(
    request: pytest.FixtureRequest, testbed_env: dict[str, str]
) -> Iterator[OpenSandboxBackend]:
    """One sandbox per execd generation profile, with a tree of hostile names."""
    profile = {"OSB_EXECD_PROFILE": request.param}  # read by the daemon: the container's env
    spec = SandboxSpec(image=DEFAULT_IMAGE, container_env=profile)
    with OpenSandboxBackend.create(spec=spec) as backend:
        done = run_blocking(
            backend.session.commands.run(["bash", "-c", SETUP, "setup", ROOT, *HOSTILE_NAMES])
        )
        assert done.exit_code == 0, done.stderr
        yield backend


LS_PATHS = [
    f"{ROOT}/dir",
    f"{ROOT}/dir/",
    f"{ROOT}/dir/sub",
    f"{ROOT}/dir/sub/deeper/deepest",
    f"{ROOT}/empty",
    f"{ROOT}/dir/link-to-dir",
    f"{ROOT}/link-to-root-dir",
    f"{ROOT}/dir/plain.txt",
    f"{ROOT}/dir/link-to-file",
    f"{ROOT}/dir/dangling",
    f"{ROOT}/dir/fifo",
    f"{ROOT}/dir/plain.txt/below",
    f"{ROOT}/missing",
    f"{ROOT}/dir/with space",
    f"{ROOT}/dir/sub/nl\nname.d",
    f"{ROOT}/dir/sub/-leading-dash.d",
    f"{ROOT}/dir/sub/$HOME.d",
    "/",
    "native-tools-relative",
    "",
]


def test_ls_matches_base_sandbox(tools_backend: OpenSandboxBackend) -> None:
    for path in LS_PATHS:
        native = tools_backend.ls(path)
        assert native == BaseSandbox.ls(tools_backend, path), path
        if path == f"{ROOT}/dir":
            names = {e["path"].rsplit("/", 1)[-1] for e in native.entries or []}
            assert {*HOSTILE_NAMES, NON_UTF8_NAME} <= names
            assert {"link-to-dir": False, "sub": True}.items() <= {
                e["path"].rsplit("/", 1)[-1]: e["is_dir"] for e in native.entries or []
            }.items()


async def test_als_matches_base_sandbox(tools_backend: OpenSandboxBackend) -> None:
    for path in LS_PATHS[:8]:
        assert await tools_backend.als(path) == await BaseSandbox.als(tools_backend, path), path


def _text(size: int, ending: bytes, width: int = 64) -> bytes:
    line = b"y" * (width - len(ending))
    body = b"".join(b"%08d" % i + line[8:] + ending for i in range(size // width))
    return body + b"tail-without-ending"


BIG_FILES = {
    "lf.txt": _text(3 * MIB, b"\n"),
    "crlf.txt": _text(3 * MIB, b"\r\n", width=1023),
    "unicode.txt": "".join(f"{i} é中🎉 line\n" for i in range(150_000)).encode(),
    "long-line.txt": b"z" * (2 * MIB) + b"\nshort\n",
    "late-invalid.txt": b"ok\n" * 500_000 + b"\xff\n" + b"after\n" * 10,
    "binary-prefix.txt": b"\xff" * 100 + b"a\n" * MIB,
    "image.png": b"\x89PNG" + b"\0" * (2 * MIB),
}
WINDOWS = [(0, 2000), (2000, 2000), (1, 3), (40_000, 100), (49_000, 5000), (10**7, 1), (0, 0)]


@pytest.mark.long
def test_paged_read_matches_base_sandbox(tools_backend: OpenSandboxBackend) -> None:
    session = tools_backend.session
    for name, data in BIG_FILES.items():
        path = f"{ROOT}/big/{name}"
        run_blocking(session.files.write_bytes(path, data))
        for offset, limit in WINDOWS:
            assert tools_backend.read(path, offset, limit) == BaseSandbox.read(
                tools_backend, path, offset, limit
            ), (name, offset, limit)


def test_sequential_pages_match_and_see_changes(tools_backend: OpenSandboxBackend) -> None:
    session = tools_backend.session
    path = f"{ROOT}/big/changing.txt"
    first = _text(4 * MIB, b"\n")
    run_blocking(session.files.write_bytes(path, first))
    offset, pages = 0, 0
    while offset is not None and pages < 4:
        page = tools_backend.read(path, offset, 6000)
        assert page == BaseSandbox.read(tools_backend, path, offset, 6000), offset
        offset, pages = page.next_offset, pages + 1
    # Same size, other content: the index of the old version must not be used.
    second = first.replace(b"y", b"w")
    assert len(second) == len(first)
    run_blocking(session.files.write_bytes(path, second))
    assert offset is not None
    page = tools_backend.read(path, offset, 6000)
    assert page == BaseSandbox.read(tools_backend, path, offset, 6000)
    assert "w" in (page.file_data or {}).get("content", "")
    # Shorter: the old line starts are past the new end.
    run_blocking(session.files.write_bytes(path, first[: 2 * MIB]))
    page = tools_backend.read(path, offset, 6000)
    assert page == BaseSandbox.read(tools_backend, path, offset, 6000)
    # Replaced by a directory, then removed.
    run_blocking(session.files.remove(path))
    run_blocking(session.files.make_dir(path))
    assert tools_backend.read(path, 0, 10) == BaseSandbox.read(tools_backend, path, 0, 10)
    run_blocking(session.files.remove(path))
    assert tools_backend.read(path, 0, 10) == BaseSandbox.read(tools_backend, path, 0, 10)


async def test_async_paged_read_through_a_symlink(tools_backend: OpenSandboxBackend) -> None:
    session = tools_backend.session
    target = f"{ROOT}/big/target.txt"
    link = f"{ROOT}/big/link.txt"
    await session.files.write_bytes(target, _text(2 * MIB, b"\n"))
    await session.commands.run(["ln", "-sfn", "--", target, link])
    for offset in (0, 2000, 4000, 30_000, 32_000, 40_000):
        native = await tools_backend.aread(link, offset, 2000)
        assert native == await BaseSandbox.aread(tools_backend, link, offset, 2000), offset
    await session.files.write_bytes(target, _text(2 * MIB, b"\n").replace(b"y", b"v"))
    native = await tools_backend.aread(link, 2000, 2000)
    assert native == await BaseSandbox.aread(tools_backend, link, 2000, 2000)
    assert "v" in (native.file_data or {}).get("content", "")


EDIT_CASES: list[tuple[str, bytes | None, str, str, bool]] = [
    # (name, content or None for a prepared special path, old, new, replace_all)
    ("one.txt", b"hello world\n", "world", "there", False),
    ("twice.txt", b"a x a x\n", "x", "y", False),
    ("twice-all.txt", b"a x a x\n", "x", "y", True),
    ("none.txt", b"abc\n", "zzz", "y", False),
    ("crlf.txt", b"one\r\ntwo\r\nthree\r\n", "one\ntwo", "1\n2", False),
    ("mixed.txt", b"a\nb\r\na\nb\r\n", "a\nb", "c\nd", True),
    ("unicode.txt", "héllo 世界 🎉\n".encode(), "世界", "wörld", False),
    (
        "hostile.txt",
        b"x = '$HOME' \"q\" \\n `id`\n",
        "'$HOME' \"q\" \\n `id`",
        "$(rm -rf /)",
        False,
    ),
    ("delete.txt", b"keep drop keep\n", " drop", "", False),
    ("binary.txt", b"\xff\xfe\x00abc", "abc", "d", False),
    ("empty.txt", b"", "a", "b", False),
    ("big-payload.txt", b"start " + b"q" * 60_000 + b" end\n", "q" * 60_000, "r" * 60_001, False),
    ("price$5.txt", b"dollar\n", "dollar", "euro", False),
    ("dir", None, "a", "b", False),
    ("missing.txt", None, "a", "b", False),
    ("fifo", None, "a", "b", False),
    ("dangling", None, "a", "b", False),
]


def _prepare(session: object, root: str) -> None:
    script = (
        'set -e; r="$1"; rm -rf -- "$r"; mkdir -p -- "$r/dir"; mkfifo "$r/fifo"; '
        'ln -s nowhere "$r/dangling"'
    )
    done = run_blocking(session.commands.run(["bash", "-c", script, "prepare", root]))  # type: ignore[attr-defined]
    assert done.exit_code == 0, done.stderr


def test_edit_matches_base_sandbox(tools_backend: OpenSandboxBackend) -> None:
    session = tools_backend.session
    root = f"{ROOT}/edit"
    _prepare(session, root)
    for name, content, old, new, replace_all in EDIT_CASES:
        path = f"{root}/{name}"
        outcomes = []
        for edit in (tools_backend.edit, lambda *a: BaseSandbox.edit(tools_backend, *a)):
            if content is not None:
                run_blocking(session.files.write_bytes(path, content))
            result = edit(path, old, new, replace_all)
            after = run_blocking(session.files.read_bytes(path)) if content is not None else None
            outcomes.append((result, after))
        assert outcomes[0] == outcomes[1], name


def test_edit_keeps_inode_mode_and_symlink(tools_backend: OpenSandboxBackend) -> None:
    session = tools_backend.session
    root = f"{ROOT}/edit-meta"
    script = (
        'set -e; r="$1"; rm -rf -- "$r"; mkdir -p -- "$r"; printf "a\\r\\nb\\r\\n" > "$r/t.txt"; '
        'chmod 640 "$r/t.txt"; ln -s t.txt "$r/link"'
    )
    assert run_blocking(session.commands.run(["bash", "-c", script, "s", root])).exit_code == 0
    stat = ["stat", "-c", "%i %a %F", f"{root}/t.txt", f"{root}/link"]
    before = run_blocking(session.commands.run(stat)).stdout
    result = tools_backend.edit(f"{root}/link", "a\nb", "c\nd")
    assert result.error is None and result.occurrences == 1
    assert run_blocking(session.files.read_bytes(f"{root}/t.txt")) == b"c\r\nd\r\n"
    assert run_blocking(session.commands.run(stat)).stdout == before


async def test_aedit_matches_base_sandbox(tools_backend: OpenSandboxBackend) -> None:
    session = tools_backend.session
    path = f"{ROOT}/edit-async/a.txt"
    results = []
    for edit in (tools_backend.aedit, lambda *a: BaseSandbox.aedit(tools_backend, *a)):
        await session.files.write_bytes(path, b"x\r\ny\r\nx\r\ny\r\n")
        results.append((await edit(path, "x\ny", "z", False), await session.files.read_bytes(path)))
        await session.files.write_bytes(path, b"x\r\ny\r\nx\r\ny\r\n")
        results.append((await edit(path, "x\ny", "z", True), await session.files.read_bytes(path)))
        results.append((await edit(path, "", "z", True), await session.files.read_bytes(path)))
    assert results[:3] == results[3:]


def test_the_native_paths_answer_without_the_scripts(tools_backend: OpenSandboxBackend) -> None:
    """The comparisons above would also pass if every call fell back to the scripts."""
    session = tools_backend.session
    path = f"{ROOT}/native/one.txt"
    run_blocking(session.files.write_bytes(path, b"alpha beta\n"))
    assert run_blocking(session.files.edit(path, "beta", "gamma")) == 1
    assert run_blocking(session.files.read_bytes(path)) == b"alpha gamma\n"
    listed = run_blocking(list_directory(session, f"{ROOT}/native"))
    assert listed is not None and listed.entries == (DirectoryEntry(path, False),)
    hostile = run_blocking(list_directory(session, f"{ROOT}/dir"))
    assert hostile is not None and hostile.entries is not None
    assert {*HOSTILE_NAMES, NON_UTF8_NAME} <= {e.path[len(ROOT) + 5 :] for e in hostile.entries}
    big = f"{ROOT}/native/big.txt"
    run_blocking(session.files.write_bytes(big, _text(2 * MIB, b"\n")))
    page = run_blocking(native_read(session, big, 100, 10))  # None would mean: the script
    assert page is not None and page.start_line == 101 and page.total_lines is None


GLOB_CASES: list[tuple[str, str | None]] = [
    ("*", f"{ROOT}/dir"),
    ("*.txt", f"{ROOT}/dir"),
    ("**/*", ROOT),
    ("**", ROOT),
    ("**/*.d", ROOT),
    ("dir/*", ROOT),
    ("/dir/*", ROOT),
    ("*/sub/*", ROOT),
    ("**/f1?", ROOT),
    ("**/f[0-9]", ROOT),
    ("**/f[!1]*", ROOT),
    ("**/f[^1]*", ROOT),
    ("{plain,binary}.*", f"{ROOT}/dir"),
    ("**/{f1,f2}{0,}", ROOT),
    (".hidden", f"{ROOT}/dir"),
    (".*", f"{ROOT}/dir"),
    ("**/.*", ROOT),
    ("*star*", f"{ROOT}/dir"),
    ("price$5.txt", f"{ROOT}/dir"),
    ("**/nl*", ROOT),
    ("**/*name*", ROOT),
    ("*name", f"{ROOT}/dir"),
    ("bad*", f"{ROOT}/dir"),
    ("*  ", f"{ROOT}/dir"),
    ("dir/**", ROOT),
    ("dir//plain.txt", ROOT),
    ("dir/", ROOT),
    ("[", f"{ROOT}/dir"),
    ("back\\slash", f"{ROOT}/dir"),
    ("../dir/*", ROOT),
    ("{a,b}" * 12, ROOT),
    ("*", f"{ROOT}/dir/link-to-dir"),
    ("*", f"{ROOT}/link-to-root-dir"),
    ("*", f"{ROOT}/missing"),
    ("*", f"{ROOT}/dir/plain.txt"),
    ("*", "native-tools-relative"),
    ("link*", f"{ROOT}/dir"),
    ("*", f"{ROOT}/escape"),
    ("workspace/native-tools/dir/*.txt", "/"),
    ("*.txt", None),
]


def test_glob_matches_base_sandbox(tools_backend: OpenSandboxBackend) -> None:
    session = tools_backend.session
    script = (
        'set -e; r="$1"; mkdir -p -- "$r/escape/inner"; ln -sfn /etc/hostname "$r/escape/out"; '
        'ln -sfn inner/f "$r/escape/in"; : > "$r/escape/inner/f"; ln -sfn .. "$r/escape/up"'
    )
    assert run_blocking(session.commands.run(["bash", "-c", script, "s", ROOT])).exit_code == 0
    for pattern, path in GLOB_CASES:
        native = tools_backend.glob(pattern, path)
        assert native == BaseSandbox.glob(tools_backend, pattern, path), (pattern, path)
    listed = run_blocking(native_glob(session, "**/*", ROOT))
    assert listed is not None and len(listed.matches or []) > 50  # answered natively
    found = {m["path"].rsplit("/", 1)[-1] for m in listed.matches or []}
    assert {*HOSTILE_NAMES, NON_UTF8_NAME} - {".hidden", "back\\slash"} <= found  # `\\` is `/`


async def test_aglob_matches_base_sandbox(tools_backend: OpenSandboxBackend) -> None:
    for pattern, path in GLOB_CASES[:6]:
        native = await tools_backend.aglob(pattern, path)
        assert native == await BaseSandbox.aglob(tools_backend, pattern, path), (pattern, path)


GREP_SETUP = r"""
set -e
g="$1"
rm -rf -- "$g"; mkdir -p -- "$g/src/deep" "$g/.git" "$g/.hidden-dir"
printf 'needle one\r\nplain needle\nno match here\n' > "$g/crlf.txt"
printf 'cr\rneedle\rend\n' > "$g/cr.txt"
printf 'nel\xc2\x85needle\nsep\xe2\x80\xa8needle\n' > "$g/unicode.txt"
printf 'bad\xff\xfeneedle\n\xffneedle\xff\n' > "$g/bytes.txt"
printf '\0\1needle\0\2\n' > "$g/binary.bin"
printf 'last needle without newline' > "$g/src/deep/tail.py"
printf 'needle in git\n' > "$g/.git/config"
printf 'needle hidden\n' > "$g/.hidden-dir/h.py"
printf 'needle: colon\n' > "$g/src/a:b.py"
printf 'needle\n' > "$g/src/name$(printf '\r')cr.py"
printf 'needle\n' > "$g/src/bad$(printf '\377')name.py"
for i in $(seq 1 3000); do echo "needle $i"; done > "$g/many.txt"
"""
GREP = f"{ROOT}/grep"
GREP_CASES: list[tuple[str, str | None, str | None, int | None]] = [
    ("needle", GREP, None, None),
    ("needle", GREP, "*.py", None),
    ("needle", GREP, "src/**/*.py", None),
    ("needle", GREP, "**/*.txt", None),
    ("needle", GREP, None, 10),
    ("needle", GREP, None, 3017),
    ("needle", GREP, "*.py", 2),
    ("needle", f"{GREP}/many.txt", None, None),
    ("needle", f"{GREP}/binary.bin", None, None),
    ("\r", GREP, None, None),
    ("\u0085needle", GREP, None, None),
    ("\u2028", GREP, None, None),
    ("no such text anywhere", GREP, None, None),
    ("needle\nplain", GREP, None, None),
    ("[", GREP, None, None),
    ("-e", GREP, None, None),
    ("needle", GREP, "[", None),
    ("needle", GREP, "../*", None),
    ("needle", GREP, "src/../../*", None),
    ("needle", GREP, "{a,b", None),
    ("needle", f"{GREP}/missing", None, None),
    ("needle", f"{GREP}/missing", "a/*.py", None),
    ("needle", f"{GREP}/.git", None, None),
    ("needle", "grep-relative", None, None),
    ("x", f"{ROOT}/dir", None, None),
    ("x", f"{ROOT}/dir", "*name*", None),
]


def _grep_tree(backend: OpenSandboxBackend) -> None:
    done = run_blocking(backend.session.commands.run(["bash", "-c", GREP_SETUP, "s", GREP]))
    assert done.exit_code == 0, done.stderr


def test_grep_matches_base_sandbox(tools_backend: OpenSandboxBackend) -> None:
    _grep_tree(tools_backend)
    ran = tools_backend.execute("printf 'a\\0b\\rc\\302\\205d\\377\\n'; exit 3")
    assert ran.exit_code == 3 and "\0" in ran.output  # a NUL byte reaches the agent as it is
    for pattern, path, glob, cap in GREP_CASES:
        native = tools_backend.grep(pattern, path, glob, max_count=cap)
        base = BaseSandbox.grep(tools_backend, pattern, path, glob, max_count=cap)
        assert native == base, (pattern, path, glob, cap)
    every = tools_backend.grep("needle", GREP)
    assert every.error is None and len(every.matches or []) > 3000
    texts = {m["text"] for m in every.matches or []}
    assert {"sep\u2028needle", "plain needle"} <= texts
    capped = tools_backend.grep("needle", GREP, max_count=10)
    assert capped.truncated and len(capped.matches or []) == 10
    names = {
        m["path"].rsplit("/", 1)[-1] for m in tools_backend.grep("x", f"{ROOT}/dir").matches or []
    }
    # Names without "\n" come back whole (grep's records are lines, for BaseSandbox too).
    assert {"plain.txt", "é中文🎉", "cr\rname", "nel\u0085name", "ls\u2028name"} <= names
    assert "bad\ufffdname" in names  # a non-UTF-8 byte, decoded as any command output
    assert tools_backend.grep("needle", f"{GREP}/missing").matches == []


async def test_agrep_matches_base_sandbox(tools_backend: OpenSandboxBackend) -> None:
    _grep_tree(tools_backend)
    for pattern, path, glob, cap in GREP_CASES[:8]:
        native = await tools_backend.agrep(pattern, path, glob, max_count=cap)
        base = await BaseSandbox.agrep(tools_backend, pattern, path, glob, max_count=cap)
        assert native == base, (pattern, path, glob, cap)


async def test_core_read_range_and_edit(tools_backend: OpenSandboxBackend) -> None:
    """The two core calls the native tools add: ranged reads and in-place replaces."""
    session = tools_backend.session
    base = f"{ROOT}/core-calls"
    data = bytes(range(256)) * 4
    for name in ("plain.bin", "price$5.bin"):
        await session.files.write_bytes(f"{base}/{name}", data)
        path = f"{base}/{name}"
        assert await session.files.read_range(path, 0, 10) == data[:10]
        assert await session.files.read_range(path, 1000, 100) == data[1000:]
        assert await session.files.read_range(path, 1024, 5) == b""
        assert await session.files.read_range(path, 5000, 5) == b""
        assert await session.files.read_range(path, 3, 0) == b""
    await session.commands.run(["ln", "-sfn", "plain.bin", f"{base}/link"])
    assert await session.files.read_range(f"{base}/link", 250, 10) == data[250:260]
    with pytest.raises(FileNotFoundError):
        await session.files.read_range(f"{base}/missing", 0, 1)
    with pytest.raises(IsADirectoryError):
        await session.files.read_range(base, 0, 1)
    await session.commands.run(["mkfifo", f"{base}/fifo"])
    with pytest.raises(OSError, match="FIFO"):
        await session.files.read_range(f"{base}/fifo", 0, 1)
    with pytest.raises(ValueError, match="offset"):
        await session.files.read_range(f"{base}/plain.bin", -1, 1)

    await session.files.write_bytes(f"{base}/t.txt", b"a-b-a\n")
    assert await session.files.edit(f"{base}/t.txt", "a", "xyz", replace_all=True) == 2
    assert await session.files.read_bytes(f"{base}/t.txt") == b"xyz-b-xyz\n"
    with pytest.raises(EditError, match="2 times") as ambiguous:
        await session.files.edit(f"{base}/t.txt", "xyz", "q")
    assert (ambiguous.value.reason, ambiguous.value.occurrences) == ("ambiguous", 2)
    with pytest.raises(EditError, match="not found"):
        await session.files.edit(f"{base}/t.txt", "nothing like it", "q")
    assert await session.files.read_bytes(f"{base}/t.txt") == b"xyz-b-xyz\n"
    with pytest.raises(FileNotFoundError):
        await session.files.edit(f"{base}/missing.txt", "a", "b")
    with pytest.raises(NotTextError):
        await session.files.edit(f"{base}/plain.bin", "a", "b")
    await session.files.write_bytes(f"{base}/price$5.txt", b"a\n")
    with pytest.raises(ValueError, match="rewritten"):
        await session.files.edit(f"{base}/price$5.txt", "a", "b")
    with pytest.raises(ValueError, match="non-empty"):
        await session.files.edit(f"{base}/t.txt", "", "b")


# -- write, delete, and generated trees: every tool, native against BaseSandbox's own ------------


def _outcome(call: Callable[..., object], *args: object) -> object:
    """A call's result, or the type of what it raised (both sides must agree on either)."""
    try:
        return call(*args)
    except ValueError:  # e.g. a name that is not UTF-8: the core's ConfigurationError, or
        return ("raised", "ValueError")  # BaseSandbox's UnicodeEncodeError, both ValueErrors
    except Exception as exc:
        return ("raised", type(exc).__name__)


def _snapshot(backend: OpenSandboxBackend, root: str) -> str:
    """Every path under `root` with its type, size and content hash (the tree's state)."""
    # The core's write to a directory may leave its temporary sibling (`.NAME.osb-*.tmp`) for
    # a moment after failing (the upload lands after the cleanup); it is not the tree's state.
    script = (
        'cd -- "$1" 2>/dev/null || exit 0; find . -name ".*.osb-*.tmp" -prune -o '
        '-printf "%y %s %P\\0" -type f -exec md5sum {} +'
    )
    done = run_blocking(backend.session.commands.run(["bash", "-c", script, "snap", root]))
    return done.stdout


WRITE_CASES: list[tuple[str, str]] = [
    ("new.txt", "hello\n"),
    ("nested/a/b/c.txt", "deep"),
    ("with space/nl\nname\u0085.txt", "odd names"),
    (".hidden/.file", ""),
    ("crlf.txt", "a\r\nb\r\n"),
    ("unicode-é中🎉.md", "é中🎉\u2028line\n" * 100),
    ("large.txt", ("y" * 1023 + "\n") * 2048),
    ("existing.txt", "overwritten"),
    ("a-dir", "into a directory"),
    ("a-file/below.txt", "under a file"),
    ("price$5 `id`.txt", "$(echo no)"),
]


def test_write_matches_base_sandbox(tools_backend: OpenSandboxBackend) -> None:
    session = tools_backend.session
    root = f"{ROOT}/write"
    prepare = 'set -e; r="$1"; rm -rf -- "$r"; mkdir -p -- "$r/a-dir"; : > "$r/a-file"; echo old > "$r/existing.txt"'
    for name, content in [*WRITE_CASES, ("relative-write.txt", "x")]:
        path = name if name.startswith("relative") else f"{root}/{name}"
        states = []
        for write in (tools_backend.write, lambda p, c: BaseSandbox.write(tools_backend, p, c)):
            assert (
                run_blocking(session.commands.run(["bash", "-c", prepare, "p", root])).exit_code
                == 0
            )
            states.append((_outcome(write, path, content), _snapshot(tools_backend, root)))
        (native, native_tree), (base, base_tree) = states
        assert native_tree == base_tree, name
        if isinstance(base, WriteResult) and (base.error or "").startswith("Traceback"):
            # BaseSandbox's parent-directory script died (a parent is a file) and its
            # traceback is the error text; the native write says `invalid_path`.
            assert isinstance(native, WriteResult) and native.error and native.path is None
        else:
            assert native == base, name


async def test_awrite_matches_base_sandbox(tools_backend: OpenSandboxBackend) -> None:
    path = f"{ROOT}/awrite/x y/\u0085.txt"
    results = []
    for write in (tools_backend.awrite, lambda p, c: BaseSandbox.awrite(tools_backend, p, c)):
        await tools_backend.session.commands.run(["rm", "-rf", "--", f"{ROOT}/awrite"])
        results.append(
            (await write(path, "é\r\n"), await tools_backend.session.files.read_bytes(path))
        )
    assert results[0] == results[1]


DELETE_SETUP = r"""
set -e
r="$1"
rm -rf -- "$r"
mkdir -p -- "$r/tree/a/b/c" "$r/tree/.hidden" "$r/empty-dir" "$r/keep"
printf 'x' > "$r/file.txt"; printf 'x' > "$r/tree/a/b/c/deep.txt"; : > "$r/tree/.hidden/.h"
printf 'x' > "$r/with space"; printf 'x' > "$r/nl
name"; printf 'x' > "$r/nel$(printf '\302\205')name"; printf 'x' > "$r/price\$5"
printf 'keep' > "$r/keep/target.txt"
ln -s keep/target.txt "$r/link-to-file"; ln -s keep "$r/link-to-dir"; ln -s nowhere "$r/dangling"
mkfifo "$r/fifo"
"""
DELETE_CASES = [
    "file.txt",
    "tree",
    "tree/a/b/c/deep.txt",
    "tree/.hidden",
    "empty-dir",
    "with space",
    "nl\nname",
    "nel\u0085name",
    "price$5",
    "link-to-file",
    "link-to-dir",
    "dangling",
    "fifo",
    "missing",
    "missing/below",
    "file.txt/below",
]


def test_delete_matches_base_sandbox(tools_backend: OpenSandboxBackend) -> None:
    """`delete` is native (the core's remove, no shell `rm`) and leaves the tree BaseSandbox's
    `rm -rf` leaves: links removed, not their targets; directories recursively."""
    session = tools_backend.session
    root = f"{ROOT}/delete"
    assert type(tools_backend).delete is not BaseSandbox.delete
    for name in DELETE_CASES:
        path = f"{root}/{name}"
        states = []
        for delete in (tools_backend.delete, lambda p: BaseSandbox.delete(tools_backend, p)):
            assert (
                run_blocking(
                    session.commands.run(["bash", "-c", DELETE_SETUP, "s", root])
                ).exit_code
                == 0
            )
            states.append((_outcome(delete, path), _snapshot(tools_backend, root)))
        assert states[0] == states[1], name
        assert states[0][0].error is not None or name not in states[0][1]


async def test_adelete_matches_base_sandbox(tools_backend: OpenSandboxBackend) -> None:
    session = tools_backend.session
    root = f"{ROOT}/adelete"
    for name in ("tree", "link-to-dir", "missing"):
        states = []
        for delete in (tools_backend.adelete, lambda p: BaseSandbox.adelete(tools_backend, p)):
            done = await session.commands.run(["bash", "-c", DELETE_SETUP, "s", root])
            assert done.exit_code == 0
            states.append((await delete(f"{root}/{name}"), _snapshot(tools_backend, root)))
        assert states[0] == states[1], name


NAME_POOL = [
    "plain",
    "with space",
    "nl\nname",
    "nel\u0085name",
    "sep\u2028name",
    "cr\rname",
    ".hidden",
    "é中🎉",
    "q'uote",
    "$HOME",
    "-dash",
    "bad\udcffname",
    "trail ",
]


def _generated_tree(seed: int) -> tuple[str, list[tuple[str, bytes]], list[str]]:
    """A random tree: (setup script, files as (relative path, bytes), directories)."""
    rng = random.Random(seed)
    dirs = [""]
    files: list[tuple[str, bytes]] = []
    for _ in range(rng.randint(4, 8)):
        parent = rng.choice(dirs)
        name = rng.choice(NAME_POOL) + f"-d{len(dirs)}"
        dirs.append(f"{parent}/{name}".lstrip("/"))
    kinds = ["empty", "text", "crlf", "binary", "bad-late", "large", "unicode"]
    for i in range(rng.randint(10, 18)):
        kind = rng.choice(kinds)
        suffix = rng.choice([".txt", ".py", "", ".md", ".png"])
        rel = f"{rng.choice(dirs)}/{rng.choice(NAME_POOL)}-{i}-{kind}{suffix}".lstrip("/")
        body = {
            "empty": b"",
            "text": b"".join(b"line %d needle\n" % n for n in range(rng.randint(1, 300))),
            "crlf": b"".join(b"row %d\r\n" % n for n in range(rng.randint(1, 50))) + b"end",
            "binary": bytes(rng.randrange(256) for _ in range(rng.randint(1, 3000))),
            "bad-late": b"ok\n" * 4000 + b"\xff\xfe\n",
            "large": b"".join(b"%07d " % n + b"z" * 90 + b"\n" for n in range(12_000)),
            "unicode": "é中🎉 needle\u0085\u2028x\n".encode() * rng.randint(1, 40),
        }[kind]
        files.append((rel, body))
    return "", files, dirs


def _raw(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


async def _make_tree(
    backend: OpenSandboxBackend, root: str, seed: int
) -> tuple[list[str], list[str]]:
    """Build the generated tree under `root` by names as bytes; (file paths, dir paths)."""
    _, files, dirs = _generated_tree(seed)
    session = backend.session
    await session.commands.run(["rm", "-rf", "--", root])
    args = [base64.b64encode(_raw(d)).decode() for d in dirs]
    decode = 'set -e; r="$1"; shift; for d in "$@"; do n=$(printf %s "$d" | base64 -d; printf .); mkdir -p -- "$r/${n%.}"; done'
    done = await session.commands.run(["bash", "-c", decode, "mk", root, *args])
    assert done.exit_code == 0, done.stderr
    safe: list[tuple[str, bytes]] = []
    for rel, body in files:
        path = f"{root}/{rel}"
        if "\udcff" in path:  # not a str the file API can send: made by a command
            writer = 'n=$(printf %s "$2" | base64 -d; printf .); printf %s "$3" | base64 -d > "$1/${n%.}"'
            body64 = base64.b64encode(body).decode()
            rel64 = base64.b64encode(_raw(rel)).decode()
            done = await session.commands.run(["bash", "-c", writer, "w", root, rel64, body64])
            assert done.exit_code == 0, done.stderr
        else:
            safe.append((path, body))
    await session.files.upload_files(safe)
    return [f"{root}/{rel}" for rel, _ in files], [f"{root}/{d}".rstrip("/") for d in dirs]


TREE_GLOBS = ["*", "**/*", "*.txt", "**/*.py", "*needle*", ".*", "**/.*", "*/*", "{*.md,*.png}"]
TREE_WINDOWS = [(0, 2000), (5, 10), (2000, 2000), (11_990, 100), (100_000, 1)]


def _restore(backend: OpenSandboxBackend, pristine: str, root: str) -> None:
    """Put the generated tree back as it was built (one command)."""
    script = 'rm -rf -- "$2" && cp -a -- "$1" "$2"'
    done = run_blocking(backend.session.commands.run(["bash", "-c", script, "r", pristine, root]))
    assert done.exit_code == 0, done.stderr


@pytest.mark.long
@pytest.mark.parametrize("seed", [1, 2])
def test_generated_trees_match_base_sandbox(tools_backend: OpenSandboxBackend, seed: int) -> None:
    """A random tree of odd names (spaces, newlines, NEL, U+2028, non-UTF-8 bytes, hidden),
    nested, with empty, binary, CRLF, large and late-invalid files: `ls` of every directory,
    `glob`, `read` of every file in several windows, `grep`, then `edit` and `delete`, all equal
    to BaseSandbox's own answers on the installed deepagents release."""
    root = f"{ROOT}/gen-{seed}"
    pristine = f"{ROOT}/gen-{seed}-pristine"
    files, dirs = run_blocking(_make_tree(tools_backend, pristine, seed))
    files = [root + f[len(pristine) :] for f in files]
    dirs = [root + d[len(pristine) :] for d in dirs]
    _restore(tools_backend, pristine, root)
    base = BaseSandbox
    checked = 0
    for directory in dirs:
        native = _outcome(tools_backend.ls, directory)
        assert native == _outcome(base.ls, tools_backend, directory), directory
        checked += 1
    for pattern in TREE_GLOBS:
        native = tools_backend.glob(pattern, root)
        assert native == base.glob(tools_backend, pattern, root), pattern
        checked += 1
    assert tools_backend.grep("needle", root) == base.grep(tools_backend, "needle", root)
    for path in files:
        for offset, limit in TREE_WINDOWS:
            native = _outcome(tools_backend.read, path, offset, limit)
            expected = _outcome(base.read, tools_backend, path, offset, limit)
            assert native == expected, (path, offset, limit)
            checked += 1
    edits = (("needle", "pin", False), ("needle", "pin", True), ("\r\n", "\n", True))
    for path in files[:3]:
        for old, new, every in edits:
            states = []
            for edit in (tools_backend.edit, lambda *a: base.edit(tools_backend, *a)):
                _restore(tools_backend, pristine, root)
                outcome = _outcome(edit, path, old, new, every)
                states.append((outcome, _snapshot(tools_backend, root)))
            assert states[0] == states[1], (path, old, every)
            checked += 1
    for path in [*files[1:8:3], *dirs[1:2]]:
        states = []
        for delete in (tools_backend.delete, lambda p: base.delete(tools_backend, p)):
            _restore(tools_backend, pristine, root)
            states.append((_outcome(delete, path), _snapshot(tools_backend, root)))
        assert states[0] == states[1], path
        checked += 1
    assert checked > 60
