"""Rules about the monorepo itself: lockstep versions, dependency direction, typed packages,
the core's argument checks in one place."""

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


# -- argument checks live in `_validate` -------------------------------------------------------

CORE = ROOT / "packages/opensandbox-core/src/opensandbox_core"
ARGUMENT_ERRORS = frozenset({"ConfigurationError", "ArgumentTypeError", "ValueError", "TypeError"})

NOT_ARGUMENT_CHECKS = {
    ("_commands/_background.py", "BackgroundProcess._life"): (
        "a handle built without a session: how the object was made, not a bad argument"
    ),
    ("_doctor/_context.py", "parse_duration"): (
        "the doctor CLI's argparse `type=` converter: argparse turns its ValueError into a "
        "usage error"
    ),
    ("_files/_fallback.py", "parse_special_read"): (
        "a helper command's output that does not parse; the caller reports it as a failure"
    ),
    ("_files/_fallback.py", "parse_records"): (
        "a helper command's output that does not parse; the caller reports it as a failure"
    ),
    ("_files/_filesystem.py", "FileSystem._refuse_protected"): (
        "refuses a resolved target that is the session's working directory or an ancestor: "
        "depends on the session, not on the argument alone"
    ),
    ("_files/_transfers.py", "Transfers.replace_text"): (
        "execd would rewrite the resolved path ($, ~, ..): a limit of /files/replace, decided "
        "by the files facet's rules, not a malformed argument"
    ),
    ("_files/_upload.py", "_plan"): (
        "local_dir must exist on this machine: known only by looking (I/O, in a thread)"
    ),
    ("_fleet/_pool.py", "SandboxPool.start"): "the pool is closed: its state, not an argument",
    ("_fleet/_pool.py", "SandboxPool.acquire"): "the pool is closed: its state, not an argument",
    ("_lifecycle/_reach.py", "probe"): (
        "the sandbox could not enter working_dir: the probe's answer, after I/O"
    ),
    ("_terminal/_open.py", "_create"): (
        "execd could not make or use the terminal's cwd: its answer to POST /pty, after I/O"
    ),
    ("_terminal/_open.py", "_started"): (
        "the terminal's shell could not enter its cwd: what the shell said, after I/O"
    ),
}
"""The core's raises of argument-error types outside `_validate`, each with why it is not an
argument check (keyed by module and enclosing function)."""


def argument_raises(source: str) -> list[tuple[str, int]]:
    """(enclosing function, line) of each `raise` of ConfigurationError, ArgumentTypeError,
    ValueError or TypeError (by name or as `module.Name`, called or not)."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, scope: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, (*scope, child.name))
                continue
            if isinstance(child, ast.Raise) and child.exc is not None:
                exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                name = getattr(exc, "id", None) or getattr(exc, "attr", None)
                if name in ARGUMENT_ERRORS:
                    found.append((".".join(scope) or "<module>", child.lineno))
            visit(child, scope)

    visit(ast.parse(source), ())
    return found


def _core_argument_raises() -> dict[tuple[str, str], list[int]]:
    sites: dict[tuple[str, str], list[int]] = {}
    for path in sorted(CORE.rglob("*.py")):
        module = path.relative_to(CORE).as_posix()
        if module.startswith("_validate/"):
            continue
        for scope, line in argument_raises(path.read_text()):
            sites.setdefault((module, scope), []).append(line)
    return sites


def test_argument_checks_live_in_validate() -> None:
    # Every argument check once, in `_validate`: a raise for a bad argument anywhere else is a
    # second copy of a rule (or one that `opensandbox_core.validation` should offer).
    sites = _core_argument_raises()
    outside = {
        f"{module}:{lines[0]} in {scope}"
        for (module, scope), lines in sites.items()
        if (module, scope) not in NOT_ARGUMENT_CHECKS
    }
    assert not outside, f"argument checks outside _validate (move them there): {sorted(outside)}"
    stale = set(NOT_ARGUMENT_CHECKS) - set(sites)
    assert not stale, f"NOT_ARGUMENT_CHECKS names raises that are gone: {sorted(stale)}"


@pytest.mark.parametrize(
    ("source", "scope"),
    [
        ("def f(x):\n    raise ConfigurationError(f'x must be an int, got {x!r}.')", "f"),
        ("class A:\n    def m(self):\n        raise _errors.ConfigurationError('no')", "A.m"),
        ("async def f():\n    if True:\n        raise ValueError('bad') from None", "f"),
        ("raise TypeError", "<module>"),
        ("def f():\n    raise _validate.ArgumentTypeError('x must be a str.')", "f"),
    ],
)
def test_the_argument_check_rule_catches(source: str, scope: str) -> None:
    assert [s for s, _ in argument_raises(source)] == [scope]
    assert not argument_raises("def f():\n    raise ServerError('x')\n    raise OSError(5, 'x')")
