"""Whether the tests that run pydantic-ai-harness's capabilities (`Shell`, `Coder`) can run.

The harness's newest release, 0.62.0, pins `pydantic-ai-slim==2.62.0`, so the highest end of the
Pydantic AI package's range (`nox -s "pydantic_ai(end='highest')"`) is installed without it and
sets `OSB_WITHOUT_HARNESS=1`: there, and only there, those modules are skipped, saying why
(`pytest.importorskip` with `MISSING`). In every other session the harness is a test dependency,
and a missing one is an error, not a skip.
"""

from __future__ import annotations

import importlib.util
import os

MISSING = (
    "needs pydantic-ai-harness (Shell, Coder), which this session leaves out: its newest "
    "release (0.62.0) pins pydantic-ai-slim==2.62.0, the other end of the package's range"
)

if (
    not os.environ.get("OSB_WITHOUT_HARNESS")
    and importlib.util.find_spec("pydantic_ai_harness") is None
):
    raise ImportError(
        "pydantic-ai-harness is not installed, and OSB_WITHOUT_HARNESS is not set: install the "
        "test dependency group (nox does), or run the highest end's session."
    )
