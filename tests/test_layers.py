"""The layering: the pure core does no I/O, and each edge is the only one of its kind.

Rule 1: the pure modules (job ids, statuses, the script renderer, refusals, the reader,
the combination rules, the values, the errors, the ledger's rules) import only a few
side-effect-free standard modules and each other: no process, file, clock, randomness,
database or network.  Rule 2: only ``runner`` imports ``subprocess``, only
``sqlite_ledger`` imports ``sqlite3``, only ``mariadb_ledger`` imports ``pymysql``, only
``pyslurm_lookup`` imports ``pyslurm``, and only ``cli`` prints.  Checked on the source (the
AST), so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Set

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "slurm_dsl"
PURE = {
    "jobid", "plain", "statuses", "script", "refusals", "reader", "combine", "model", "errors", "ledger_rules",
    "bulk_reader", "shown",
}
SIDE_EFFECT_FREE_STDLIB = {
    "__future__", "re", "enum", "dataclasses", "typing", "math", "json", "itertools", "functools"
}
ONLY = {"subprocess": "runner", "sqlite3": "sqlite_ledger", "pymysql": "mariadb_ledger", "pyslurm": "pyslurm_lookup"}


def imports(module: str) -> Set[str]:
    """Every module ``module`` imports at run time, top level or not (``importlib.import_module``
    of a literal name too); package modules by their bare name.  ``if TYPE_CHECKING:`` blocks
    import nothing at run time and are skipped."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = []
    found: Set[str] = set()
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
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.add((node.module or "").split(".")[0])
            elif node.module:
                found.add(node.module.split(".")[0])
            else:  # from . import x
                found.update(alias.name for alias in node.names)
    return found


def modules() -> Dict[str, Set[str]]:
    return {p.stem: imports(p.stem) for p in sorted(PACKAGE.glob("*.py")) if p.stem != "__main__"}


def test_the_pure_modules_exist() -> None:
    assert PURE <= set(modules())


@pytest.mark.parametrize("module", sorted(PURE))
def test_a_pure_module_imports_nothing_that_does_io(module: str) -> None:
    allowed = SIDE_EFFECT_FREE_STDLIB | PURE
    assert imports(module) - allowed == set()


@pytest.mark.parametrize(("library", "owner"), sorted(ONLY.items()))
def test_one_module_per_edge(library: str, owner: str) -> None:
    assert {name for name, found in modules().items() if library in found} == {owner}


def test_only_the_cli_prints() -> None:
    printing = set()
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                printing.add(path.stem)
            if isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr") and (
                isinstance(node.value, ast.Name) and node.value.id == "sys"
            ):
                printing.add(path.stem)
    assert printing <= {"cli"}
