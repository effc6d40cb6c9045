"""`opensandbox-doctor`: check an OpenSandbox server, check by check, and say how to fix it.

```
opensandbox-doctor --domain 127.0.0.1:8080 --image python:3.13-slim
opensandbox-doctor --json --skip-sandbox
opensandbox-doctor --remove-idle-for 1d
opensandbox-doctor --version
```

The domain and key fall back to `OPEN_SANDBOX_DOMAIN` and `OPEN_SANDBOX_API_KEY`; the key is never
printed. The exit status is 1 when any check fails, 0 otherwise (warnings included), 2 on bad usage.

Modules: `_registry` (the checks: name, needs a key, needs a sandbox, function; the runner),
`_context` (options and the probes every check shares, made once), `_server`, `_mounts`,
`_leftovers` and `_sandbox` (the checks), `_diagnose` (transport failures and their fixes),
`_report` (text and JSON) and `_cli`. Everything the doctor creates is removed on every path,
including failures and Ctrl-C.
"""

from ._cli import main, versions
from ._context import DOCTOR_KEY, CheckResult, DoctorOptions, Outcome, parse_duration
from ._registry import CHECKS, Check, Listener, run_checks, run_doctor
from ._report import format_text, json_document
from ._server import FOREIGN_ORIGIN

__all__ = [
    "CHECKS",
    "DOCTOR_KEY",
    "FOREIGN_ORIGIN",
    "Check",
    "CheckResult",
    "DoctorOptions",
    "Listener",
    "Outcome",
    "format_text",
    "json_document",
    "main",
    "parse_duration",
    "run_checks",
    "run_doctor",
    "versions",
]
