"""The layering by wing (docs/wings.md): the pure core does no I/O, each edge is the only one of
its kind, the wings depend one way, and no module imports itself round a cycle.

Rule 1: ``slurm_dsl.core`` imports only a few side-effect-free standard modules and itself: no
process, file, clock, randomness, database or network.  Rule 2: only ``host.process`` imports
``subprocess``, only the ledger wing imports ``sqlite3`` and ``pymysql``, only
``lookups.pyslurm`` imports ``pyslurm``, and only ``admin.cli`` prints.  Rule 3: a wing imports
only the wings below it (core; then host; then lookups and ledger; then run; then admin and the
package's own api), with no exception.  Rule 4: no import cycle.  Checked on the source (the
AST), so an import inside a function counts too, and so does an import under
``if TYPE_CHECKING:``: a type-only import is still a dependency a reader must follow.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "slurm_dsl"
WINGS = ("core", "host", "lookups", "ledger", "run", "admin")
SIDE_EFFECT_FREE_STDLIB = {
    "__future__", "re", "enum", "dataclasses", "typing", "math", "json", "itertools", "functools", "operator",
    "collections",
}
ONLY = {"subprocess": {"host.process"}, "sqlite3": {"ledger.sqlite"}, "pymysql": {"ledger.mariadb"},
        "pyslurm": {"lookups.pyslurm"}}
ONLY_WING = {"subprocess": "host", "sqlite3": "ledger", "pymysql": "ledger", "pyslurm": "lookups"}
# What each wing may import of the package (besides itself); "" is the package's top level.
MAY_IMPORT = {
    "core": set(),
    "host": {"core"},
    "lookups": {"core", "host"},
    "ledger": {"core"},
    "run": {"core", "host", "lookups", "ledger"},
    "admin": {"core", "host", "lookups", "ledger", "run", ""},
    "": {"core", "run", "admin"},
}


def module_names() -> List[str]:
    """Every module of the package by its name under ``slurm_dsl`` ("core.reader"; a package's
    ``__init__`` by the package's name, "" for the top level)."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


def source(name: str) -> Path:
    as_module = PACKAGE.joinpath(*name.split(".")).with_suffix(".py") if name else None
    if as_module is not None and as_module.exists():
        return as_module
    return PACKAGE.joinpath(*name.split("."), "__init__.py") if name else PACKAGE / "__init__.py"


def is_package(name: str) -> bool:
    return source(name).name == "__init__.py"


def imports(name: str, text: Optional[str] = None) -> Set[str]:
    """Every module ``name`` imports, top level or not (``importlib.import_module`` of a literal
    name too), type-only imports under ``if TYPE_CHECKING:`` included: the package's own by their
    name under ``slurm_dsl`` prefixed with ``slurm_dsl.``, others by their top-level name.  ``text``:
    read it in place of the module's source."""
    tree = ast.parse(source(name).read_text() if text is None else text)
    here = name.split(".") if name else []
    package = here if is_package(name) else here[:-1]
    known = set(module_names())
    found: Set[str] = set()

    def own(dotted: str) -> None:
        found.add("slurm_dsl." + dotted if dotted else "slurm_dsl")

    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value.split(".")[0])
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("slurm_dsl"):
                    own(alias.name[len("slurm_dsl."):] if "." in alias.name else "")
                else:
                    found.add(alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and not (node.module or "").startswith("slurm_dsl"):
                found.add((node.module or "").split(".")[0])
                continue
            if node.level == 0:
                base = (node.module or "").split(".")[1:]
            else:
                base = package[: len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            target = ".".join(base)
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                own(sub if sub in known else target)  # a module, or a name from a module
    return found


def wing(name: str) -> str:
    return name.split(".")[0] if name.split(".")[0] in WINGS else ""


def graph() -> Dict[str, Set[str]]:
    return {
        name: {m[len("slurm_dsl."):] if m != "slurm_dsl" else "" for m in imports(name) if m.startswith("slurm_dsl")}
        for name in module_names()
    }


def test_the_wings_exist() -> None:
    assert {wing(name) for name in module_names()} == {"", *WINGS}
    assert all(is_package(w) for w in WINGS)


@pytest.mark.parametrize("module", sorted(m for m in module_names() if wing(m) == "core"))
def test_a_core_module_imports_nothing_that_does_io(module: str) -> None:
    outside = {m for m in imports(module) if not m.startswith("slurm_dsl")}
    assert outside - SIDE_EFFECT_FREE_STDLIB == set()


@pytest.mark.parametrize("library", sorted(ONLY))
def test_one_module_per_edge(library: str) -> None:
    users = {name for name in module_names() if library in imports(name)}
    assert users == ONLY[library]
    assert {wing(name) for name in users} == {ONLY_WING[library]}


@pytest.mark.parametrize("module", module_names())
def test_a_wing_imports_only_the_wings_below_it(module: str) -> None:
    reached = {wing(target) for target in graph()[module]} - {wing(module)}
    assert reached <= MAY_IMPORT[wing(module)], f"{module or 'slurm_dsl'} imports {reached}"


def find_cycles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """Every cycle a depth-first walk of ``edges`` closes, as the path round it."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: List[List[str]] = []

    def visit(node: str, path: List[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    return cycles


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycle() -> None:
    assert find_cycles(graph()) == []


def test_the_wing_packages_import_nothing() -> None:
    """Importing one module of a wing runs only the wing's ``__init__``: it must stay empty of
    imports, so that a command pays only for what it uses."""
    assert {w: imports(w) - {"__future__"} for w in WINGS} == {w: set() for w in WINGS}


def test_only_the_cli_prints() -> None:
    printing = set()
    for name in module_names():
        for node in ast.walk(ast.parse(source(name).read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                printing.add(name)
            if isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr") and (
                isinstance(node.value, ast.Name) and node.value.id == "sys"
            ):
                printing.add(name)
    assert printing <= {"admin.cli"}


def test_every_module_is_on_the_map() -> None:
    """docs/wings.md names every module of each wing in that wing's section (a module the map does
    not name is one nobody knows where to put), and no module that is not there."""
    import re

    text = (PACKAGE.parent / "docs" / "wings.md").read_text()
    sections = re.split(r"^## ", text, flags=re.M)
    named: Dict[str, Set[str]] = {}
    for section in sections:
        found = re.match(r"\d+[a-z]?\. `slurm_dsl/(\w+)/`", section)
        wing = found.group(1) if found else ("" if section.startswith("6. The top level") else None)
        if wing is None:
            continue
        named[wing] = set(re.findall(r"`(\w+\.py)`", section))
    for wing in (*WINGS, ""):
        folder = PACKAGE / wing if wing else PACKAGE
        present = {p.name for p in folder.glob("*.py") if wing or p.name in ("__init__.py", "api.py", "__main__.py")}
        if wing:
            present.discard("__init__.py")
        where = wing or "the top level"
        assert present - named.get(wing, set()) == set(), f"docs/wings.md does not name these in {where}"
        assert named.get(wing, set()) - present - {"__init__.py"} == set(), f"docs/wings.md names modules {wing} lacks"



def test_a_type_only_import_counts() -> None:
    """An import under ``if TYPE_CHECKING:`` is a dependency like any other: a circle closed by one
    is still a circle for whoever reads the code, and a wing that names a higher one's types
    depends on it."""
    text = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..run.calls import execute\n"
    assert imports("core.model", text) == {"typing", "slurm_dsl.run.calls"}
