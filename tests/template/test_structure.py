"""The runtime's shape, held against its own map: faces, floors, no cycles.

Read from the code's imports with `ast` (nothing is imported or run), on a fresh bake of every
option combination:

- project code outside the runtime (tools, app, cli, hosts, tests) imports only the runtime's
  faces: `mrtr_runtime`, `mrtr_runtime.server`, `mrtr_runtime.testing`, never a `_private`
  module;
- every import inside the runtime points down the floors drawn in DEVELOPING.md ("The
  runtime's floors"), and every runtime module is on that map;
- the runtime has no import cycle.

Each rule also has a test that plants a violation by hand and sees it caught.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from bakery import COMBINATIONS, REPO, Bake, cookiecutter_config
from cookiecutter.main import cookiecutter

ROOT = Path(__file__).resolve().parents[2]
DEVELOPING = ROOT / "DEVELOPING.md"
FACES = frozenset({"__init__", "server", "testing"})
#: What project code may import below ``mrtr_runtime`` (itself the tool face; ``content`` is its
#: sub-face for content blocks).
PUBLIC_FACES = frozenset({"server", "testing", "content"})
#: The runtime's sub-packages whose faces only the runtime's own faces import.
WINGS = frozenset({"http", "cli", "redis"})
_FLOOR_LINE = re.compile(r"^floor\s+(\d+)\s+\S+\s+(.+)$")


def floors_of(developing: str) -> dict[str, int]:
    """module -> floor, from the fenced block under "## The runtime's floors"."""
    section = developing.split("## The runtime's floors", 1)[1]
    block = section.split("```", 2)[1]
    floors: dict[str, int] = {}
    for line in block.splitlines():
        found = _FLOOR_LINE.match(line.strip())
        if found:
            for module in found.group(2).split():
                assert module not in floors, f"{module} is on two floors in DEVELOPING.md"
                floors[module] = int(found.group(1))
    return floors


def module_name(runtime_dir: Path, path: Path) -> str:
    """``_router``, ``http._app``; a package's ``__init__.py`` is the package (``http``), the
    runtime's own is ``__init__``."""
    parts = list(path.relative_to(runtime_dir).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _package_of(name: str, path: Path) -> list[str]:
    """The package a module's relative imports start from."""
    if name == "__init__":
        return []
    parts = name.split(".")
    return parts if path.name == "__init__.py" else parts[:-1]


def _resolve(package: list[str], level: int, module: str | None) -> str | None:
    if level - 1 > len(package):
        return None
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def _runtime_targets(name: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted target) for every relative import of a runtime file, at any depth: import
    statements, ``import_module("._x")`` and a face's lazy-import table ``{"Name": "._x"}``."""
    package = _package_of(name, path)
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            target = _resolve(package, node.level, node.module)
            if target is not None:
                # `from . import _hosts` imports the module `cli._hosts`, not its package; the
                # names of `from ._app import HttpApp` resolve to the module `http._app`.
                for alias in node.names:
                    yield node.lineno, f"{target}.{alias.name}" if target else alias.name
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
            yield from _relative_names(package, node.lineno, node.args[:1])
        elif isinstance(node, ast.Dict):
            yield from _relative_names(package, node.lineno, node.values)


def _relative_names(
    package: list[str], line: int, values: Sequence[ast.expr | None]
) -> Iterator[tuple[int, str]]:
    """The modules named by string constants such as ``"._answers"``."""
    for value in values:
        if (
            isinstance(value, ast.Constant)
            and isinstance(value.value, str)
            and value.value.startswith(".")
        ):
            target = _resolve(package, 1, value.value[1:])
            if target is not None:
                yield line, target


def runtime_graph(runtime_dir: Path) -> dict[str, dict[str, int]]:
    """module -> {imported runtime module: first line}; sub-packages' modules dotted."""
    runtime = {
        module_name(runtime_dir, path): path
        for path in runtime_dir.rglob("*.py")
        if "__pycache__" not in path.parts
    }
    graph: dict[str, dict[str, int]] = {}
    for name, path in runtime.items():
        edges: dict[str, int] = {}
        for line, target in _runtime_targets(name, path):
            # `from ._rules import X` names the module `http._rules`, `from . import _hosts` the
            # module `cli._hosts`: the longest existing module the dotted name starts with.
            while target and target not in runtime:
                target = target.rpartition(".")[0]
            if target and target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


#: The optional wings (template options), by the dotted name of their package or module: a bake
#: without one has none of its modules, which the map still names.
OPTIONAL_WINGS = {
    "http": "http",
    "testing._http": "testing/_http.py",
    "testing._http_session": "testing/_http_session.py",
    "cli._http_commands": "cli/_http_commands.py",
    "redis": "redis",
    "cli._bundle": "cli/_bundle.py",
    "_skills": "_skills.py",
    "_tasks": "_tasks.py",
}


def absent_wings(runtime_dir: Path) -> frozenset[str]:
    """The optional wings this bake was generated without."""
    return frozenset(
        wing for wing, path in OPTIONAL_WINGS.items() if not (runtime_dir / path).exists()
    )


def floor_violations(
    graph: Mapping[str, Mapping[str, int]],
    floors: Mapping[str, int],
    absent: frozenset[str] = frozenset(),
) -> list[str]:
    """Modules off the map, the map's modules missing (but those of ``absent`` wings), and
    imports that do not point down."""

    def left_out(name: str) -> bool:
        return any(name == wing or name.startswith(f"{wing}.") for wing in absent)

    problems = [f"{name} is on no floor of DEVELOPING.md" for name in graph if name not in floors]
    problems += [
        f"DEVELOPING.md names {name}, which does not exist"
        for name in floors
        if name not in graph and not left_out(name)
    ]
    for name, edges in sorted(graph.items()):
        for target, line in sorted(edges.items()):
            if name in floors and target in floors and floors[target] >= floors[name]:
                problems.append(
                    f"{name}:{line} imports {target} (floor {floors[target]}), "
                    f"not below its own floor {floors[name]}"
                )
    return problems


def cycles(graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, {})):
            if state.get(target) == 1:
                found.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def private_imports(project: Path, package: str) -> list[str]:
    """Imports of anything but a face from project code outside the runtime: a ``_private``
    module or name, or a wing's own modules (``mrtr_runtime.http``: the server face has it)."""
    runtime_dir = project / "src" / package / "mrtr_runtime"
    problems = []
    for path in sorted(project.rglob("*.py")):
        if runtime_dir in path.parents or ".venv" in path.parts:
            continue
        relative = path.relative_to(project)
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            # (module path, names imported from it)
            imports: list[tuple[str, list[str]]] = []
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                imports = [(node.module, [alias.name for alias in node.names])]
            elif isinstance(node, ast.Import):
                imports = [(alias.name, []) for alias in node.names]
            for module, names in imports:
                parts = module.split(".")
                if "mrtr_runtime" not in parts:
                    continue
                after = parts[parts.index("mrtr_runtime") + 1 :]
                rest = after[1:] if after and after[0] in PUBLIC_FACES else after
                # Below a face, any module is a private one or a wing's own.
                wrong = bool(rest) or any(
                    name.startswith("_") or (not after and name in WINGS) for name in names
                )
                if wrong:
                    shown = f"{module}.{names[0]}" if names else module
                    problems.append(f"{relative}:{node.lineno} imports {shown}")
    return problems


@pytest.fixture(scope="module", params=sorted(COMBINATIONS))
def baked(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Bake:
    output = tmp_path_factory.mktemp("structure") / "out"
    output.mkdir()
    project = cookiecutter(
        str(REPO),
        no_input=True,
        extra_context=dict(COMBINATIONS[request.param]),
        output_dir=str(output),
        config_file=str(cookiecutter_config(output.parent)),
    )
    return Bake(Path(project), "", "")


def test_project_code_imports_only_the_runtime_faces(baked: Bake) -> None:
    assert private_imports(baked.project, baked.package.name) == []


def test_runtime_imports_point_down_the_floors_drawn_in_developing(baked: Bake) -> None:
    runtime_dir = baked.package / "mrtr_runtime"
    graph = runtime_graph(runtime_dir)
    floors = floors_of(DEVELOPING.read_text("utf-8"))
    assert floor_violations(graph, floors, absent_wings(runtime_dir)) == []


def test_the_vendored_runtime_holds_python_modules_only(baked: Bake) -> None:
    # What is vendored is read and hashed as source: a stray download (a wheel, a cache) in
    # its folder would ship in every project's wheel and escape the runtime hash.
    runtime_dir = baked.package / "mrtr_runtime"
    stray = [
        path.relative_to(runtime_dir).as_posix()
        for path in runtime_dir.rglob("*")
        if path.is_file() and path.suffix != ".py" and "__pycache__" not in path.parts
    ]
    assert stray == []


#: The longest a runtime function may be, in lines (a reader holds one on a screen).
MAX_FUNCTION_LINES = 80


def long_functions(runtime_dir: Path) -> list[str]:
    """Every runtime function (method, nested function) over MAX_FUNCTION_LINES lines."""
    found: list[str] = []
    for path in sorted(runtime_dir.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    where = path.relative_to(runtime_dir).as_posix()
                    found.append(f"{where}: {node.name} is {lines} lines")
    return found


def test_no_runtime_function_is_longer_than_a_screen(baked: Bake, tmp_path: Path) -> None:
    runtime_dir = baked.package / "mrtr_runtime"
    assert long_functions(runtime_dir) == []
    # What it catches: one function a line too long.
    planted = tmp_path / "planted.py"
    body = "".join(f"    x{line} = {line}\n" for line in range(MAX_FUNCTION_LINES - 1))
    planted.write_text(f"def f():\n{body}", encoding="utf-8")
    assert long_functions(tmp_path) == []
    planted.write_text(f"def f():\n{body}    return 0\n", encoding="utf-8")
    assert long_functions(tmp_path) == [f"planted.py: f is {MAX_FUNCTION_LINES + 1} lines"]


def test_the_runtime_has_no_import_cycle(baked: Bake) -> None:
    assert cycles(runtime_graph(baked.package / "mrtr_runtime")) == []


def test_the_faces_are_the_top_floor() -> None:
    floors = floors_of(DEVELOPING.read_text("utf-8"))
    top = max(floors.values())
    assert {name for name, floor in floors.items() if floor == top} == FACES


# -- each rule catches a violation planted by hand ----------------------------------------------


@pytest.fixture
def planted(baked: Bake, tmp_path: Path) -> Bake:
    copy = tmp_path / "project"
    shutil.copytree(baked.project, copy, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    return Bake(copy, baked.stdout, baked.stderr)


def test_a_private_import_in_a_tool_is_caught(planted: Bake) -> None:
    tool = planted.package / "tools" / "planted.py"
    tool.write_text("from ..mrtr_runtime._tokens import KeyRing\n\nKEYS = KeyRing\n", "utf-8")
    assert private_imports(planted.project, planted.package.name) == [
        f"src/{planted.package.name}/tools/planted.py:1 imports mrtr_runtime._tokens.KeyRing"
    ]


def test_a_private_import_in_a_test_is_caught_in_every_spelling(planted: Bake) -> None:
    package = planted.package.name
    test = planted.project / "tests" / "test_planted.py"
    test.write_text(
        f"import {package}.mrtr_runtime._jsonrpc\nfrom {package}.mrtr_runtime import _dispatch\n",
        "utf-8",
    )
    found = private_imports(planted.project, package)
    assert [line.split(" imports ")[0] for line in found] == [
        "tests/test_planted.py:1",
        "tests/test_planted.py:2",
    ]


def test_an_import_up_the_floors_and_a_cycle_are_caught(planted: Bake) -> None:
    runtime_dir = planted.package / "mrtr_runtime"
    wire = runtime_dir / "_wire.py"
    wire.write_text(
        wire.read_text("utf-8") + "\nfrom ._jsonrpc import encode  # planted\n", "utf-8"
    )
    jsonrpc = runtime_dir / "_jsonrpc.py"
    jsonrpc.write_text(
        jsonrpc.read_text("utf-8") + "\nfrom ._wire import ELICIT  # planted\n", "utf-8"
    )
    graph = runtime_graph(runtime_dir)
    problems = floor_violations(graph, floors_of(DEVELOPING.read_text("utf-8")))
    assert any(
        problem.startswith("_wire:") and "imports _jsonrpc" in problem for problem in problems
    )
    assert ["_wire", "_jsonrpc", "_wire"] in cycles(graph)


def test_a_module_missing_from_the_map_is_caught(planted: Bake) -> None:
    (planted.package / "mrtr_runtime" / "_unmapped.py").write_text("X = 1\n", "utf-8")
    graph = runtime_graph(planted.package / "mrtr_runtime")
    problems = floor_violations(graph, floors_of(DEVELOPING.read_text("utf-8")))
    assert "_unmapped is on no floor of DEVELOPING.md" in problems


def test_a_wing_import_from_project_code_is_caught(planted: Bake) -> None:
    package = planted.package.name
    test = planted.project / "tests" / "test_planted.py"
    test.write_text(
        f"from {package}.mrtr_runtime.http import serve_http\n"
        f"from {package}.mrtr_runtime import cli\n"
        f"import {package}.mrtr_runtime.testing._memory\n"
        f"from {package}.mrtr_runtime.testing import MemoryClient\n",
        "utf-8",
    )
    found = private_imports(planted.project, package)
    assert [line.split(" imports ")[0] for line in found] == [
        "tests/test_planted.py:1",
        "tests/test_planted.py:2",
        "tests/test_planted.py:3",
    ]


def test_an_import_up_inside_a_wing_and_out_of_the_standalone_floor_is_caught(
    planted: Bake,
) -> None:
    runtime_dir = planted.package / "mrtr_runtime"
    rules = runtime_dir / "http" / "_rules.py"
    if not rules.exists():
        pytest.skip("this combination has no HTTP wing to plant into")
    rules.write_text(rules.read_text("utf-8") + "\nfrom ._app import HttpApp  # planted\n")
    hosts = runtime_dir / "cli" / "_hosts.py"
    hosts.write_text(hosts.read_text("utf-8") + "\nfrom .._wire import ELICIT  # planted\n")
    graph = runtime_graph(runtime_dir)
    problems = floor_violations(graph, floors_of(DEVELOPING.read_text("utf-8")))
    assert any(p.startswith("http._rules:") and "imports http._app" in p for p in problems)
    assert any(p.startswith("cli._hosts:") and "imports _wire" in p for p in problems)
    assert any({"http._app", "http._rules"} <= set(cycle) for cycle in cycles(graph))
