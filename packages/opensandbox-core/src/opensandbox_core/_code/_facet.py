"""The code facet, `session.code`: runs code in kernels (Jupyter, through execd's `/code`).

What it keeps per session (no I/O at construction):
- each context it has seen (`Kernel`): language, the cwd it was made with, its kernel's process;
- the default context of each language (execd's own, found at the first run without a context);
- replacements: a context whose kernel died (execd keeps it busy for good) is deleted and made
  again, and runs that name the old id go to the new one;
- the languages found runnable (`_probe`), so a language is checked once;
- per event loop: one lock for creates (concurrent creates can leak a kernel in execd) and one
  per context, so that runs of this session in one context wait for their turn.

Each context this session uses is set up once (a first cell, `_kernel`): the recorder that
keeps what execd loses, and the context's working directory, made and entered by the kernel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

from opensandbox_core import _validate
from opensandbox_core._commands._run import CommandRunner, Lifecycle
from opensandbox_core._defaults import DEFAULT, _Default
from opensandbox_core._errors import ExecdError, OpenSandboxError, ServerError
from opensandbox_core._files._paths import resolve
from opensandbox_core._wire import _code as wire
from opensandbox_core._wire._events import Context

from . import _probe
from ._errors import (
    CodeContextBusyError,
    CodeContextNotFoundError,
    CodeInterpreterUnavailableError,
    CodeTimeoutError,
)
from ._model import CodeContext, Execution
from ._runner import CodeOutput, Kernel, RunFailed, execute, prepare

__all__ = ["CodeInterpreter"]

logger = logging.getLogger(__name__)

_CREATE_LIMIT: Final = 60.0  # a create for a language known to have a kernel
_UNSURE_LIMIT: Final = 15.0  # ... when nothing said whether it has one (execd never answers then)


@dataclass
class _LoopLocks:
    create: asyncio.Lock = field(default_factory=asyncio.Lock)
    turns: dict[str, asyncio.Lock] = field(default_factory=dict)


class CodeInterpreter:
    """`session.code`: run code in a context, and manage contexts (module docstring)."""

    def __init__(self, lifecycle: Lifecycle, commands: CommandRunner) -> None:
        self._life = lifecycle
        self._commands = commands
        self._kernels: dict[str, Kernel] = {}
        self._defaults: dict[str, str] = {}
        self._aliases: dict[str, str] = {}
        self._languages: set[str] = set()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopLocks] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"CodeInterpreter(sandbox_id={self._life.sandbox_id!r})"

    # -- public -----------------------------------------------------------------------------
    async def run(
        self,
        code: str,
        *,
        context: CodeContext | str | None = None,
        language: str = "python",
        timeout: float | _Default | None = DEFAULT,
        on_output: CodeOutput | None = None,
    ) -> Execution:
        """Run `code` in a context and return what it did (`Execution`).

        `context`: a `CodeContext` or its id; None runs in the language's default context
        (execd's, shared by every client). The code runs as a notebook cell: its last
        expression is the main result, every `display()` and shown figure is in `results` in
        order, and an exception it raises is `Execution.error`, not raised here.
        `on_output(stream, text)` sees stdout and stderr as the kernel sends them.
        `timeout` in seconds (`None`: no limit; omitted: the session's command timeout): past
        it the kernel is interrupted (the context keeps its state) and `CodeTimeoutError`
        carries what the run printed and showed. Runs of this session in one context wait
        for each other; a context busy with another client's run raises
        `CodeContextBusyError`. A kernel that dies while the code runs is reported within
        seconds as `Execution.error` (name "KernelDied"); its context is replaced and later
        runs naming it run in the new kernel. See docs/core.md, "Code".
        """
        text = _validate.code_text(code)
        wanted = _validate.code_context(context, CodeContext)
        lang = _validate.code_language(language)
        limit = _validate.timeout(self._commands.limit(timeout), allow_none=True)
        ctx = await self._life.context()
        for attempt in (1, 2):
            kernel = await self._kernel_for(ctx, wanted, lang)
            try:
                return await self._run_in(ctx, kernel, text, limit, on_output)
            except RunFailed as exc:
                if attempt == 1 and kernel.default and "not found" in exc.refusal:
                    self._forget(kernel.id)  # the default context was deleted: make it again
                    continue
                await self._refused(ctx, kernel, exc)
        raise AssertionError("unreachable")  # pragma: no cover

    async def create_context(
        self, language: str = "python", *, cwd: str | None = None
    ) -> CodeContext:
        """A new context: a kernel of its own for `language` (`python`, `bash`, or any other
        the image has a kernel for), ready to run (its first cell has run).

        `cwd` (relative to the session's working directory) is made if missing and is the
        kernel's working directory. A language the sandbox cannot run raises
        `CodeInterpreterUnavailableError` within seconds, saying what the image needs.
        Creates of one session run one at a time (concurrent creates can leak a kernel in
        execd)."""
        lang = _validate.code_language(language)
        where = _validate.code_cwd(cwd)
        ctx = await self._life.context()
        directory = None if where is None else resolve(where, ctx.working_dir)
        async with self._locks().create:
            sure = await self._check(ctx, lang)
            context_id = await self._create(ctx, lang, _CREATE_LIMIT if sure else _UNSURE_LIMIT)
        kernel = self._kernels[context_id] = Kernel(context_id, lang, directory)
        try:
            async with self._turn(context_id):
                await self._prepare(ctx, kernel)
        except BaseException:
            await self._discard(ctx, context_id)
            raise
        return self._public(kernel)

    async def contexts(self, language: str | None = None) -> list[CodeContext]:
        """The sandbox's contexts (of `language`, or all), made by any client, in execd's
        order; `cwd` is known for the contexts this session set up."""
        lang = None if language is None else _validate.code_language(language)
        ctx = await self._life.context()
        try:
            found = await wire.list_contexts(ctx.execd, lang)
        except Exception as exc:
            await self._life.fail(exc, "list code contexts", execd=ctx.execd)
        listed = []
        for item in found:
            context_id, kind = str(item.get("id") or ""), str(item.get("language") or "")
            known = self._kernels.get(context_id)
            cwd = None if known is None else self._public(known).cwd
            listed.append(CodeContext(context_id, kind, cwd))
        return listed

    async def delete_context(self, context: CodeContext | str) -> None:
        """Delete a context (its kernel stops, its state is gone). An unknown id raises
        `CodeContextNotFoundError` (a `LookupError`)."""
        context_id = self._current(self._id_of(context))
        ctx = await self._life.context()
        try:
            await wire.delete_context(ctx.execd, context_id)
        except ExecdError as exc:
            if exc.from_execd and exc.status == 404:
                self._forget(context_id)
                self._not_found(context_id)
            await self._life.fail(exc, "delete a code context", execd=ctx.execd)
        except Exception as exc:
            await self._life.fail(exc, "delete a code context", execd=ctx.execd)
        self._forget(context_id)

    async def interrupt(self, context: CodeContext | str) -> None:
        """Interrupt the code running in a context (as Ctrl-C: the run ends with
        `KeyboardInterrupt` as its error; the context keeps its state). An idle context is
        left as it is; an unknown id raises `CodeContextNotFoundError`."""
        context_id = self._current(self._id_of(context))
        ctx = await self._life.context()
        try:
            await wire.interrupt_code(ctx.execd, context_id)
        except ExecdError as exc:
            if exc.from_execd and "no such session" in exc.message.lower():
                self._not_found(context_id)
            await self._life.fail(exc, "interrupt a code context", execd=ctx.execd)
        except Exception as exc:
            await self._life.fail(exc, "interrupt a code context", execd=ctx.execd)

    # -- contexts ---------------------------------------------------------------------------
    def _locks(self) -> _LoopLocks:
        loop = asyncio.get_running_loop()
        locks = self._loops.get(loop)
        if locks is None:
            locks = self._loops[loop] = _LoopLocks()
        return locks

    def _turn(self, context_id: str) -> asyncio.Lock:
        turns = self._locks().turns
        return turns.setdefault(context_id, asyncio.Lock())

    @staticmethod
    def _id_of(context: object) -> str:
        wanted = _validate.code_context(context, CodeContext)
        if wanted is None:
            _validate.instance(context, CodeContext, "context", "a CodeContext or its id")
        assert wanted is not None
        return wanted[0]

    def _current(self, context_id: str) -> str:
        """The context that runs for `context_id` (a replaced one's successor)."""
        seen = {context_id}
        while context_id in self._aliases and self._aliases[context_id] not in seen:
            context_id = self._aliases[context_id]
            seen.add(context_id)
        return context_id

    def _forget(self, context_id: str) -> None:
        kernel = self._kernels.pop(context_id, None)
        if kernel is not None and self._defaults.get(kernel.language) == context_id:
            del self._defaults[kernel.language]

    def _public(self, kernel: Kernel) -> CodeContext:
        cwd = kernel.info.cwd if kernel.info is not None else kernel.cwd
        return CodeContext(kernel.id, kernel.language, cwd)

    def _not_found(self, context_id: str) -> NoReturn:
        raise CodeContextNotFoundError(
            f"No code context {context_id} in sandbox {self._life.sandbox_id}: it was never "
            "made there, or it was deleted.",
            context_id=context_id,
        )

    async def _kernel_for(
        self, ctx: Context, wanted: tuple[str, str | None] | None, language: str
    ) -> Kernel:
        if wanted is None:
            known = self._defaults.get(language)
            if known is not None and known in self._kernels:
                return self._kernels[known]
            return await self._default(ctx, language)
        context_id = self._current(wanted[0])
        kernel = self._kernels.get(context_id)
        if kernel is None:
            kernel = self._kernels[context_id] = Kernel(
                context_id, await self._language_of(ctx, context_id, wanted[1])
            )
        return kernel

    async def _language_of(self, ctx: Context, context_id: str, given: str | None) -> str:
        """The language of a context this session has not seen: execd's listing says."""
        if given is not None:
            return given
        try:
            found = await wire.list_contexts(ctx.execd, None)
        except Exception as exc:
            await self._life.fail(exc, "look up a code context", execd=ctx.execd)
        for item in found:
            if item.get("id") == context_id:
                return _validate.code_language(str(item.get("language") or ""))
        self._not_found(context_id)

    async def _default(self, ctx: Context, language: str) -> Kernel:
        """The language's default context: execd's, made (if needed) by the setup cell."""
        async with self._locks().create:
            known = self._defaults.get(language)
            if known is not None and known in self._kernels:
                return self._kernels[known]
            await self._check(ctx, language)
            kernel = Kernel("", language, default=True)
            await self._prepare(ctx, kernel)
            self._kernels[kernel.id] = kernel
            self._defaults[language] = kernel.id
            return kernel

    async def _check(self, ctx: Context, language: str) -> bool:
        """Raise when the sandbox cannot run `language`; True when a kernel for it is known."""
        if language in self._languages:
            return True
        sure = await _probe.check_language(
            ctx.execd, self._commands, language, self._life.sandbox_id
        )
        if sure:
            self._languages.add(language)
        return sure

    async def _create(self, ctx: Context, language: str, limit: float) -> str:
        """POST /code/context, bounded; a cancelled create deletes what it made (bounded)."""
        task = asyncio.get_running_loop().create_task(
            wire.create_context(ctx.execd, language, None, timeout=limit)
        )
        try:
            async with asyncio.timeout(limit + 5.0):
                data = await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(lambda t: self._discard_made(ctx, t))
            raise
        except Exception as exc:
            task.cancel()
            if isinstance(exc, TimeoutError) or _is_read_timeout(exc):
                raise CodeInterpreterUnavailableError(
                    f"Sandbox {self._life.sandbox_id} did not make a {language} context within "
                    f"{limit:g} s: execd waits for a kernel that never comes when the image has "
                    f"none for {language}, or no Jupyter server. {_probe._NEEDS}",
                    language=language,
                ) from None
            await self._life.fail(exc, "create a code context", execd=ctx.execd)
        context_id = str(data.get("id") or "")
        if not context_id:
            raise ServerError(f"execd made a {language} context but sent no id ({data!r:.200}).")
        self._languages.add(language)
        return context_id

    def _discard_made(self, ctx: Context, task: asyncio.Task[dict[str, Any]]) -> None:
        if task.cancelled() or task.exception() is not None:
            return
        made = str(task.result().get("id") or "")
        if made:
            ctx.execd.later(self._discard(ctx, made))

    async def _discard(self, ctx: Context, context_id: str) -> None:
        """Delete a context in a clean-up: bounded, shielded, never raises."""
        self._forget(context_id)

        async def delete() -> None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(30.0):
                    await wire.delete_context(ctx.execd, context_id)

        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(asyncio.ensure_future(delete()))

    async def _prepare(self, ctx: Context, kernel: Kernel) -> None:
        try:
            await prepare(ctx, kernel, self._life.sandbox_id)
        except RunFailed as exc:
            await self._refused(ctx, kernel, exc)
        except OpenSandboxError:
            raise
        except Exception as exc:
            await self._life.fail(exc, "set up a code context", execd=ctx.execd)

    # -- runs -------------------------------------------------------------------------------
    async def _run_in(
        self,
        ctx: Context,
        kernel: Kernel,
        code: str,
        limit: float | None,
        on_output: CodeOutput | None,
    ) -> Execution:
        async with self._turn(kernel.id):
            if not kernel.prepared:
                await self._prepare(ctx, kernel)
            try:
                outcome = await execute(
                    ctx, self._commands, kernel, code, limit=limit, on_output=on_output
                )
            except RunFailed:
                raise
            except Exception as exc:
                await self._life.fail(exc, "run code", execd=ctx.execd)
        if outcome.died:
            await self._replace(ctx, kernel)
        if outcome.timed_out:
            assert limit is not None
            raise CodeTimeoutError(
                f"The code ran longer than {limit:g} s: its kernel was interrupted (context "
                f"{kernel.id} keeps its state).",
                timeout=limit,
                execution=outcome.execution,
            )
        return outcome.execution

    async def _refused(self, ctx: Context, kernel: Kernel, exc: RunFailed) -> NoReturn:
        if "not found" in exc.refusal:
            self._forget(kernel.id)
            self._not_found(kernel.id)
        if "busy" in exc.refusal:
            raise CodeContextBusyError(
                f"Code context {kernel.id} of sandbox {self._life.sandbox_id} is running code "
                "for another client (execd runs one cell per context at a time): try again when "
                "it is done, interrupt it, or use another context.",
                context_id=kernel.id,
            )
        await self._life.fail(exc.error or ServerError(exc.refusal), "run code", execd=ctx.execd)

    async def _replace(self, ctx: Context, kernel: Kernel) -> None:
        """A context whose kernel died: deleted (execd would keep it busy for good) and, unless
        it was a default context, made again with its language and cwd under a new id."""
        await self._discard(ctx, kernel.id)
        if kernel.default:
            return
        try:
            async with self._locks().create:
                new_id = await self._create(ctx, kernel.language, _CREATE_LIMIT)
        except Exception as exc:  # the next run reports it (the old id is gone then)
            logger.warning("could not replace code context %s (%s)", kernel.id, type(exc).__name__)
            return
        self._aliases[kernel.id] = new_id
        self._kernels[new_id] = Kernel(new_id, kernel.language, kernel.cwd)


def _is_read_timeout(exc: BaseException) -> bool:
    import httpx

    return isinstance(exc, httpx.ReadTimeout)
