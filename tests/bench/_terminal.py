"""Bench section `terminal`: a keystroke's round trip through an interactive terminal.

One terminal runs `cat` in raw mode (`stty raw -echo; cat`: each byte typed comes straight back
as output), so a round trip is: one byte sent, its echo read. Two clients take turns on that
same execd terminal, interleaved round by round: the core's `Terminal` (`write`, then `read`
until the byte is back) and a raw `websockets` client on execd's `/pty/{id}/ws` (the URL and
headers from the session's public `get_endpoint(44772)`; one binary stdin frame sent, frames
read until the byte is back). execd serves one client at a time, so each op first takes the
terminal over (the other detaches or closes first), which is not timed: each op types
`KEYS_PER_OP` bytes one after the other, and its time is the median of their round trips.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench._stats import Op, interleave, ratio

EXECD_PORT = 44772
KEYS = itertools.cycle(b"abcdefghijklmnopqrstuvwxyz")
KEYS_PER_OP = 5


class Timed(float):
    """An op's own elapsed time (the take-over before the keystroke is not counted)."""


class _Turns:
    """Who holds the terminal: the core's handle or the raw client, handed over on demand."""

    def __init__(self, session: Any, terminal: Any) -> None:
        self.session = session
        self.id = terminal.id
        self.term: Any = terminal  # the core's handle while it holds the terminal
        self.ws: Any = None  # the raw client while it holds it

    async def core(self) -> Any:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None
        if self.term is None:
            self.term = await self.session.terminals.attach(self.id)
            while await self.term.read(0):  # the replay of what came before
                pass
        return self.term

    async def raw(self) -> Any:
        from websockets.asyncio.client import connect

        if self.term is not None:
            await self.term.detach()
            self.term = None
        if self.ws is None:
            url, headers = await self.session.get_endpoint(EXECD_PORT)
            base = url.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
            self.ws = await connect(
                f"{base}/pty/{self.id}/ws?takeover=1&since=99999999999",
                additional_headers=headers,
                compression=None,
                proxy=None,
                close_timeout=1,
            )
            while not isinstance(await self.ws.recv(), str):
                pass  # up to `connected`
        return self.ws


async def _core_key(turns: _Turns) -> float:
    term = await turns.core()
    key = bytes((next(KEYS),))
    started = time.perf_counter()
    await term.write(key)
    seen = b""
    while key not in seen:
        seen += await term.read(10)
    return time.perf_counter() - started


async def _raw_key(turns: _Turns) -> float:
    ws = await turns.raw()
    key = bytes((next(KEYS),))
    started = time.perf_counter()
    await ws.send(b"\x00" + key)
    while True:
        message = await ws.recv()
        if isinstance(message, bytes) and message[:1] == b"\x01" and key in message[1:]:
            return time.perf_counter() - started


def _keys(one: Callable[[_Turns], Awaitable[float]], turns: _Turns) -> Op:
    """An op: `KEYS_PER_OP` keystrokes one after the other; its time is their median."""

    async def op() -> Timed:
        times = [await one(turns) for _ in range(KEYS_PER_OP)]
        return Timed(statistics.median(times))

    return op


async def terminal(ctx: Any) -> dict[str, Any]:
    """The `terminal` section (see the module docstring)."""
    reps = ctx.reps(40, 12)
    term = await ctx.core.terminals.open("stty raw -echo; cat")
    turns = _Turns(ctx.core, term)
    try:
        samples = await interleave(
            {
                "core Terminal": _keys(_core_key, turns),
                "raw websockets": _keys(_raw_key, turns),
            },
            reps,
            warmup=2,
            timed=Timed,
        )
    finally:
        if turns.ws is not None:
            await turns.ws.close()
        closer = turns.term or await ctx.core.terminals.attach(turns.id)
        await closer.close()
    stats = {name: s.as_json() for name, s in samples.items()}
    core, raw = samples["core Terminal"], samples["raw websockets"]
    return {
        "repetitions": reps,
        "stats": stats,
        "ratio_to_raw": ratio(core, raw),
    }
