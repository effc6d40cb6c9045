"""`Commands`: the session's commands facet, `session.commands`.

Each method checks its arguments and hands the command to the piece that runs it: `run`
(`_run.CommandRunner`), `run_bytes` (`_encoded`), `run_offloaded` (`_offload`) and background
processes (`_background`). The session builds the facet; it holds no state of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from opensandbox_core import _validate
from opensandbox_core._defaults import DEFAULT, _Default
from opensandbox_core._types import BytesResult, CommandResult

from ._background import BackgroundProcess, start_background
from ._encoded import run_bytes
from ._offload import OFFLOAD_MAX_BYTES, OffloadedRun, run_offloaded
from ._run import CommandRunner, Lifecycle, OutputCallback

if TYPE_CHECKING:
    from opensandbox_core._files._filesystem import FileSystem
    from opensandbox_core._files._transfers import Transfers

__all__ = ["Commands"]


class Commands:
    """Commands in the session's sandbox: `session.commands.run(...)` and its kin."""

    def __init__(
        self, life: Lifecycle, runner: CommandRunner, fs: FileSystem, transfers: Transfers
    ) -> None:
        self._life = life
        self._runner = runner
        self._fs = fs
        self._transfers = transfers

    def __repr__(self) -> str:
        return f"Commands(sandbox={self._life.sandbox_id!r})"

    async def run(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | _Default | None = DEFAULT,
        on_output: OutputCallback | None = None,
        max_output: int | None = None,
        plain_lines: bool = False,
    ) -> CommandResult:
        """Run a command to completion and return its exit code and output.

        A string runs through the shell (`bash -c`); a sequence is an argv whose items are passed
        literally. A non-zero exit is a result, not an error. `timeout` is in seconds (`None`:
        no limit; omitted: the session default). On timeout or cancellation the command's whole
        process group is stopped inside the sandbox, and `CommandTimeoutError` carries the
        output printed until then. `on_output(stream, text)` sees output as it streams.

        Output is byte-exact on every supported execd generation. On line-framed execd
        (v1.0.17 to v1.0.19) the events carry one line each without its ending, so the result
        is read from the raw output files execd keeps for the command (one Range download per
        stream that printed, then both files are deleted); `on_output` then sees the lines as
        the events carry them, each with `"\\n"` added. See docs/core.md, "execd versions".

        `plain_lines=True` is the caller's promise that the command prints only text lines, each
        ended by `"\\n"`, with no `"\\r"` or other line breaks (a listing such as `ls -1`): on
        line-framed execd the result is then rebuilt from the line events, exact for such
        output, without the Range downloads (the raw files are still deleted in the
        background). Output that breaks the promise may come back with line endings changed.
        """
        _validate.flag(plain_lines, "plain_lines")
        return await self._runner.run(
            command,
            cwd=cwd,
            env=env,
            timeout=self._runner.limit(timeout),
            on_output=on_output,
            max_output=max_output,
            plain_lines=plain_lines,
        )

    async def run_bytes(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | _Default | None = DEFAULT,
    ) -> BytesResult:
        """Run a command and return its stdout as exact bytes (`BytesResult`), in one round trip
        on every execd generation: the sandbox prints stdout and the exit status as one base64
        line, so NUL bytes, `\\r` and bytes that are not UTF-8 survive line-framed execd without
        the raw-file read `run` needs for them. The image needs `base64` (coreutils or busybox).
        stderr comes back as the daemon's events carry it (exact for text lines). A cut at
        `max_output` raises `OutputLimitError`; a timeout `CommandTimeoutError`, as `run`.
        """
        limit = self._runner.limit(timeout)
        return await run_bytes(self._runner, command, cwd=cwd, env=env, timeout=limit)

    async def run_offloaded(
        self,
        command: str | Sequence[str],
        path: str,
        *,
        max_bytes: int = OFFLOAD_MAX_BYTES,
        inline_limit: int = 0,
        preview_bytes: int = 4096,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | _Default | None = DEFAULT,
    ) -> OffloadedRun:
        """Run a command with its output (stdout and stderr as they interleave) going to the
        file `path` in the sandbox, which keeps it: for output too big to move, or to show.

        The file holds at most `max_bytes` (default 10 MiB) of the output, exactly as printed;
        more is discarded without stopping the command (`truncated=True`). Returns the exit
        code, the file's size and line count, and its first and last `preview_bytes` bytes; an
        output of at most `inline_limit` bytes comes back whole as `output` and its file is
        deleted. Parents of `path` are created; a path that cannot be written raises the
        builtin `OSError` and runs nothing. `timeout`, `cwd` and `env` as for `run()`; after a
        timeout the file keeps the output but for what `head` still buffered (a few KiB at
        most). Needs only `sh`, `head`, `cat` and `wc` in the image. See docs/core.md, "Output
        offload".
        """
        return await run_offloaded(
            self._runner,
            self._fs,
            self._transfers,
            command,
            path,
            max_bytes=max_bytes,
            inline_limit=inline_limit,
            preview_bytes=preview_bytes,
            cwd=cwd,
            env=env,
            timeout=self._runner.limit(timeout),
        )

    async def start_background(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> BackgroundProcess:
        """Start a command that keeps running (a dev server, a watcher); returns at once, with
        a handle that execd already knows (it registers a process only after starting it).

        `timeout` (seconds, default none) stops it after that long. Use the handle to read its
        status and output from a cursor and to stop it (its whole process group). When the
        command's main process exits, execd kills its whole process group: `cmd &` and
        `nohup cmd &` children die with it. Make the server the main process, or start what
        must outlive it with `BackgroundProcess.keep_running(...)`.
        """
        request = await self._runner.prepare(command, cwd=cwd, env=env, timeout=timeout)
        return await start_background(self, request.body(background=True))

    def background(self, execution_id: str) -> BackgroundProcess:
        """A handle on a background process started earlier (by this or another session)."""
        return BackgroundProcess(self, execution_id)
