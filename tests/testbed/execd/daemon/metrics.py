"""`GET /metrics` and `GET /metrics/watch`: CPU and memory from /proc (the machine's figures,
not a container's limits). `/metrics` samples the CPU over 1 s before it answers;
`/metrics/watch` is a labelled text/event-stream of bare `JSON\n` lines (no blank line), one HTTP
chunk each, every 2 s, the first after 2 s.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from .events import EventStream
from .goenc import go_json, now_ms

if TYPE_CHECKING:
    from .handler import Handler

METRICS_SAMPLE_S = 1.0  # /metrics measures the CPU over 1 s before it answers
METRICS_WATCH_S = 2.0  # /metrics/watch: a sample every 2 s, the first after 2 s


def get_metrics(h: Handler, q: dict) -> None:
    h.send_json(200, metrics())


def watch_metrics(h: Handler, q: dict) -> None:
    stream = EventStream(h)
    stream.begin()  # the headers at once
    due = time.monotonic()
    while not stream.broken:
        since = _cpu_times()
        due += METRICS_WATCH_S
        time.sleep(max(0.0, due - time.monotonic()))
        stream.send_raw(go_json(metrics(since)) + b"\n")


def _cpu_times() -> tuple[int, int]:
    with open("/proc/stat") as fh:
        parts = [int(x) for x in fh.readline().split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    return sum(parts), idle


def _go_float(value: float) -> float | int:
    """A float64 as Go's encoding/json writes it: a whole number without ``.0``."""
    return int(value) if value.is_integer() else value


def metrics(since: tuple[int, int] | None = None) -> dict:
    """execd's metrics from /proc (the machine's figures, not a container's limits): CPU use
    since `since` (a :func:`_cpu_times` reading), or over METRICS_SAMPLE_S when not given."""
    try:
        if since is None:
            since = _cpu_times()
            time.sleep(METRICS_SAMPLE_S)
        t1, i1 = since
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
    try:
        cpus = len(os.sched_getaffinity(0))  # GOMAXPROCS
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return {
        "cpu_count": cpus,
        "cpu_used_pct": _go_float(pct),
        "mem_total_mib": _go_float(total),
        "mem_used_mib": _go_float(total - avail),
        "timestamp": now_ms(),
    }
