"""Package READMEs are shown on PyPI, where a relative link (to `../../docs/...`, to another
package's README, or to an in-page `#anchor`, which PyPI's renderer gives no target) leads nowhere.
They name the project's docs in plain text instead, until the packages have a repository URL to
link to absolutely."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READMES = sorted((ROOT / "packages").glob("*/README.md"))
# Inline links and images `[text](target)`, reference definitions `[name]: target`, HTML href/src.
_TARGETS = (
    re.compile(r"\]\(\s*<?([^)\s>]+)"),
    re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M),
    re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I),
)
_ABSOLUTE = re.compile(r"^(?:https?://|mailto:)", re.I)


def relative_links(markdown: str) -> list[str]:
    """The link targets in `markdown` that are not absolute URLs (code spans and blocks ignored)."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [
        target
        for pattern in _TARGETS
        for target in pattern.findall(text)
        if not _ABSOLUTE.match(target)
    ]


def test_every_package_has_a_readme() -> None:
    assert {p.parent.name for p in READMES} == {
        "opensandbox-core",
        "deepagents-opensandbox-backend",
        "pydantic-ai-opensandbox",
    }


@pytest.mark.parametrize("readme", READMES, ids=[p.parent.name for p in READMES])
def test_package_readme_has_no_relative_links(readme: Path) -> None:
    found = relative_links(readme.read_text())
    assert not found, (
        f"{readme.relative_to(ROOT)} links to {found}: relative links break on PyPI. Name the "
        "docs file and section in plain text, or use an absolute https:// URL."
    )


def test_the_check_finds_each_kind_of_relative_link() -> None:
    sample = (
        "[guide](../../docs/core.md) [top](#install) ![chart](chart.png)\n"
        '[ref]: docs/security.md\n<a href="README.md">x</a>\n'
        "[ok](https://github.com/alibaba/OpenSandbox) `[code](not/a/link)`\n"
    )
    assert relative_links(sample) == [
        "../../docs/core.md",
        "#install",
        "chart.png",
        "docs/security.md",
        "README.md",
    ]


def test_package_readmes_point_to_the_docs_and_the_doctor() -> None:
    for readme in READMES:
        text = readme.read_text()
        assert "opensandbox-doctor" in text, readme.parent.name
        assert "docs/" in text, readme.parent.name
