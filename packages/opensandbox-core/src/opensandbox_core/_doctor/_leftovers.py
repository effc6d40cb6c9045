"""The leftovers check: sandboxes these packages created and nobody uses any more.

Every package's sandboxes are found (by the project's `opensandbox-agents.library` label, which
each of them has always written, 0.2.0 included), and counted by the package that made it
(`SandboxSummary.adapter`: the `opensandbox-agents.adapter` label; `unlabelled` for a sandbox
made before that label existed).

Judged by idle time and owner, never by age alone (the rule is `opensandbox_core._admin`'s): dead
and expired sandboxes count as idle; an expiring one is kept (it is renewed while used and the
server deletes it by itself once idle for its lifetime); one without expiry is kept until deleted
unless `--include-no-expiry` counts it idle since its creation. `--owner` narrows everything to
the sandboxes of one session's owner token, `--match` to a metadata tag.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from opensandbox_core._errors import OpenSandboxError
from opensandbox_core._fleet._admin import (
    SandboxSummary,
    destroy_sandbox,
    list_sandboxes,
    select_idle,
)
from opensandbox_core._metadata import OWNER_KEY

from ._context import DoctorContext, Outcome, format_age

__all__ = ["check_leftovers"]

_KEPT_WHY = {
    "expiring": "expiring (in use, or expiring on their own)",
    "no-expiry": "without expiry (kept until deleted; --include-no-expiry counts them)",
}


def _kept_text(kept: list[SandboxSummary], now: datetime) -> str:
    counts = Counter(s.activity(now) for s in kept)
    parts = [f"{n} {_KEPT_WHY.get(kind, kind)}" for kind, n in sorted(counts.items())]
    return "; kept: " + ", ".join(parts) if parts else ""


def _by_adapter(found: list[SandboxSummary]) -> dict[str, int]:
    return dict(sorted(Counter(s.adapter or "unlabelled" for s in found).items()))


def _found_text(found: list[SandboxSummary]) -> str:
    parts = ", ".join(f"{n} {adapter}" for adapter, n in _by_adapter(found).items())
    return f"{len(found)} found" + (f": {parts}" if parts else "")


def _listed(summaries: list[SandboxSummary], now: datetime) -> str:
    shown = ", ".join(
        f"{s.id} ({s.activity(now)}, created {format_age(s.age(now))} ago)" for s in summaries[:10]
    )
    return shown + (f" and {len(summaries) - 10} more" if len(summaries) > 10 else "")


async def _remove(
    ctx: DoctorContext, found: list[SandboxSummary], idle_for: timedelta, now: datetime
) -> Outcome:
    chosen = select_idle(found, idle_for, now, include_no_expiry=ctx.options.include_no_expiry)
    removed: list[str] = []
    failed: list[str] = []
    for summary in chosen:
        try:
            await destroy_sandbox(summary.id, ctx.connection)
            removed.append(summary.id)
        except OpenSandboxError:
            failed.append(summary.id)
    kept = [s for s in found if s.id not in removed]
    data = {"removed": removed, "failed": failed, "kept": [s.id for s in kept]}
    if failed:
        return Outcome(
            "FAIL",
            f"could not remove {len(failed)} of {len(chosen)} sandboxes idle for "
            f"{format_age(idle_for)} or more: {', '.join(failed)}",
            "read the server's log; remove them with `docker rm -f` if the server lost them",
            data,
        )
    return Outcome(
        "PASS",
        f"removed {len(removed)} sandbox(es) idle for {format_age(idle_for)} or more"
        + (f": {', '.join(removed)}" if removed else "")
        + _kept_text(kept, now),
        data=data,
    )


async def check_leftovers(ctx: DoctorContext) -> Outcome:
    options = ctx.options
    match = dict(options.match)
    if options.owner:
        match[OWNER_KEY] = options.owner
    try:
        found = await list_sandboxes(ctx.connection, metadata=match)
    except OpenSandboxError as exc:
        return Outcome("FAIL", ctx.hide_key(str(exc)), "read the server's log")
    now = datetime.now(UTC)
    if options.remove_idle_for is not None:
        return await _remove(ctx, found, options.remove_idle_for, now)
    stale = select_idle(
        found, options.stale_after, now, include_no_expiry=options.include_no_expiry
    )
    kept = [s for s in found if s not in stale]
    if not stale:
        return Outcome(
            "PASS",
            f"no sandbox of these packages is idle for {format_age(options.stale_after)} or "
            f"more ({_found_text(found)}{_kept_text(kept, now)})",
            data={"count": len(found), "stale": [], "adapters": _by_adapter(found)},
        )
    return Outcome(
        "WARN",
        f"{len(stale)} sandbox(es) created by these packages are idle for "
        f"{format_age(options.stale_after)} or more: {_listed(stale, now)} ({_found_text(found)})"
        f"{_kept_text(kept, now)}",
        f"remove them with `opensandbox-doctor --remove-idle-for "
        f"{format_age(options.stale_after)}` (or opensandbox_core.remove_sandboxes(idle_for=...))"
        "; give sandboxes a lifetime so the server expires them",
        {"count": len(found), "stale": [s.id for s in stale], "adapters": _by_adapter(found)},
    )
