"""Checks in one small test sandbox: execd-framing, latency, throughput.

The sandbox is created once per run by `DoctorContext.sandbox()` (whichever of these checks asks
first) and deleted by `DoctorContext.aclose()`.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from typing import TYPE_CHECKING, Final

from opensandbox_core._errors import AuthenticationError, OpenSandboxError, UnsupportedDaemonError
from opensandbox_core._metadata import adapter_labels
from opensandbox_core._wire._framing import SUPPORTED_EXECD_IMAGE, Framing, describe

from ._context import DOCTOR_KEY, Outcome, SandboxOutcome
from ._diagnose import DOMAIN_FIX, error_chain_text

if TYPE_CHECKING:
    from ._context import DoctorContext

__all__ = ["check_execd_framing", "check_latency", "check_throughput", "create_test_sandbox"]

EXECD_FIX: Final = (
    f'set execd_image = "{SUPPORTED_EXECD_IMAGE}" (or any v1.0.17 or newer; upstream tags are '
    "vX.Y.Z) under [runtime] in the server's config, restart the server and create new sandboxes"
)
GENERATIONS: Final = {
    Framing.MODERN: "1.1",
    Framing.LEGACY: "v1.0.17-v1.0.19",
    Framing.ANCIENT: "v1.0.16 or older",
}
"""The execd generation each output framing stands for, as the doctor names it."""
EXACT_PROBE: Final = "printf 'osb\\r\\ndoctor'"
EXACT_EXPECTED: Final = "osb\r\ndoctor"
LATENCY_RUNS: Final = 10
LATENCY_WARN_SECONDS: Final = 1.0
THROUGHPUT_BYTES: Final = 8 * 1024 * 1024
THROUGHPUT_WARN_MIB_S: Final = 1.0


async def create_test_sandbox(ctx: DoctorContext) -> SandboxOutcome:
    from opensandbox_core._config import SandboxSpec
    from opensandbox_core._session import AsyncSandboxSession

    spec = SandboxSpec(
        image=ctx.options.image,
        lifetime=600,
        metadata={**adapter_labels("doctor"), DOCTOR_KEY: ctx.token},
        resource={"cpu": "1", "memory": "512Mi"},
        ready_timeout=90,
    )
    session = AsyncSandboxSession(spec, connection=ctx.connection, default_timeout=120)
    try:
        await session.start()
        # Exact output is what matters: a missing final newline and \r\n survive only when
        # output is taken from the events (1.1) or from execd's raw output files (v1.0.17+).
        result = await session.commands.run(EXACT_PROBE, timeout=60)
    except OpenSandboxError as exc:
        with contextlib.suppress(OpenSandboxError):
            await session.destroy()
        return SandboxOutcome(None, exc)
    framing = Framing(session.framing) if session.framing else None
    return SandboxOutcome(session, None, framing, result.stdout == EXACT_EXPECTED)


def _creation_failure(ctx: DoctorContext, exc: OpenSandboxError) -> Outcome:
    image = ctx.options.image
    text = error_chain_text(exc)
    message = ctx.hide_key(str(exc))
    if isinstance(exc, UnsupportedDaemonError):
        return Outcome(
            "FAIL",
            f"execd {GENERATIONS[Framing.ANCIENT]}: {describe(Framing.ANCIENT)}. {message}",
            EXECD_FIX,
            {"framing": Framing.ANCIENT.value, "generation": GENERATIONS[Framing.ANCIENT]},
        )
    if isinstance(exc, AuthenticationError):
        return Outcome("FAIL", message, "pass the server's [server] api_key as --api-key")
    if "pull image" in text or "image_pull" in text:
        return Outcome(
            "FAIL",
            f"the server could not pull the image {image!r}: {message}",
            f"check the image name and tag; make sure the server's Docker can pull it (`docker "
            f"pull {image}` on the server's host, registry login, network), or pass --image with "
            "an image the server already has",
        )
    if "connect" in text or "timed out" in text:
        return Outcome("FAIL", message, DOMAIN_FIX)
    return Outcome(
        "FAIL",
        f"could not create a sandbox from {image!r}: {message}",
        "read the server's log; the image needs `tail` and `sh` (pass another with --image)",
    )


async def check_execd_framing(ctx: DoctorContext) -> Outcome:
    outcome = await ctx.sandbox()
    if outcome.error is not None:
        return _creation_failure(ctx, outcome.error)
    framing = outcome.framing
    if framing is not None and outcome.exact:
        return Outcome(
            "PASS",
            f"execd {GENERATIONS[framing]}: {describe(framing)}",
            data={"framing": framing.value, "generation": GENERATIONS[framing]},
        )
    return Outcome(
        "WARN",
        f"execd {GENERATIONS[Framing.LEGACY]} (line-framed events), but its raw output files "
        "were not found in its temp dir: output is rebuilt from lines (a missing final newline "
        "and \\r\\n line endings are not kept exactly)",
        f"run an unmodified execd image ({SUPPORTED_EXECD_IMAGE} or any v1.0.17 or newer) and "
        "do not clean its temp dir from inside the sandbox",
        {"framing": framing.value if framing else None, "generation": GENERATIONS[Framing.LEGACY]},
    )


def _no_sandbox(outcome: SandboxOutcome) -> Outcome | None:
    if outcome.session is None:
        return Outcome("SKIP", "no test sandbox (see execd-framing)")
    return None


async def check_latency(ctx: DoctorContext) -> Outcome:
    outcome = await ctx.sandbox()
    if (skipped := _no_sandbox(outcome)) is not None:
        return skipped
    assert outcome.session is not None
    times: list[float] = []
    try:
        for _ in range(LATENCY_RUNS):
            started = time.perf_counter()
            result = await outcome.session.commands.run("true", timeout=60)
            times.append(time.perf_counter() - started)
            if result.exit_code != 0:
                raise OpenSandboxError(f"`true` exited with {result.exit_code}.")
    except OpenSandboxError as exc:
        return Outcome("FAIL", f"running `true` failed: {exc}", "read the server's log")
    median = statistics.median(times)
    summary = f"median of {LATENCY_RUNS} `true` commands: {median * 1000:.0f} ms"
    data = {"median_ms": median * 1000}
    if median > LATENCY_WARN_SECONDS:
        return Outcome(
            "WARN",
            summary,
            "a slow round trip: check the network between client, server and sandbox; "
            "use_server_proxy=False talks to the sandbox directly",
            data,
        )
    return Outcome("PASS", summary, data=data)


async def check_throughput(ctx: DoctorContext) -> Outcome:
    outcome = await ctx.sandbox()
    if (skipped := _no_sandbox(outcome)) is not None:
        return skipped
    session = outcome.session
    assert session is not None
    data = os.urandom(THROUGHPUT_BYTES)
    path = f"opensandbox-doctor-{ctx.token[:12]}.bin"
    mib = THROUGHPUT_BYTES / (1024 * 1024)
    try:
        started = time.perf_counter()
        await session.files.write_bytes(path, data)
        written = time.perf_counter()
        back = await session.files.read_bytes(path)
        done = time.perf_counter()
    except (OpenSandboxError, OSError) as exc:
        return Outcome("FAIL", f"file transfer failed: {exc}", "read the server's log")
    if back != data:
        return Outcome(
            "FAIL",
            f"the {mib:g} MiB file read back differs from what was written",
            "a proxy between client and sandbox alters bodies; check it",
        )
    write_rate = mib / max(written - started, 1e-9)
    read_rate = mib / max(done - written, 1e-9)
    summary = f"{mib:g} MiB: write {write_rate:.1f} MiB/s, read {read_rate:.1f} MiB/s"
    rates = {"write_mib_s": write_rate, "read_mib_s": read_rate}
    if min(write_rate, read_rate) < THROUGHPUT_WARN_MIB_S:
        return Outcome(
            "WARN", summary, "slow transfers: check the network and any proxy in between", rates
        )
    return Outcome("PASS", summary, data=rates)
