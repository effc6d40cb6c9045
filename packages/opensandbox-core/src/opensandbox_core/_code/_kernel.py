"""What the core runs inside a kernel, and how it reads what comes back (pure: no I/O).

execd loses kernel output (see docs/core.md, "Code"): it has no handler for `display_data`,
and drops messages that arrive after it has seen the reply. So each run's outcome is also written
to a file in the sandbox, by the kernel itself, and read back with one download:

- Python (ipykernel): a setup cell (`python_setup`) installs, once per kernel, a recorder: it
  wraps the kernel's `Session.send`, through which every iopub message goes (stream, display,
  update, execute_result, error), and IPython's `pre_run_cell` / `post_run_cell` events. A run
  is sent as `# opensandbox-run <record path>` plus the caller's code; an input transformer
  (the first of IPython's cleanup transforms) takes that line away before IPython reads the
  cell, so line numbers, cell magics and the last expression are the caller's own. After the
  cell (post_execute included, so matplotlib's inline figures are in), the recorder flushes
  stdout and stderr and writes every message of the cell, in order, as JSON (`parse_python`).
- bash (bash_kernel): each run is one self-contained line (`bash_cell`) that runs the caller's
  code with `eval` in the kernel's shell (state kept), its stdout and stderr through `tee` to
  two files (so they still stream), then writes the exit status and both outputs as one file
  (`parse_bash`).

The setup also records the kernel's process id and start time (`kernel_info`), which the core
checks while a run takes long: a kernel that died (Jupyter restarts it, execd's run never ends)
is seen within seconds (`alive_script`).
"""

from __future__ import annotations

import base64
import json
import shlex
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "MARK",
    "KernelInfo",
    "Record",
    "alive_script",
    "bash_cell",
    "bash_setup",
    "parse_bash",
    "parse_info",
    "parse_python",
    "python_cell",
    "python_setup",
]

MARK: Final = "# opensandbox-run "
"""The first line of every Python run the core sends: the rest of it is the record's path."""

_RECORDER = r"""
import json, os, sys, threading
from IPython import get_ipython

MARK = "# opensandbox-run "
KINDS = ("stream", "display_data", "update_display_data", "execute_result", "error")


class Recorder:
    def __init__(self, ip):
        self.ip, self.path, self.items, self.lock = ip, None, [], threading.Lock()

    def install(self):
        ip = self.ip
        ip.input_transformers_cleanup.insert(0, self.strip)
        ip.events.register("pre_run_cell", self.pre)
        ip.events.register("post_run_cell", self.post)
        session = ip.kernel.session
        original = session.send

        def send(stream, msg_or_type, content=None, *args, **kwargs):
            if self.path is not None:
                try:
                    self.keep(msg_or_type, content)
                except Exception:
                    pass
            return original(stream, msg_or_type, content, *args, **kwargs)

        session.send = send

    @staticmethod
    def strip(lines):
        return lines[1:] if lines and lines[0].startswith(MARK) else lines

    def keep(self, msg_or_type, content):
        if isinstance(msg_or_type, dict):
            kind = msg_or_type.get("header", {}).get("msg_type") or msg_or_type.get("msg_type")
            content = msg_or_type.get("content", content)
        else:
            kind = msg_or_type
        if kind not in KINDS or not isinstance(content, dict):
            return
        if kind == "stream":
            item = ["stream", content.get("name"), content.get("text", "")]
        elif kind == "error":
            tb = content.get("traceback") or []
            item = ["error", content.get("ename", ""), content.get("evalue", ""), tb]
        elif kind == "execute_result":
            item = ["result", content.get("data") or {}, content.get("execution_count")]
        else:
            shown = (content.get("transient") or {}).get("display_id")
            tag = "update" if kind == "update_display_data" else "display"
            item = [tag, content.get("data") or {}, shown]
        with self.lock:
            self.items.append(item)

    def pre(self, info=None, *rest):
        raw = getattr(info, "raw_cell", None) or ""
        self.path = None
        with self.lock:
            self.items = []
        if raw.startswith(MARK):
            self.path = raw.split("\n", 1)[0][len(MARK):].strip() or None

    def post(self, result=None, *rest):
        path = self.path
        if path is None:
            return
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        self.path = None
        with self.lock:
            items, self.items = self.items, []
        count = getattr(result, "execution_count", None)
        data = json.dumps({"v": 1, "count": count, "items": items}, default=repr)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".part", "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(data)
        os.replace(path + ".part", path)


def started():
    with open("/proc/self/stat", encoding="ascii") as f:
        return f.read().rsplit(")", 1)[1].split()[19]


def setup(info_path, cwd):
    ip = get_ipython()
    if getattr(ip, "_opensandbox_recorder", None) is None:
        recorder = Recorder(ip)
        recorder.install()
        ip._opensandbox_recorder = recorder
    if cwd:
        os.makedirs(cwd, exist_ok=True)
        os.chdir(cwd)
    os.makedirs(os.path.dirname(info_path), exist_ok=True)
    with open(info_path + ".part", "w", encoding="utf-8") as f:
        f.write("%d\n%s\n%s\n" % (os.getpid(), started(), os.getcwd()))
    os.replace(info_path + ".part", info_path)
"""

_BASH_SETUP = (
    'mkdir -p -- "$(dirname -- {info})" && {cd}'
    "{{ __osb_s=$(cat /proc/$PPID/stat); __osb_s=${{__osb_s##*) }}; set -- $__osb_s; "
    'printf "%s\\n%s\\n%s\\n" "$PPID" "${{20}}" "$PWD" > {info}.part; set --; '
    "mv -f -- {info}.part {info}; unset __osb_s; }}"
)

_BASH_RUN = (
    "__osb_p={path}; "
    'exec {{__osb_o}}> >(tee -- "$__osb_p.out"); __osb_po=$!; '
    'exec {{__osb_e}}> >(tee -- "$__osb_p.err" >&2); __osb_pe=$!; '
    'eval "$(printf %s {code} | base64 -d)" >&$__osb_o 2>&$__osb_e; __osb_rc=$?; '
    "exec {{__osb_o}}>&- {{__osb_e}}>&-; __osb_i=0; "
    "while [ $__osb_i -lt 200 ] && {{ kill -0 $__osb_po || kill -0 $__osb_pe; }} 2>/dev/null; "
    "do sleep 0.01; __osb_i=$((__osb_i+1)); done; "
    '{{ printf "osb-bash 1 %s %s %s\\n" "$__osb_rc" "$(wc -c < "$__osb_p.out")" '
    '"$(wc -c < "$__osb_p.err")"; cat -- "$__osb_p.out" "$__osb_p.err"; }} > "$__osb_p.part"; '
    'mv -f -- "$__osb_p.part" "$__osb_p"; rm -f -- "$__osb_p.out" "$__osb_p.err"; '
    "(exit $__osb_rc)"
)


def python_setup(info_path: str, cwd: str | None) -> str:
    """The cell that installs the recorder (once per kernel), makes and enters `cwd` (an
    absolute path, taken literally) and writes `info_path`; it defines no name in the user's
    namespace."""
    source = _RECORDER + f"\nsetup({info_path!r}, {cwd!r})\n"
    packed = base64.b64encode(source.encode()).decode()
    return (
        "__import__('builtins').exec(__import__('base64').b64decode("
        f"'{packed}').decode(), {{'__name__': 'opensandbox_recorder'}})"
    )


def python_cell(code: str, record_path: str) -> str:
    return f"{MARK}{record_path}\n{code}"


def bash_setup(info_path: str, cwd: str | None) -> str:
    enter = f"mkdir -p -- {shlex.quote(cwd)} && cd -- {shlex.quote(cwd)} && " if cwd else ""
    return _BASH_SETUP.format(info=shlex.quote(info_path), cd=enter)


def bash_cell(code: str, record_path: str) -> str:
    packed = base64.b64encode(code.encode()).decode()
    return _BASH_RUN.format(path=shlex.quote(record_path), code=shlex.quote(packed))


def alive_script(pid: int, started: str) -> str:
    """Prints `alive` while process `pid` started at `started` (clock ticks) runs, else `dead`."""
    return (
        f"s=$(cat /proc/{pid}/stat 2>/dev/null) || {{ echo dead; exit 0; }}; "
        f's=${{s##*) }}; set -- $s; [ "${{20}}" = {shlex.quote(started)} ] '
        "&& echo alive || echo dead"
    )


@dataclass(frozen=True)
class KernelInfo:
    """What a setup cell wrote: the kernel's process (id and start time) and directory."""

    pid: int
    started: str
    cwd: str


def parse_info(data: bytes) -> KernelInfo | None:
    lines = data.decode("utf-8", "replace").split("\n")
    if len(lines) < 3 or not lines[0].strip().isdigit():
        return None
    return KernelInfo(int(lines[0]), lines[1].strip(), lines[2])


@dataclass(frozen=True)
class Record:
    """One run as the kernel saw it: `items` in the order sent (see `parse_python`)."""

    items: list[list[Any]]
    count: int | None


def parse_python(data: bytes) -> Record | None:
    """A Python run's record: items `["stream", name, text]`, `["display", bundle, id]`,
    `["update", bundle, id]`, `["result", bundle, count]`, `["error", ename, evalue, lines]`."""
    try:
        value = json.loads(data.decode("utf-8", "surrogatepass"))
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("items"), list):
        return None
    count = value.get("count")
    items = [item for item in value["items"] if isinstance(item, list) and item]
    return Record(items, count if isinstance(count, int) else None)


def parse_bash(data: bytes) -> Record | None:
    """A bash run's record: its exit status and both outputs, as `parse_python`'s items."""
    head, _, rest = data.partition(b"\n")
    fields = head.decode("ascii", "replace").split()
    if (
        len(fields) != 5
        or fields[:2] != ["osb-bash", "1"]
        or not all(f.isdigit() for f in fields[2:])
    ):
        return None
    status, out_size = int(fields[2]), int(fields[3])
    items: list[list[Any]] = []
    for name, chunk in (("stdout", rest[:out_size]), ("stderr", rest[out_size:])):
        if chunk:
            items.append(["stream", name, chunk.decode("utf-8", "replace")])
    if status:
        items.append(["error", "", str(status), []])
    return Record(items, None)
