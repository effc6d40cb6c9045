"""Rules about the monorepo itself: lockstep versions, dependency direction, typed packages, no
private name of another package, the core's argument checks in one place, no framework named in
the core."""

from __future__ import annotations

import ast
import io
import re
import tokenize
import tomllib
from collections.abc import Iterator, Mapping
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
    # The command as a line of its own (`./nox.sh || status=$?` keeps its exit status for the
    # end of the script): no arguments added.
    ci = [line.split("||")[0].strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert "./nox.sh" in ci


# -- no private name of another package ----------------------------------------------------------

FRAMEWORKS = (
    "deepagents",
    "deepagents_code",
    "pydantic_ai",
    "pydantic_ai_harness",
    "opensandbox",
    "temporalio",
    "prefect",
    "dbos",
    "websockets",
    "httpx",
)
FRAMEWORK_FAMILIES = ("langchain", "langgraph")
"""Other packages whose private names our code never imports, reads or writes: the frameworks the
adapters serve a range of releases of, the OpenSandbox SDK, the durable engines and the HTTP
stack; `langchain*` and `langgraph*` are every distribution of those families."""

TEST_EXEMPTIONS: dict[str, str] = {}
"""Private names of those packages that a test may use, as `path: break` (the text the rule
reports, without the line number) -> why. None today; packages/ gets none at all."""


def is_framework(module: str) -> bool:
    root = module.split(".", 1)[0]
    return root in FRAMEWORKS or root.startswith(FRAMEWORK_FAMILIES)


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _child_nodes(node: ast.AST) -> tuple[ast.AST, ...]:
    """`tuple(ast.iter_child_nodes(node))`, without a generator's cost per node."""
    children: list[ast.AST] = []
    for field in node._fields:
        value = getattr(node, field, None)
        if isinstance(value, list):
            children += [item for item in value if isinstance(item, ast.AST)]
        elif isinstance(value, ast.AST):
            children.append(value)
    return tuple(children)


class _Children(dict[ast.AST, tuple[ast.AST, ...]]):
    """Each node's children, found once, and each module's nodes: the rule walks every tree
    several times (imports, our names, each scope's bindings, the reads), and
    `ast.iter_child_nodes` is most of its cost."""

    def __init__(self) -> None:
        super().__init__()
        self.modules: dict[ast.AST, list[ast.AST]] = {}

    def __missing__(self, node: ast.AST) -> tuple[ast.AST, ...]:
        children = self[node] = _child_nodes(node)
        return children

    def walk(self, tree: ast.AST) -> list[ast.AST]:
        """Every node under `tree` (itself included), as `ast.walk` gives them."""
        if (found := self.modules.get(tree)) is None:
            found, stack = [], [tree]
            while stack:
                node = stack.pop()
                found.append(node)
                children = self[node] = _child_nodes(node)
                stack.extend(children)
            self.modules[tree] = found
        return found

    def clear(self) -> None:
        super().clear()
        self.modules.clear()


_CHILDREN = _Children()
"""Filled while the rule runs over the code base; emptied after it (the trees go with it)."""


def bound_names(tree: ast.AST) -> set[str]:
    """The names a module binds to a framework module or object by importing it."""
    names: set[str] = set()
    for node in _CHILDREN.walk(tree):
        if isinstance(node, ast.Import):
            names.update(
                a.asname or a.name.split(".")[0] for a in node.names if is_framework(a.name)
            )
        elif (
            isinstance(node, ast.ImportFrom) and node.level == 0 and is_framework(node.module or "")
        ):
            names.update(a.asname or a.name for a in node.names if a.name != "*")
    return names


def mentions(node: ast.AST | None, bound: set[str]) -> bool:
    """Whether an annotation names a framework object (string annotations read too)."""
    for sub in ast.walk(node) if node is not None else ():
        if isinstance(sub, ast.Name) and sub.id in bound:
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                if mentions(ast.parse(sub.value, mode="eval"), bound):
                    return True
            except SyntaxError:
                continue
    return False


class CodeIndex:
    """What our whole code base defines: every name of ours (functions, classes, attributes),
    our classes that subclass a framework class, and our functions that are annotated to return
    a framework object (only where every function of that name is)."""

    def __init__(self, trees: Mapping[ast.Module, set[str]]) -> None:
        self.ours: set[str] = set()
        bases: dict[str, tuple[list[ast.expr], set[str]]] = {}
        returning: dict[str, set[bool]] = {}
        for tree, bound in trees.items():
            for node in _CHILDREN.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    self.ours.add(node.name)
                    returning.setdefault(node.name, set()).add(mentions(node.returns, bound))
                elif isinstance(node, ast.ClassDef):
                    self.ours.add(node.name)
                    bases[node.name] = (node.bases, bound)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    self.ours.add(node.attr)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    self.ours.add(node.id)
        self.returns = {name for name, kinds in returning.items() if kinds == {True}}
        self.subclasses: set[str] = set()
        grown = True
        while grown:
            grown = False
            for name, (exprs, bound) in bases.items():
                if name not in self.subclasses and any(
                    mentions(b, bound) or (isinstance(b, ast.Name) and b.id in self.subclasses)
                    for b in exprs
                ):
                    self.subclasses.add(name)
                    grown = True


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _own_nodes(body: list[ast.AST]) -> Iterator[ast.AST]:
    """The nodes of a scope's body, not descending into nested functions and classes."""
    stack = list(body)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in _CHILDREN[node] if not isinstance(c, _SCOPES))


_BINDERS = (
    ast.Assign,
    ast.AnnAssign,
    ast.NamedExpr,
    ast.For,
    ast.AsyncFor,
    ast.comprehension,
    ast.With,
    ast.AsyncWith,
    ast.arguments,
)
"""The nodes `_bindings` finds bindings in (checked first: most nodes bind nothing)."""


def _bindings(node: ast.AST) -> Iterator[tuple[ast.expr, ast.expr | None, ast.expr | None]]:
    """(target, value, annotation) of every name binding `node` makes."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield target, node.value, None
    elif isinstance(node, ast.AnnAssign | ast.NamedExpr):
        yield node.target, node.value, getattr(node, "annotation", None)
    elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
        yield node.target, node.iter, None
    elif isinstance(node, ast.With | ast.AsyncWith):
        for item in node.items:
            if item.optional_vars is not None:
                yield item.optional_vars, item.context_expr, None
    elif isinstance(node, ast.arguments):
        for arg in [*node.posonlyargs, *node.args, *node.kwonlyargs]:
            yield ast.Name(arg.arg, ast.Store()), None, arg.annotation


class _Scope:
    """The names of one function (or module) known to hold a framework module or object."""

    def __init__(self, index: CodeIndex, bound: set[str], known: set[str], attrs: set[str]):
        self.index, self.bound, self.known, self.attrs = index, bound, set(known), attrs

    def valued(self, e: ast.expr | None) -> bool:
        """Whether `e` is, statically, a framework module or object."""
        if isinstance(e, ast.Name):
            return e.id in self.bound or e.id in self.known
        if isinstance(e, ast.Attribute):
            if isinstance(e.value, ast.Name) and e.value.id in ("self", "cls"):
                return e.attr in self.attrs
            # What our own code defines is ours, also on a subclass of a framework class.
            return e.attr not in self.index.ours and self.valued(e.value)
        if isinstance(e, ast.Call):
            f = e.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            return self.valued(f) or name in self.index.returns
        if isinstance(e, ast.Await | ast.Starred | ast.Subscript | ast.NamedExpr):
            return self.valued(e.value)
        if isinstance(e, ast.IfExp):
            return self.valued(e.body) or self.valued(e.orelse)
        if isinstance(e, ast.BoolOp):
            return any(self.valued(v) for v in e.values)
        return False

    def learn(self, body: list[ast.AST]) -> _Scope:
        """Add the names `body` binds to framework objects (annotated so, or assigned one)."""
        pending: list[tuple[str, ast.expr]] = []
        for node in _own_nodes(body):
            if not isinstance(node, _BINDERS):
                continue
            for target, value, annotation in _bindings(node):
                if isinstance(target, ast.Name) and target.id not in self.known:
                    if mentions(annotation, self.bound):
                        self.known.add(target.id)
                    elif value is not None:
                        pending.append((target.id, value))
        grown = True
        while grown:
            grown = False
            for name, value in pending:
                if name not in self.known and self.valued(value):
                    self.known.add(name)
                    grown = True
        return self


def _self_attrs(cls: ast.ClassDef, outer: _Scope) -> set[str]:
    """`self.X` attributes of a class that hold framework objects (annotated, or assigned one)."""
    attrs = {
        s.target.id
        for s in cls.body
        if isinstance(s, ast.AnnAssign)
        and isinstance(s.target, ast.Name)
        and mentions(s.annotation, outer.bound)
    }
    methods = [m for m in cls.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)]
    for _ in range(2):  # one attribute may be assigned from another
        known = len(attrs)
        for method in methods:
            scope = _Scope(outer.index, outer.bound, outer.known, attrs)
            scope.learn([method.args, *method.body])
            for node in _own_nodes(method.body):
                if not isinstance(node, _BINDERS):
                    continue
                for target, value, _annotation in _bindings(node):
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                        and scope.valued(value)
                    ):
                        attrs.add(target.attr)
        if len(attrs) == known:
            break  # a second pass would see what the first saw
    return attrs


def _is_self(e: ast.expr) -> bool:
    if isinstance(e, ast.Name):
        return e.id in ("self", "cls")
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "super"


def _reaches(node: ast.AST, scope: _Scope, subclass: bool, strict: bool) -> str | None:
    """The private name `node` reads or writes on a framework module or object, if any."""
    if isinstance(node, ast.Attribute) and is_private(node.attr):
        if _is_self(node.value):
            # Inherited from the framework class: a private name our code does not define.
            return (
                f"self.{node.attr} (inherited)"
                if subclass and node.attr not in scope.index.ours
                else None
            )
        return f"{ast.unparse(node.value)}.{node.attr}" if scope.valued(node.value) else None
    function = getattr(node, "func", None)
    if getattr(function, "id", None) not in _ATTR_FUNCTIONS or len(node.args) < 2:  # type: ignore[attr-defined]
        return None
    name = str(getattr(node.args[1], "value", ""))  # type: ignore[attr-defined]
    if is_private(name) and (strict or scope.valued(node.args[0])):  # type: ignore[attr-defined]
        return f"{function.id}(..., {name!r})"  # type: ignore[union-attr]
    return None


_ATTR_FUNCTIONS = ("getattr", "setattr", "hasattr", "delattr")


def _may_break(node: ast.AST, ours: set[str]) -> bool:
    """Whether `_reaches` can find anything at `node`, in any scope: a private attribute (of
    `self` only when our code does not define it), or `getattr(x, "_private")` and its kin."""
    if isinstance(node, ast.Attribute):
        return is_private(node.attr) and (not _is_self(node.value) or node.attr not in ours)
    return (
        isinstance(node, ast.Call)
        and getattr(node.func, "id", None) in _ATTR_FUNCTIONS
        and len(node.args) >= 2
        and is_private(str(getattr(node.args[1], "value", "")))
    )


def _leading_to_breaks(tree: ast.Module, ours: set[str]) -> set[ast.AST]:
    """The nodes `_walk` has to visit: those where a break may be, and their ancestors. The rest
    (most of the code) can hold none, whatever their scope knows, so their scopes are not
    learned (learning is most of the rule's cost)."""
    nodes = _CHILDREN.walk(tree)
    found = [node for node in nodes if _may_break(node, ours)]
    if not found:
        return set()
    parents = {child: node for node in nodes for child in _CHILDREN[node]}
    needed: set[ast.AST] = set()
    for node in found:
        while node not in needed:
            needed.add(node)
            if node is tree:
                break
            node = parents[node]
    return needed


def _walk(
    node: ast.AST, scope: _Scope, subclass: bool, strict: bool, needed: set[ast.AST]
) -> Iterator[tuple[int, str]]:
    for child in _CHILDREN[node]:
        if child not in needed:
            continue
        if isinstance(child, ast.ClassDef):
            inner = _Scope(scope.index, scope.bound, scope.known, _self_attrs(child, scope))
            yield from _walk(child, inner, child.name in scope.index.subclasses, strict, needed)
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            inner = _Scope(scope.index, scope.bound, scope.known, scope.attrs)
            body = child.body if isinstance(child.body, list) else [child.body]
            yield from _walk(child, inner.learn([child.args, *body]), subclass, strict, needed)
        else:
            found = _reaches(child, scope, subclass, strict)
            if found is not None:
                yield child.lineno, found  # type: ignore[attr-defined]
            yield from _walk(child, scope, subclass, strict, needed)


def private_name_breaks(
    tree: ast.Module, where: str, index: CodeIndex, bound: set[str], *, strict: bool = True
) -> list[str]:
    """Imports of another package's private module or name, and reads or writes of a private
    attribute of its modules or objects, where the code says statically what an object is: a
    name imported from it, a value built or returned by it, a parameter or variable or attribute
    annotated with its type, and `self` in a subclass of its classes (for names our code does not
    define). `strict` (packages/) refuses `getattr(anything, "_private")` too."""
    found: list[str] = []
    for node in _CHILDREN.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        for module in modules:
            if is_framework(module) and any(is_private(p) for p in module.split(".")[1:]):
                found.append(f"{where}:{node.lineno} import {module}")
    if not bound and not strict and not _may_reach(tree, index):
        return found  # nothing here names a framework module, object or subclass
    needed = _leading_to_breaks(tree, index.ours)
    if not needed:
        return found
    top = _Scope(index, bound, set(), set()).learn(list(tree.body))
    found += [f"{where}:{line} {text}" for line, text in _walk(tree, top, False, strict, needed)]
    return found


def _may_reach(tree: ast.Module, index: CodeIndex) -> bool:
    """Whether a module without framework imports can still hold a framework object: by calling
    one of our functions that return one, or in a subclass of a framework class."""
    for node in _CHILDREN.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in index.subclasses:
            return True
        name = getattr(node, "attr", None) or getattr(node, "id", None)
        if name in index.returns:
            return True
    return False


def exec_breaks(source: str | ast.Module, where: str) -> list[str]:
    """Calls of `exec`, `eval` or `compile` (running a framework's source)."""
    found = []
    tree = ast.parse(source) if isinstance(source, str) else source
    for node in _CHILDREN.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else None
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                name = func.attr if func.value.id == "builtins" else None
            if name in ("exec", "eval", "compile"):
                found.append(f"{where}:{node.lineno} {name}()")
    return found


def _sources() -> dict[Path, tuple[ast.Module, set[str]]]:
    paths = [
        p
        for folder in ("packages", "tests")
        for p in sorted((ROOT / folder).rglob("*.py"))
        if ".nox" not in p.parts
    ]
    trees = {p: ast.parse(p.read_text()) for p in paths}
    return {p: (tree, bound_names(tree)) for p, tree in trees.items()}


def test_no_private_name_of_another_package_and_no_exec_of_its_source() -> None:
    # A private name, or an exec'd copy of a framework's source, breaks with any release of it;
    # the packages declare a range of releases (and the tests check them at both ends).
    try:
        _check_private_names_and_exec(_sources())
    finally:
        _CHILDREN.clear()


def _check_private_names_and_exec(sources: dict[Path, tuple[ast.Module, set[str]]]) -> None:
    index = CodeIndex(dict(sources.values()))
    found: list[str] = []
    exempted: set[str] = set()
    for path, (tree, bound) in sources.items():
        where = str(path.relative_to(ROOT))
        in_packages = where.startswith("packages/")
        breaks = private_name_breaks(tree, where, index, bound, strict=in_packages)
        if in_packages:
            breaks += exec_breaks(tree, where)
        for item in breaks:
            key = f"{where}: {item.split(' ', 1)[1]}"
            if not in_packages and key in TEST_EXEMPTIONS:
                exempted.add(key)
            else:
                found.append(item)
    assert not found, found
    assert exempted == set(TEST_EXEMPTIONS), set(TEST_EXEMPTIONS) - exempted  # none is stale


def _breaks(source: str, *, strict: bool = True) -> list[str]:
    tree = ast.parse(source)
    bound = bound_names(tree)
    return private_name_breaks(tree, "m.py", CodeIndex({tree: bound}), bound, strict=strict)


@pytest.mark.parametrize(
    "source",
    [
        "from deepagents.backends.sandbox import _build_grep_cmd",
        "from deepagents.backends._x import y",
        "import deepagents._internal",
        "from deepagents import _utils",
        "from pydantic_ai.durable_exec._workspace import DurableWorkspace",
        "import langchain_core._api",
        "from langgraph._internal._config import x",
        "from deepagents_code.integrations import _registry",
        "import httpx\nhttpx._client",
        "from opensandbox.config import ConnectionConfig\nc = ConnectionConfig()\nc._owns_transport = 1",
        "from opensandbox.config import ConnectionConfig\ndef f(c: ConnectionConfig):\n    c._x",
        "from opensandbox.config import ConnectionConfig\n"
        "class B:\n"
        "    _configs: dict[str, ConnectionConfig]\n"
        "    def f(self):\n"
        "        owned = self._configs.get('x')\n"
        "        shared = owned.model_copy()\n"
        "        shared._owns_transport = False",
        "from deepagents.backends.sandbox import BaseSandbox\n"
        "class S(BaseSandbox):\n"
        "    def f(self):\n"
        "        return self._helper()",
        "import temporalio.workflow as wf\nwf._Runtime",
        "from dbos import DBOS\nasync def f():\n    handle = await DBOS.start()\n    handle._x",
        "from pydantic_ai import Agent\nfor part in Agent().parts:\n    part._y",
        "import websockets\nasync def f():\n    async with websockets.connect('u') as ws:\n"
        "        ws._x",
        "from pydantic_ai.workspaces import WorkspaceRef\ndef f(r: 'WorkspaceRef'):\n    r._x",
        "import httpx\ndef f(c: httpx.Client):\n    getattr(c, '_pool')",
        "getattr(sandbox, '_GLOB_COMMAND_TEMPLATE')",
    ],
)
def test_the_private_name_rule_catches(source: str) -> None:
    assert _breaks(source), source


@pytest.mark.parametrize(
    "source",
    [
        "from deepagents.backends.sandbox import BaseSandbox",
        "from opensandbox_core._errors import OpenSandboxError",
        "import deepagents_opensandbox_backend._options",
        "from deepagents.backends.sandbox import BaseSandbox\n"
        "class S(BaseSandbox):\n"
        "    def __init__(self):\n"
        "        self._mine = 1\n"
        "    def f(self):\n"
        "        return self._mine",
        "from pydantic_ai.workspaces import WorkspaceRef\ndef f(r: WorkspaceRef):\n    r.__class__",
        "class Mine:\n    def _x(self): ...\nMine()._x()",
    ],
)
def test_the_private_name_rule_leaves_our_own_names(source: str) -> None:
    assert not _breaks(source), source


def test_tests_may_getattr_a_private_name_of_anything_else() -> None:
    # Only packages/ refuses getattr(x, "_name") of any object; a test may, of the standard
    # library or of our own modules, but not of a framework object.
    assert not _breaks("import sys\ngetattr(sys, '_base_executable')", strict=False)
    assert _breaks("import sys\ngetattr(sys, '_base_executable')", strict=True)
    assert _breaks("import httpx\ngetattr(httpx, '_client')", strict=False)


@pytest.mark.parametrize(
    "source",
    [
        "exec(code, namespace)",
        "code = compile(tree, '<x>', 'exec')",
        "import builtins\nbuiltins.exec('x')",
    ],
)
def test_the_exec_rule_catches(source: str) -> None:
    assert exec_breaks(source, "m.py")


# -- argument checks live in `_validate` -------------------------------------------------------

CORE = ROOT / "packages/opensandbox-core/src/opensandbox_core"
ARGUMENT_ERRORS = frozenset({"ConfigurationError", "ArgumentTypeError", "ValueError", "TypeError"})

NOT_ARGUMENT_CHECKS = {
    ("_fleet/_snapshots.py", "find_snapshot"): (
        "no ready snapshot of that name or id on the server: known only by asking it"
    ),
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


# -- the core names no framework -----------------------------------------------------------------

FRAMEWORK = re.compile(r"deep[\s_-]?agents|pydantic|lang[\s_-]?chain|lang[\s_-]?graph", re.I)
_WORDS = {tokenize.NAME, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}


def framework_names(source: str) -> list[tuple[int, str]]:
    """(line, token) of each identifier or string naming a framework; comments and docstrings
    (a string standing alone as a statement) are prose and may name one."""
    if not FRAMEWORK.search(source):
        return []  # every token is a part of the source: none can name one (and tokenizing is slow)
    prose = [
        ((node.lineno, node.col_offset), (node.end_lineno or node.lineno, node.end_col_offset or 0))
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]
    return [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type in _WORDS
        and FRAMEWORK.search(token.string)
        and not any(start <= token.start < end for start, end in prose)
    ]


def test_the_core_names_no_framework() -> None:
    # The core serves any adapter: an adapter's names, labels and packages come from the adapter
    # (its parameters, its `opensandbox.adapters` entry point), never from a list in the core.
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in sorted(CORE.rglob("*.py"))
        for line, text in framework_names(path.read_text())
    ]
    assert not found, found


@pytest.mark.parametrize(
    "source",
    [
        "import deepagents",
        "from pydantic_ai import Agent",
        "KEY = 'pydantic-ai-create'",
        "ADAPTERS = ('core', 'deepagents-code')",
        "x = f'{a} LangGraph thread'",
        "def thread_of_langchain(): ...",
        "msg = ('a Deep Agents '\n       'backend')",
        "def f():\n    '''Doc.'''\n    return 'Deep_Agents'",
    ],
)
def test_the_framework_name_rule_catches(source: str) -> None:
    assert framework_names(source), source


@pytest.mark.parametrize(
    "source",
    [
        "# Deep Agents and Pydantic AI build on this\nx = 1",
        "'''The Pydantic AI backend is built on both.'''",
        "class A:\n    '''For LangGraph threads.'''\n    key = 'opensandbox-agents.key'",
        "KEY = 'x'\n'''Read by the deepagents package.'''",
    ],
)
def test_the_framework_name_rule_leaves_prose(source: str) -> None:
    assert not framework_names(source), source
