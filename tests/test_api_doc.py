"""docs/contract.md §8's signatures are the API's (issue 44 item 9): each name in its code block is
exported, and its parameters, their kinds (positional, or keyword-only after ``*``) and defaults
are what ``inspect.signature`` says; and every backquoted ``module.name`` a docstring of the
package names exists there."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from typing import List, Tuple

import pytest

import slurm_dsl

ROOT = Path(__file__).resolve().parents[1]


def documented() -> List[Tuple[List[str], str]]:
    """(names, the parameter text) of each entry of §8's code block."""
    text = (ROOT / "docs" / "contract.md").read_text()
    section = text.split("## 8. The Python API", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    entries: List[str] = []
    for line in block.splitlines():
        if line.startswith(" ") and entries:
            entries[-1] += " " + line.strip()
        else:
            entries.append(line)
    found = []
    for entry in entries:
        head, _, rest = entry.partition("(")
        params = rest.rsplit(")", 1)[0]
        found.append(([n.strip() for n in head.split("/")], params))
    return found


def shown(name: str) -> str:
    """A signature written as §8 writes it: ``a, b=default, *, c=None``."""
    parts, starred = [], False
    for p in inspect.signature(getattr(slurm_dsl, name)).parameters.values():
        if p.kind is p.KEYWORD_ONLY and not starred:
            parts.append("*")
            starred = True
        default = "" if p.default is p.empty else "=" + (p.default.__name__ if callable(p.default) else repr(p.default))
        parts.append(p.name + default)
    return ", ".join(parts)


def test_every_signature_in_the_contract_is_the_apis() -> None:
    entries = documented()
    functions = {n for n in slurm_dsl.__all__ if inspect.isfunction(getattr(slurm_dsl, n))}
    assert {name for names, _ in entries for name in names} == functions
    for names, params in entries:
        for name in names:
            assert name in slurm_dsl.__all__, f"§8 names {name}, which slurm_dsl does not export"
            assert shown(name) == " ".join(params.split()), f"§8's {name}({params}) is not the API's ({shown(name)})"


NAMED = re.compile(r"``((?:[a-z_]+\.)+)([A-Za-z_][A-Za-z0-9_]*)``")


def test_every_module_name_a_docstring_names_exists() -> None:
    """``run.tracked.lease_owner``, ``core.settle`` and the like, relative to the package, resolve."""
    missing = []
    for path in sorted((ROOT / "slurm_dsl").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node) or ""
            for dotted, name in NAMED.findall(doc):
                parts = [*dotted.rstrip(".").split("."), name]
                if parts[0] not in ("core", "host", "lookups", "ledger", "run", "admin"):
                    continue  # a method (``ledger.now``), a stdlib name, an attribute: not a module path
                if not resolves(parts):
                    missing.append(f"{path.relative_to(ROOT)}: ``{'.'.join(parts)}``")
    assert missing == []


def resolves(parts: List[str]) -> bool:
    """Whether ``slurm_dsl.<parts>`` is a module, or a name (and attributes) in the longest module
    that is a prefix of it."""
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module("slurm_dsl." + ".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


# The public surface in contract §8's words: the five operations, run_op and run_ops, the
# configuration, the outcome with its parts, and the exceptions; nothing else.
PUBLIC = {
    "hold", "release", "requeue", "restore", "open_job", "run_op", "run_ops", "configuration", "Configuration",
    "Outcome", "Call", "AdminComment", "CallOutcome", "Op", "Result", "RequeueBit", "Reason", "Verdict",
    "DSLError", "Rejected", "NotFound", "Expired", "OutcomeUnknown", "RequeueBitSet", "NotRun", "ConfigError",
    "ConfigFileError", "LedgerError", "NotRecorded", "LookupFailed", "SweepBusy", "UsageError", "WholeArray",
    "InvalidInput",
}


def test_the_public_surface_is_what_a_site_plugin_needs() -> None:
    assert set(slurm_dsl.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(slurm_dsl, name) is not None


@pytest.mark.parametrize("name,home", [("execute", "run.calls"), ("render", "core.script"),
                                       ("read_outcome", "core.reader"), ("validate_job_id", "core.jobid")])
def test_a_name_no_longer_public_is_found_for_one_release_with_a_warning(name: str, home: str) -> None:
    with pytest.warns(DeprecationWarning, match=rf"slurm_dsl\.{name} is no longer public.*run_op"):
        found = getattr(slurm_dsl, name)
    assert found is getattr(importlib.import_module(f"slurm_dsl.{home}"), name)
    assert name not in dir(slurm_dsl) or name not in slurm_dsl.__all__


def test_no_other_name_is_found() -> None:
    with pytest.raises(AttributeError):
        slurm_dsl.Tracker  # noqa: B018  (private: run.tracked's)
