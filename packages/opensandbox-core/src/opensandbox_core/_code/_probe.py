"""Whether the sandbox can run code in a language, asked in ways that always answer.

execd's own way to tell (`POST /code/context`) never answers when the language has no kernel,
or when no Jupyter server is configured, so the first use of a language in a session asks
twice, at once, before creating anything:

- execd: `/code` in a context that cannot exist (the nil UUID). execd checks the language and
  its Jupyter configuration before it looks the context up, so it answers at once: "language
  runtime server not configured" (no Jupyter), "unknown language", or "context not found" (all
  is well). Nothing is created.
- the Jupyter server itself, through a shell command in the sandbox (bash's `/dev/tcp`, no
  tools needed): `GET /api/kernelspecs` at execd's `JUPYTER_HOST` with its `JUPYTER_TOKEN`. No
  connection within 60 s (a new sandbox's server takes 3 s to start, 15-20 s on a loaded
  machine; execd itself waits for it), or no kernelspec of that language (execd skips the one
  named `python3`): refused.

An answer that settles nothing (no bash, another daemon) leaves the decision to a bounded
`POST /code/context`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Final

from opensandbox_core._commands._encoded import run_bytes
from opensandbox_core._commands._run import CommandRunner
from opensandbox_core._errors import ExecdError
from opensandbox_core._wire._code import code_events
from opensandbox_core._wire._execd import ExecdClient

from ._errors import CodeInterpreterUnavailableError

__all__ = ["NIL_CONTEXT", "check_language"]

logger = logging.getLogger(__name__)

NIL_CONTEXT: Final = "00000000-0000-4000-8000-000000000000"
_PROBE_LIMIT: Final = 75.0
_NEEDS: Final = (
    "The image needs a Jupyter server that execd reaches (JUPYTER_HOST and JUPYTER_TOKEN in "
    "execd's environment, as the opensandbox/code-interpreter images such as "
    "opensandbox/code-interpreter:v1.1.0 have) with a kernel for the language (a kernelspec "
    "whose language is it, not named python3: e.g. `python -m ipykernel install --name python`, "
    "`python -m bash_kernel.install`)."
)

_SPECS_SCRIPT: Final = r"""h=${JUPYTER_HOST:-}
[ -n "$h" ] || { echo 'osb-jupyter none'; exit 0; }
a=${h#*://}; a=${a%%/*}; port=${a##*:}; host=${a%:*}
[ "$port" = "$a" ] && port=80
i=0
until exec 3<>"/dev/tcp/$host/$port"; do
  i=$((i+1)); [ "$i" -ge 240 ] && { echo 'osb-jupyter unreachable'; exit 0; }; sleep 0.25
done 2>/dev/null
printf 'GET /api/kernelspecs HTTP/1.0\r\nHost: %s\r\nAuthorization: token %s\r\n\r\n' \
  "$a" "${JUPYTER_TOKEN:-}" >&3
echo 'osb-jupyter answer'
timeout 10 cat <&3 2>/dev/null || cat <&3
"""


async def check_language(
    execd: ExecdClient, commands: CommandRunner, language: str, sandbox_id: str | None
) -> bool:
    """Raise `CodeInterpreterUnavailableError` when the sandbox surely cannot run `language`;
    return whether a kernel for it was seen (False: nothing settled it)."""
    lead = f"Sandbox {sandbox_id} cannot run {language} code"
    from_execd, from_jupyter = await asyncio.gather(
        _ask_execd(execd, language), _ask_jupyter(commands, language)
    )
    for verdict in (from_execd, from_jupyter):
        if verdict is not None and verdict.startswith("no:"):
            raise CodeInterpreterUnavailableError(
                f"{lead}: {verdict[3:].strip()}. {_NEEDS}", language=language
            )
    return from_jupyter == "yes"


async def _ask_execd(execd: ExecdClient, language: str) -> str | None:
    body = {"code": "1", "context": {"id": NIL_CONTEXT, "language": language}}
    try:
        async with asyncio.timeout(_PROBE_LIMIT):
            async for _ in code_events(execd, body):
                return None  # a stream: this daemon answers otherwise; nothing settled
    except ExecdError as exc:
        text = exc.message.lower()
        if "not configured" in text:
            return "no: execd has no Jupyter server configured"
        if "unknown language" in text:
            return f"no: execd does not know the language ({exc.message})"
        return None
    except Exception as exc:  # a probe: it settles nothing when it fails
        logger.debug("the code interpreter probe of execd failed (%s)", type(exc).__name__)
    return None


async def _ask_jupyter(commands: CommandRunner, language: str) -> str | None:
    try:
        result = await run_bytes(commands, _SPECS_SCRIPT, cwd="/", env=None, timeout=_PROBE_LIMIT)
    except Exception as exc:  # a probe: it settles nothing when it fails
        logger.debug("the kernelspec probe failed (%s)", type(exc).__name__)
        return None
    return kernel_verdict(result.stdout, language)


def kernel_verdict(output: bytes, language: str) -> str | None:
    """ "yes", "no: <why>" or None (nothing settled) for the kernelspec probe's output."""
    head, _, rest = output.partition(b"\n")
    state = head.decode("ascii", "replace").strip()
    if state == "osb-jupyter unreachable":
        return "no: the Jupyter server at execd's JUPYTER_HOST accepted no connection within 60 s"
    if state != "osb-jupyter answer":
        return None
    _, _, body = rest.partition(b"\r\n\r\n")
    try:
        specs = json.loads(body.decode("utf-8", "replace")).get("kernelspecs")
    except (ValueError, AttributeError):
        return None
    if not isinstance(specs, dict):
        return None
    languages = sorted(
        {
            str((spec.get("spec") or {}).get("language", "")).lower()
            for name, spec in specs.items()
            if isinstance(spec, dict) and name != "python3"
        }
        - {""}
    )
    if language in languages:
        return "yes"
    have = ", ".join(languages) or "none"
    return f"no: its Jupyter server has no kernel for {language} (kernels for: {have})"
