"""Every Python code block in docs/*.md and the package READMEs runs, as written, against the testbed.

A block preceded by an HTML comment `<!-- not-run: reason -->` is skipped (for example one that
needs a paid model's API key); the reason is required so that skips stay deliberate.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(
    r"(?:<!--\s*not-run:(?P<reason>[^>]*)-->\s*\n)?```python\n(?P<code>.*?)```", re.S
)


def _blocks() -> list[tuple[str, str, str | None]]:
    found = []
    pages = [
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "packages").glob("*/README.md")),
    ]
    for path in pages:
        for index, match in enumerate(BLOCK.finditer(path.read_text()), start=1):
            reason = match.group("reason")
            label = path.name if path.parent.name == "docs" else f"{path.parent.name}/{path.name}"
            found.append(
                (f"{label}#{index}", match.group("code"), reason.strip() if reason else None)
            )
    return found


# The docs' code is checked once per integration session (in its first profile run): that it
# runs as written. What each execd generation changes is the business of the suites beside.
@pytest.mark.daemon_neutral
@pytest.mark.parametrize(("name", "code", "skip"), _blocks(), ids=[b[0] for b in _blocks()])
def test_doc_example_runs(
    name: str, code: str, skip: str | None, testbed_env: dict[str, str], tmp_path: Path
) -> None:
    if skip is not None:
        assert skip, f"{name}: a not-run marker needs a reason"
        pytest.skip(skip)
    script = tmp_path / "example.py"
    script.write_text(code)
    completed = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, **testbed_env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, (
        f"{name} failed:\n{completed.stdout}\n{completed.stderr[-3000:]}"
    )
