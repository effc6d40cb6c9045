"""Summary statistics and the interleaved runner."""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (q in [0, 1]) of a non-empty sequence."""
    data = sorted(values)
    if not data:
        return math.nan
    pos = (len(data) - 1) * q
    low = math.floor(pos)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (pos - low)


@dataclass
class Sample:
    """Repeated measurements of one variant, in seconds (or any unit)."""

    values: list[float] = field(default_factory=list)
    skipped: str | None = None

    @property
    def median(self) -> float:
        return quantile(self.values, 0.5)

    @property
    def p10(self) -> float:
        return quantile(self.values, 0.1)

    @property
    def p90(self) -> float:
        return quantile(self.values, 0.9)

    def as_json(self) -> dict[str, Any]:
        if self.skipped or not self.values:
            return {"skipped": self.skipped or "no data", "n": 0}
        return {
            "n": len(self.values),
            "median": self.median,
            "p10": self.p10,
            "p90": self.p90,
            "min": min(self.values),
            "max": max(self.values),
            "values": self.values,
        }


Op = Callable[[], Awaitable[Any]]


async def interleave(
    variants: dict[str, Op],
    repetitions: int,
    *,
    warmup: int = 1,
    check: Callable[[str, Any], None] | None = None,
    timed: type | None = None,
) -> dict[str, Sample]:
    """Run every variant once per round, rotating the order each round (A,B,C / B,C,A / ...).

    The first `warmup` rounds are run and discarded (connection pools, caches, imports). When an
    op returns an instance of `timed` (a float subclass), that is its elapsed time instead.
    """
    names = list(variants)
    samples = {name: Sample() for name in names}
    for round_no in range(warmup + repetitions):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            result = await variants[name]()
            elapsed = time.perf_counter() - started
            if timed is not None and isinstance(result, timed):
                elapsed = float(result)
            if check is not None:
                check(name, result)
            if round_no >= warmup:
                samples[name].values.append(elapsed)
    return samples


def ratio(a: Sample, b: Sample) -> float:
    """Median of a over median of b (NaN when either is missing)."""
    if not a.values or not b.values or b.median == 0:
        return math.nan
    return a.median / b.median
