"""Rules about the monorepo itself: lockstep versions, dependency direction, typed packages."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "opensandbox-core": "opensandbox_core",
    "deepagents-opensandbox-backend": "deepagents_opensandbox_backend",
    "pydantic-ai-opensandbox": "pydantic_ai_opensandbox",
}


def _project(dist: str) -> dict[str, object]:
    data = tomllib.loads((ROOT / "packages" / dist / "pyproject.toml").read_text())
    project = data["project"]
    assert isinstance(project, dict)
    return project


def test_versions_move_in_lockstep() -> None:
    versions = {dist: _project(dist)["version"] for dist in PACKAGES}
    assert len(set(versions.values())) == 1, versions
    version = versions["opensandbox-core"]
    assert isinstance(version, str)
    major, minor, _ = version.split(".")
    for dist in ("deepagents-opensandbox-backend", "pydantic-ai-opensandbox"):
        deps = _project(dist)["dependencies"]
        assert isinstance(deps, list)
        core = [d for d in deps if d.startswith("opensandbox-core")]
        assert core == [f"opensandbox-core>={version},<{major}.{int(minor) + 1}"], core


@pytest.mark.parametrize(("dist", "module"), PACKAGES.items())
def test_package_is_typed_and_versioned(dist: str, module: str) -> None:
    src = ROOT / "packages" / dist / "src" / module
    assert (src / "py.typed").exists()
    init = (src / "__init__.py").read_text()
    assert f'__version__ = "{_project(dist)["version"]}"' in init
    assert "__all__" in init


def _imports(module_dir: Path) -> set[str]:
    names: set[str] = set()
    for path in module_dir.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def test_dependency_direction() -> None:
    core = _imports(ROOT / "packages/opensandbox-core/src/opensandbox_core")
    assert not core & {"deepagents", "pydantic_ai", "langchain", "langchain_core"}, core
    assert not core & {"deepagents_opensandbox_backend", "pydantic_ai_opensandbox"}
    deep = _imports(
        ROOT / "packages/deepagents-opensandbox-backend/src/deepagents_opensandbox_backend"
    )
    assert "pydantic_ai_opensandbox" not in deep and "pydantic_ai" not in deep
    pyd = _imports(ROOT / "packages/pydantic-ai-opensandbox/src/pydantic_ai_opensandbox")
    assert "deepagents_opensandbox_backend" not in pyd and "deepagents" not in pyd


@pytest.mark.parametrize("dist", ["deepagents-opensandbox-backend", "pydantic-ai-opensandbox"])
def test_adapters_use_only_the_cores_public_names(dist: str) -> None:
    # The core's private modules may change in any release; an adapter that reached into one
    # would break with a core its version range allows.
    private = []
    for path in (ROOT / "packages" / dist / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            for module in modules:
                parts = module.split(".")
                if parts[0] == "opensandbox_core" and any(p.startswith("_") for p in parts[1:]):
                    private.append(f"{path.name}:{node.lineno} {module}")
    assert not private, private


def test_test_module_names_are_unique() -> None:
    # pytest's default import mode imports test modules by basename: two with the same name in
    # different folders break collection of the whole run.
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py") if ".nox" not in p.parts]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, duplicates


@pytest.mark.parametrize("dist", PACKAGES)
def test_package_metadata_is_complete(dist: str) -> None:
    # Each distribution ships the repository's licence and says what it is for on PyPI.
    assert (ROOT / "packages" / dist / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    project = _project(dist)
    assert project["license-files"] == ["LICENSE"]
    assert project["keywords"] and project["urls"]
    classifiers = project["classifiers"]
    assert isinstance(classifiers, list)
    assert any(c.startswith("Intended Audience") for c in classifiers)
    assert any(c.startswith("Topic") for c in classifiers)
    # It must resolve above the unrelated 0.1.0 of the same name already on PyPI.
    version = project["version"]
    assert isinstance(version, str)
    assert tuple(int(part) for part in version.split(".")) >= (0, 2, 0)


def test_core_pins_the_sdk_minor_it_was_verified_with() -> None:
    # The core reaches into SDK internals (adapters, models), which move between minor releases.
    deps = _project("opensandbox-core")["dependencies"]
    assert isinstance(deps, list)
    sdk = [d for d in deps if d.startswith("opensandbox>") or d.startswith("opensandbox=")]
    assert sdk == ["opensandbox>=1.1.1,<1.2"], sdk


def test_ci_runs_the_readme_test_command() -> None:
    # The README gives users two commands; CI must run the second one (every check) as written.
    readme = (ROOT / "README.md").read_text()
    blocks = [b.split("```", 1)[0].strip() for b in readme.split("```bash\n")[1:]]
    assert blocks[:2] == ["./nox.sh -s demo", "./nox.sh"], blocks[:2]
    ci = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert "./nox.sh" in ci


FRAMEWORKS = ("deepagents",)
"""Frameworks the adapters serve a range of releases of: only their public names are used.
(`pydantic_ai` is not listed yet: the Pydantic AI adapter still imports
`pydantic_ai.durable_exec._workspace`.)"""


def framework_rule_breaks(source: str, where: str) -> list[str]:
    """Imports of a private framework name (a dotted component or an imported name starting
    with `_`), and calls of `exec`, `eval` or `compile` (running a framework's source)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else None
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                name = func.attr if func.value.id == "builtins" else None
            if name in ("exec", "eval", "compile"):
                found.append(f"{where}:{node.lineno} {name}()")
            # getattr(module, "_private") is the same reach by another spelling.
            if name == "getattr" and len(node.args) >= 2:
                arg = node.args[1]
                if isinstance(arg, ast.Constant) and str(arg.value).startswith("_"):
                    found.append(f"{where}:{node.lineno} getattr(..., {arg.value!r})")
        for module in modules:
            parts = module.split(".")
            if parts[0] in FRAMEWORKS and any(p.startswith("_") for p in parts[1:]):
                found.append(f"{where}:{node.lineno} {module}")
    return found


def test_packages_use_only_public_framework_names_and_run_no_source() -> None:
    # A private name or an exec'd copy of a framework's source breaks with any release of it;
    # the packages declare a range of releases and must work across all of it.
    found = []
    for path in sorted((ROOT / "packages").rglob("*.py")):
        found += framework_rule_breaks(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, found


@pytest.mark.parametrize(
    "source",
    [
        "from deepagents.backends.sandbox import _build_grep_cmd",
        "from deepagents.backends._x import y",
        "import deepagents._internal",
        "from deepagents import _utils",
        "exec(code, namespace)",
        "code = compile(tree, '<x>', 'exec')",
        "import builtins\nbuiltins.exec('x')",
        "getattr(sandbox, '_GLOB_COMMAND_TEMPLATE')",
    ],
)
def test_the_framework_rule_catches(source: str) -> None:
    assert framework_rule_breaks(source, "m.py")
    assert not framework_rule_breaks("from deepagents.backends.sandbox import BaseSandbox", "m")
