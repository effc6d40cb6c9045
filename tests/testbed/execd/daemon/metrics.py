"""`GET /metrics` and `GET /metrics/watch`: CPU and memory from /proc."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from .events import EventStream
from .goenc import now_ms

if TYPE_CHECKING:
    from .handler import Handler


def get_metrics(h: Handler, q: dict) -> None:
    h.send_json(200, metrics())


def watch_metrics(h: Handler, q: dict) -> None:
    stream = EventStream(h)
    while not stream.broken:
        stream.send(metrics())
        time.sleep(0.9)


def _cpu_times() -> tuple[int, int]:
    with open("/proc/stat") as fh:
        parts = [int(x) for x in fh.readline().split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    return sum(parts), idle


def metrics() -> dict:
    try:
        t1, i1 = _cpu_times()
        time.sleep(0.1)
        t2, i2 = _cpu_times()
        pct = 100.0 * (1 - (i2 - i1) / (t2 - t1)) if t2 > t1 else 0.0
    except OSError:
        pct = 0.0
    mem = {}
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                k, v = line.split(":", 1)
                mem[k] = int(v.split()[0])
    except OSError:
        pass
    total = mem.get("MemTotal", 0) / 1024.0
    avail = mem.get("MemAvailable", mem.get("MemFree", 0)) / 1024.0
    return {
        "cpu_count": float(os.cpu_count() or 1),
        "cpu_used_pct": round(pct, 2),
        "mem_total_mib": total,
        "mem_used_mib": total - avail,
        "timestamp": now_ms(),
    }
