"""The public face of opensandbox-core is a decision, held here (issue 35).

- The names every public module exports (`__all__`) equal the checked-in list
  `tests/unit/public_api.txt`: growing or shrinking the API shows in review.
- At most 40 names at the top level of `opensandbox_core`, and at most 80 in all public modules
  (issue 35).
- Every public name has a caller: the adapter packages use it, or a docs example does (the
  examples run in `tests/live/test_docs_examples.py`). The error tree is public as a whole.
- `__all__` holds what the module really defines or imports, and nothing public is left out of it.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import opensandbox_core

ROOT = Path(__file__).resolve().parents[2]
LISTED = ROOT / "tests" / "unit" / "public_api.txt"
TOP_LIMIT = 40
ALL_LIMIT = 80


def public_modules() -> list[str]:
    """`opensandbox_core` and each of its modules or packages whose name has no underscore."""
    names = ["opensandbox_core"]
    for info in pkgutil.iter_modules(opensandbox_core.__path__):
        if not info.name.startswith("_"):
            names.append(f"opensandbox_core.{info.name}")
    return sorted(names)


def exported() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name in public_modules():
        module = importlib.import_module(name)
        found[name] = sorted(n for n in getattr(module, "__all__", ()) if not n.startswith("__"))
    return found


def listed() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    module = ""
    for line in LISTED.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            module = line[1:-1]
            found[module] = []
        else:
            found[module].append(line)
    return {m: sorted(n) for m, n in found.items()}


def test_the_public_names_are_the_checked_in_list() -> None:
    now, expected = exported(), listed()
    added = {m: sorted(set(now.get(m, ())) - set(expected.get(m, ()))) for m in now}
    removed = {m: sorted(set(expected.get(m, ())) - set(now.get(m, ()))) for m in expected}
    assert not {m: n for m, n in added.items() if n}, f"new public names: {added}"
    assert not {m: n for m, n in removed.items() if n}, f"public names gone: {removed}"


def test_the_top_level_is_small() -> None:
    top = len(exported()["opensandbox_core"])
    assert top <= TOP_LIMIT, f"{top} names at the top level (at most {TOP_LIMIT})"


def test_the_whole_public_face_is_small() -> None:
    total = sum(len(names) for names in exported().values())
    assert total <= ALL_LIMIT, f"{total} public names in all (at most {ALL_LIMIT})"


def test_every_name_in_all_exists_and_every_public_attribute_is_listed() -> None:
    for name in public_modules():
        module = importlib.import_module(name)
        declared = set(getattr(module, "__all__", ()))
        for item in declared:
            assert hasattr(module, item), f"{name}.__all__ names {item}, which it lacks"
        if name == "opensandbox_core":
            classes = {
                n
                for n, v in vars(module).items()
                if not n.startswith("_") and isinstance(v, type) and v.__module__.startswith(name)
            }
            assert classes <= declared, f"public classes left out of __all__: {classes - declared}"


def _callers() -> str:
    sources = [
        p.read_text()
        for package in ("deepagents-opensandbox-backend", "pydantic-ai-opensandbox")
        for p in (ROOT / "packages" / package / "src").rglob("*.py")
    ]
    blocks: list[str] = []
    for doc in [*(ROOT / "docs").glob("*.md"), *(ROOT / "packages").glob("*/README.md")]:
        blocks += re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)
    return "\n".join(sources + blocks)


def _is_error(module: str, name: str) -> bool:
    value = getattr(importlib.import_module(module), name)
    return isinstance(value, type) and issubclass(value, Exception | Warning)


def test_every_public_name_has_a_caller() -> None:
    text = _callers()
    missing = [
        f"{module}.{name}"
        for module, names in exported().items()
        for name in names
        if not _is_error(module, name) and not re.search(rf"\b{re.escape(name)}\b", text)
    ]
    assert not missing, f"public names no adapter and no docs example uses: {missing}"
