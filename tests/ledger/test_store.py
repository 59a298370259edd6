"""One store over two dialects (docs/contract.md §9.1, issue 17 item 2): every ``LedgerStore``
method is written once, in ``ledger.store.SqlStore``; a backend states only what its database does
its own way.  The behaviour both backends share is tested on both by the other ledger tests; this
file checks the shape that keeps it shared: a method written again in a backend would let the two
drift apart, which is what the duplicated backends of before did.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import List, Set, Type

import pytest

from slurm_dsl.ledger.base import LedgerStore
from slurm_dsl.ledger.mariadb import MariaDbLedger
from slurm_dsl.ledger.sqlite import SqliteLedger
from slurm_dsl.ledger.store import SqlStore

LEDGER = Path(__file__).resolve().parents[2] / "slurm_dsl" / "ledger"
# What only the database itself can answer: closing its connection, its clock, its sweep lock, a
# run's mark and what storage it is.  Every other LedgerStore method is the store's.
THE_DIALECTS_OWN = {"close", "now", "sweep_lock", "lock_run", "run_locked", "identity"}


def store_methods() -> Set[str]:
    """LedgerStore's methods, read from the Protocol's own body (not from any backend)."""
    tree = ast.parse(inspect.getsource(LedgerStore))
    cls = tree.body[0]
    assert isinstance(cls, ast.ClassDef)
    return {node.name for node in cls.body if isinstance(node, ast.FunctionDef)}


def defined_in(path: Path, class_name: str) -> List[str]:
    """The methods ``class_name`` defines in the file itself, inherited ones not."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return [item.name for item in node.body if isinstance(item, ast.FunctionDef)]
    raise AssertionError(f"no class {class_name} in {path}")


@pytest.mark.parametrize(("backend", "path"), [(SqliteLedger, "sqlite.py"), (MariaDbLedger, "mariadb.py")])
def test_each_backend_is_the_store_and_writes_none_of_its_methods_again(
    backend: Type[SqlStore], path: str
) -> None:
    assert issubclass(backend, SqlStore)
    written_again = store_methods() & set(defined_in(LEDGER / path, backend.__name__))
    assert written_again <= THE_DIALECTS_OWN, f"{backend.__name__} defines {sorted(written_again - THE_DIALECTS_OWN)}"


def test_the_store_writes_every_other_method_once() -> None:
    mine = set(defined_in(LEDGER / "store.py", "SqlStore"))
    assert store_methods() - THE_DIALECTS_OWN <= mine
    # And no backend is left without one: the abstract ones are all supplied.
    assert not getattr(SqliteLedger, "__abstractmethods__", set())
    assert not getattr(MariaDbLedger, "__abstractmethods__", set())

