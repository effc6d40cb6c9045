"""Checks that the server refuses to bind-mount host folders: docker-socket-mount, host-path-mount.

Each probe asks for a sandbox with one read-only bind mount; a server that accepts it gets the
sandbox deleted at once (by id, and by this run's tag).
"""

from __future__ import annotations

import contextlib
from typing import Final

import httpx

from opensandbox_core._metadata import LIBRARY_KEY, LIBRARY_VALUE, adapter_labels

from ._context import DOCTOR_KEY, DoctorContext, Outcome
from ._diagnose import describe_transport_error

__all__ = ["check_docker_socket_mount", "check_host_path_mount"]

DOCKER_SOCKET_DIR: Final = "/var/run"
"""The directory of /var/run/docker.sock. It exists as a directory on every Linux host, so the
server's habit of creating missing host paths never fires; mounting it exposes the socket."""
HOST_PATH_PROBE: Final = "/etc"
PROBE_MOUNT: Final = "/mnt/opensandbox-doctor-probe"
MOUNT_FIX: Final = (
    "set [storage] allowed_host_paths to the folders sandboxes really need, e.g. "
    '["/srv/opensandbox-data"], never "/" nor a parent of /var/run; (in '
    "opensandbox-server 1.1.1 an empty list refuses every host path) — and keep "
    "[server] api_key set (alibaba/OpenSandbox#750)"
)


def _error_code(response: httpx.Response) -> str:
    with contextlib.suppress(Exception):
        data = response.json()
        if isinstance(data, dict):
            detail = data.get("detail")
            nested = detail.get("code") if isinstance(detail, dict) else None
            return str(data.get("code") or nested or "")
    return ""


def _verdict(response: httpx.Response, path: str, what: str) -> Outcome:
    status = response.status_code
    code = _error_code(response)
    data = {"http_status": status, "code": code}
    if 200 <= status < 300:
        return Outcome(
            "FAIL",
            f"the server accepted a sandbox with a read-only bind mount of {path} ({what}); the "
            "probe sandbox was deleted at once",
            MOUNT_FIX,
            data,
        )
    if status in (400, 403, 422) and ("HOST_PATH" in code or "VOLUME" in code):
        return Outcome("PASS", f"a bind mount of {path} ({what}) is refused (HTTP {status} {code})",
                       data=data)  # fmt: skip
    if status >= 500 or "HOST_PATH_CREATE" in code:
        return Outcome(
            "FAIL",
            f"the server did not refuse a bind mount of {path} ({what}); the create failed "
            f"later for another reason (HTTP {status} {code})",
            MOUNT_FIX,
            data,
        )
    return Outcome(
        "WARN",
        f"inconclusive: the mount probe was answered HTTP {status} {code}",
        "check --image and read the server's log",
        data,
    )


async def _probe_mount(ctx: DoctorContext, path: str, what: str) -> Outcome:
    body = {
        "image": {"uri": ctx.options.image},
        "entrypoint": ["tail", "-f", "/dev/null"],
        "timeout": 120,
        "resourceLimits": {"cpu": "1", "memory": "256Mi"},
        "env": {},
        "metadata": {
            **adapter_labels("doctor"),
            LIBRARY_KEY: LIBRARY_VALUE,
            DOCTOR_KEY: ctx.token,
        },
        "volumes": [
            {
                "name": "opensandbox-doctor-probe",
                "host": {"path": path},
                "mountPath": PROBE_MOUNT,
                "readOnly": True,
            }
        ],
    }
    ctx.created_sandboxes = True
    created: str | None = None
    try:
        probe = await ctx.request(
            "POST", "/v1/sandboxes", json=body, headers=ctx.headers(), timeout=120
        )
        if probe.response is None:
            assert probe.error is not None
            summary, _ = describe_transport_error(probe.error, ctx.base, 120)
            return Outcome(
                "WARN",
                f"inconclusive: {summary}",
                "run the doctor again; any sandbox the probe created is removed",
            )
        if probe.response.is_success:
            with contextlib.suppress(Exception):
                created = str(probe.response.json().get("id") or "") or None
        return _verdict(probe.response, path, what)
    finally:
        if created:
            with contextlib.suppress(Exception):
                await ctx.client.delete(f"/v1/sandboxes/{created}", headers=ctx.headers())
        await ctx.remove_own_sandboxes()


async def check_docker_socket_mount(ctx: DoctorContext) -> Outcome:
    return await _probe_mount(ctx, DOCKER_SOCKET_DIR, "the directory holding /var/run/docker.sock")


async def check_host_path_mount(ctx: DoctorContext) -> Outcome:
    return await _probe_mount(ctx, HOST_PATH_PROBE, "a host path")
