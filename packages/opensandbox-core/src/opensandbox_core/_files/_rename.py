"""The command that puts an uploaded temporary file in place over an existing target (pure: the
script, its arguments and what its exit status means; `_atomic` runs it).

execd's own move (`POST /files/mv`) refuses a target that exists, so replacing a file atomically
takes one command, `mv -f`. The command also does what would otherwise cost requests of their
own: it inspects the target (a symlink is written through by the caller, a directory or a special
file is refused), reads the mode and owner to keep, and, given a marker, waits for the upload to
land, so that it can be sent together with the upload instead of after it:

- the upload carries the content and then an empty marker file in one request; execd writes the
  pairs of a form one after the other, each to its end, so the marker appears only once the
  temporary file is complete (mode and owner set);
- the command inspects the target while the upload is under way (at most one `stat`, for the
  mode to keep and, when the shell is not its owner, the owner), then waits for the marker:
  under bash without forking, by `read -t` on a pseudo-terminal nobody writes to (a sleep without
  a process: 0.5 ms, then every millisecond, so that the rename follows the upload closely),
  elsewhere (busybox `sh`) with `sleep`;
- then it applies the mode (only where the one the upload gave is not the one to keep: setuid,
  setgid and sticky bits, or a mode the caller guessed wrong), prints the mode the file got, and
  replaces itself with `mv -f`, whose rename is atomic.

Everything is passed as positional arguments (`set --`, each quoted): execd expands nothing in a
command's text, so `$` and spaces in paths are safe.
"""

from __future__ import annotations

import errno
import shlex
from typing import Final

from opensandbox_core._errors import new_path_error

__all__ = ["LINK", "TIMED_OUT", "argv_text", "final_mode", "refusal"]

LINK: Final = 83
"""Exit status: the target is a symlink (the caller writes through it another way)."""
_DIRECTORY: Final = 84
_SPECIAL: Final = 85
TIMED_OUT: Final = 86
"""Exit status: the marker did not appear in time (the upload never landed)."""

INSPECT: Final = f"""[ -L "$d" ] && exit {LINK}
[ -d "$d" ] && exit {_DIRECTORY}
if [ -e "$d" ]; then
[ -f "$d" ] || exit {_SPECIAL}
[ -O "$d" ] && [ -G "$d" ] || o=1
if [ -z "$w" ]; then s=$(stat -L -c '%a %u:%g' -- "$d") || exit 1; w=${{s%% *}} o=${{o:+${{s#* }}}}
elif [ -n "$o" ]; then o=$(stat -L -c %u:%g -- "$d") || o=; fi
"""
"""The target's inspection, shared by this script and `_inline`'s: with `d` the target, `w` the
mode asked for ("": keep the target's) and `o` empty, it exits for a symlink (LINK), a directory
or a special file, and for an existing file sets `w` to the mode to give and `o` to the owner to
keep (empty: ours). It leaves `if [ -e "$d" ]` open: the script adds its `else` branch for a new
target and the `fi`."""

# $1 temp, $2 target, $3 marker ("": the upload has landed), $4 the mode of a new target, $5 the
# mode asked for ("": keep the target's), $6 the bits the upload gave the temporary file, $7 the
# seconds to wait for the marker.
_SCRIPT: Final = f"""export LC_ALL=C
t=$1 d=$2 m=$3 w=$5 o=
{INSPECT}else w=${{w:-$4}}; fi
if [ -n "$m" ] && [ ! -e "$m" ]; then
if [ -n "${{BASH_VERSION-}}" ] && [ -c /dev/ptmx ] && [ -w /dev/ptmx ]; then
exec 3<>/dev/ptmx; p=0.0005
while [ ! -e "$m" ]; do
[ "$SECONDS" -ge "$7" ] && exit {TIMED_OUT}
read -t $p -u 3 _; [ $? -gt 128 ] || sleep 0.002
p=0.001
done; exec 3<&-
else n=0
while [ ! -e "$m" ]; do
n=$((n+1)); [ "$n" -ge $(($7*250)) ] && exit {TIMED_OUT}
sleep 0.004 2>/dev/null || sleep 1
done; fi; fi
[ -n "$o" ] && chown -- "$o" "$t" 2>/dev/null
[ "$w" = "$6" ] || chmod -- "$w" "$t" || exit 1
echo "$w"
exec mv -f -- "$t" "$d"
"""


def argv_text(
    temp: str,
    target: str,
    *,
    marker: str | None,
    new_mode: int,
    mode: int | None,
    uploaded: int,
    wait: float,
) -> str:
    """The command text that renames `temp` over `target` (see the module docstring).

    `new_mode`: the whole mode of a target that does not exist; `mode`: the one the caller asked
    for (None: keep an existing target's); `uploaded`: the 0o777 bits the upload gave `temp`;
    `wait`: the most seconds to wait for `marker`."""
    args = [
        temp,
        target,
        marker or "",
        format(new_mode, "o"),
        "" if mode is None else format(mode, "o"),
        format(uploaded & 0o777, "o"),
        str(max(1, int(wait) + 1)),
    ]
    return "set -- " + " ".join(shlex.quote(arg) for arg in args) + "\n" + _SCRIPT


def refusal(status: int, target: str) -> OSError | None:
    """The error of the script's refusal to replace `target`, or None for another status."""
    if status == _DIRECTORY:
        return new_path_error(IsADirectoryError, errno.EISDIR, target)
    if status == _SPECIAL:
        return OSError(errno.EINVAL, "Not a regular file; refusing to replace it", target)
    return None


def final_mode(stdout: str) -> int:
    """The whole mode the script gave the file (-1 when it did not say)."""
    text = stdout.strip()
    try:
        return int(text, 8) if text else -1
    except ValueError:
        return -1
