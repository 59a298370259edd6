"""A keyed run's selection, kept for its reruns (core.select Rule 4; schema ``selections``), on both backends."""

from __future__ import annotations

from typing import List

import pytest

from slurm_dsl.core.model import InvalidInput, LedgerError, Op
from slurm_dsl.ledger.choose import open_ledger


def test_the_first_run_records_its_set_and_every_rerun_gets_it(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        assert ledger.selection("drain-1", Op.REQUEUE) is None
        assert ledger.select_once("drain-1", Op.REQUEUE, "--node 'n1'", ["12", "10", "11"], 100.0, "root") == (
            "--node 'n1'", ["12", "10", "11"])
        # A later run (or one that raced it) that listed other jobs gets the first set.
        assert ledger.select_once("drain-1", Op.REQUEUE, "--node 'n1'", ["12", "13"], 200.0, "root") == (
            "--node 'n1'", ["12", "10", "11"])
        assert ledger.selection("drain-1", Op.REQUEUE) == ("--node 'n1'", ["12", "10", "11"])
    with open_ledger(ledger_location) as again:  # kept, not a connection's memory
        assert again.selection("drain-1", Op.REQUEUE) == ("--node 'n1'", ["12", "10", "11"])


def test_a_key_selects_apart_for_each_op_and_an_empty_set_is_kept_too(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        ledger.select_once("k", Op.HOLD, "--user 'a'", [], 1.0, None)
        ledger.select_once("k", Op.RELEASE, "--user 'a'", ["5"], 1.0, None)
        assert ledger.selection("k", Op.HOLD) == ("--user 'a'", [])
        assert ledger.selection("k", Op.RELEASE) == ("--user 'a'", ["5"])
        assert ledger.selection("other", Op.HOLD) is None


@pytest.mark.parametrize("key, ids", [("", ["1"]), ("a b", ["1"]), ("k", ["01"]), ("k", ["1_2"])])
def test_a_bad_key_or_id_is_refused_and_nothing_kept(ledger_location: str, key: str, ids: List[str]) -> None:
    with open_ledger(ledger_location) as ledger:
        with pytest.raises((InvalidInput, LedgerError)):
            ledger.select_once(key, Op.HOLD, "--node 'n'", ids, 1.0, None)
        assert ledger.selection("k", Op.HOLD) is None
