"""The daemon's knobs: its execd generation profile and the settings read from the environment.

Read once at import from the environment; `server.main` may overwrite `ACCESS_TOKEN` and `GRACE`
from its command line, so other modules read them as `config.NAME` at the time of use.
"""

from __future__ import annotations

import os

from .goenc import go_duration

DEFAULT_PORT = 44772
# The execd generation this daemon behaves as (README.md, "Generation profiles"): env
# OSB_EXECD_PROFILE; anything else is refused at start.
PROFILES = ("1.0.19", "1.0.18", "1.1", "1.0.16")
PROFILE = os.environ.get("OSB_EXECD_PROFILE", "").strip() or "1.0.19"
# Output framing of command events: "lines" (v1.0.17+ as recorded: one event per line, the
# terminator stripped, a blank line is "\n"), "lines-drop-blank" (the modelled v1.0.16 and
# older: blank lines dropped) or "modern" (the modelled 1.1: events keep their line endings).
FRAMING = {"1.1": "modern", "1.0.16": "lines-drop-blank"}.get(PROFILE, "lines")
# A fault knob of the testbed only: keep-alive pings every 0.1 s during the hold after the last
# event (the real daemon's ping goroutine can land there), so that a stream whose client left
# early always gets written to again after the connection is gone (through a proxy too): EPIPE.
TAIL_PING = os.environ.get("OSB_EXECD_TAIL_PING", "").strip() in ("1", "true", "yes")
# v1.0.18 and older: no /directories/list, /files/info follows symlinks and has no "type", a
# missing path is a 500 (the file handlers read this).
LEGACY_FILE_API = PROFILE in ("1.0.18", "1.0.16")
# Only the modelled 1.1 accepts "argv" (older daemons ignore the unknown field).
ACCEPTS_ARGV = PROFILE == "1.1"
# Every route requires this header with this value when it is set (--access-token too).
ACCESS_TOKEN = os.environ.get("EXECD_ACCESS_TOKEN", "")
TOKEN_HEADER = "X-EXECD-ACCESS-TOKEN"
PING_INTERVAL = 3.0
# Upstream's time per output event (encode, write, flush): the recorded `seq 1 20000` sends its
# 20,000 events, read at exit, over ~280 ms (v1.0.19) and ~320 ms (v1.0.18), Go 1.25.5 builds.
EVENT_WRITE_S = 15.0e-6
# How long a finished command's stream is held open (--graceful-shutdown-timeout too).
GRACE = go_duration(os.environ.get("EXECD_API_GRACE_SHUTDOWN", "1s"))

# -- the interactive terminal, /pty (pty.py) -----------------------------------------------------


def seconds_from_env(name: str, default: float) -> float:
    """A positive number of seconds from env `name`; NaN when it is not one (refused at start
    by :func:`pty_config_problem`)."""
    text = os.environ.get(name, "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        return float("nan")
    return value if value > 0 else float("nan")


PTY_PING_S = seconds_from_env("OSB_EXECD_PTY_PING_S", 30.0)
"""The server pings each connection this often (WebSocket ping, empty payload)."""
PTY_IDLE_S = seconds_from_env("OSB_EXECD_PTY_IDLE_S", 60.0)
"""A connection that sent no frame (pongs count) for this long is ended (TCP closed)."""
PTY_EXIT_LOSS = os.environ.get("OSB_EXECD_PTY_EXIT_LOSS", "").strip() or "race"
"""What happens to the output a shell writes just before it exits: ``race`` (the real daemon's
bug: the exit is handled without waiting for the output still on its way, which is then dropped
when it loses the race), ``always`` (output is held for PTY_EXIT_LOSS_MS before it is passed on,
and what is held when the shell exits is dropped: the last moments' output never reaches a
client nor the replay buffer) or ``never`` (every byte is read before `exit` is sent)."""
PTY_EXIT_LOSS_MS = seconds_from_env("OSB_EXECD_PTY_EXIT_LOSS_MS", 50.0)
PTY_REPLAY_MAX = 1 << 20  # the replay buffer keeps the last 1 MiB of output
PTY_TAKEOVER = PROFILE in ("1.0.19", "1.1")  # v1.0.18 ignores ?takeover=1
PTY_COMMAND = PROFILE in ("1.0.19", "1.1")  # v1.0.18 has no `command` field
PTY_RETRY_S = 0.01  # a takeover retries the session's lock this often


def pty_config_problem() -> str | None:
    """Why the /pty settings from the environment cannot be used (the daemon refuses to start)."""
    if PTY_EXIT_LOSS not in ("race", "always", "never"):
        return (
            f"OSB_EXECD_PTY_EXIT_LOSS={PTY_EXIT_LOSS!r} is not one of race, always, never "
            "(leave it unset for race, as the real daemon)"
        )
    for name, value in (
        ("OSB_EXECD_PTY_PING_S", PTY_PING_S),
        ("OSB_EXECD_PTY_IDLE_S", PTY_IDLE_S),
        ("OSB_EXECD_PTY_EXIT_LOSS_MS", PTY_EXIT_LOSS_MS),
    ):
        if value != value:  # NaN
            return f"{name}={os.environ.get(name)!r} is not a positive number"
    return None


# -- the code interpreter, /code (interpreter.py, jupyter.py) --------------------------------------

JUPYTER_HOST = os.environ.get("JUPYTER_HOST", "").strip()
"""The Jupyter server execd drives (`--jupyter-host` too); empty: not configured."""
JUPYTER_TOKEN = os.environ.get("JUPYTER_TOKEN", "").strip()

# Each knob: env name -> (the real daemon's behaviour, the fixed one[, others]). The first value
# is the default; OSB_EXECD_CODE_BUGS=fixed makes the second the default of every knob (a knob
# set on its own still wins).
CODE_KNOBS: dict[str, tuple[str, ...]] = {
    # display_data (plt.show(), display()) dropped, or sent as a `result` event without a count
    "OSB_EXECD_CODE_DISPLAY": ("dropped", "kept"),
    # execution_complete at the first `idle` of any request on the kernel's WebSocket (often
    # Jupyter's kernel_info nudge: before the run's output), or after the run's own idle, as
    # the last event; `early`: always right after init (deterministic)
    "OSB_EXECD_CODE_COMPLETE": ("first-idle", "last", "early"),
    # the stream ends at the first 100 ms tick after the reply (or a result/error) was seen, and
    # output arriving later is dropped; or it ends once the run's own idle has come too
    "OSB_EXECD_CODE_LATE_OUTPUT": ("lost", "kept"),
    # a kernel that dies (and is restarted by Jupyter) leaves the stream open for good and the
    # context busy; or the stream ends with an `error` event and the context is free
    "OSB_EXECD_CODE_KERNEL_DEATH": ("hang", "error"),
    # a run in a busy context: 200, init, a bare {"code","message"} object; or an `error` event
    "OSB_EXECD_CODE_BUSY": ("bare", "event"),
    # no kernelspec for the language (or no Jupyter): POST /code/context (and a run that needs
    # a default context) never answers; or a 500 at once
    "OSB_EXECD_CODE_NO_KERNEL": ("hang", "error"),
    # a context's cwd is created but the kernel stays in Jupyter's root; or the kernel chdirs
    "OSB_EXECD_CODE_CWD": ("ignored", "applied"),
    # /code with an unknown context id: 500 RUNTIME_ERROR; or 404 CONTEXT_NOT_FOUND
    "OSB_EXECD_CODE_UNKNOWN_ID": ("500", "404"),
    # /code without a language runs the code as a shell command; or in the language's (an id's
    # context, else python's) default context
    "OSB_EXECD_CODE_NO_CONTEXT": ("command", "python"),
}
CODE_BUGS = os.environ.get("OSB_EXECD_CODE_BUGS", "").strip() or "real"


def code_knob(name: str) -> str:
    """A /code knob's value (CODE_KNOBS): env `name`, else its default under CODE_BUGS."""
    values = CODE_KNOBS[name]
    return os.environ.get(name, "").strip() or (values[1] if CODE_BUGS == "fixed" else values[0])


def code_config_problem() -> str | None:
    """Why the /code settings from the environment cannot be used (the daemon refuses to start)."""
    if CODE_BUGS not in ("real", "fixed"):
        return f"OSB_EXECD_CODE_BUGS={CODE_BUGS!r} is not one of real, fixed"
    for name, values in CODE_KNOBS.items():
        if code_knob(name) not in values:
            return f"{name}={code_knob(name)!r} is not one of {', '.join(values)}"
    return None
