"""``LedgerStore.lost``: the acknowledged operations recorded "acknowledged, then lost" (life S12)
that nothing has redone since, which ``history --lost``, the sweep's exit status and its metric
say (issue 45 item 7), on both backends; and ``history --lost`` itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

from slurm_dsl.core.model import Op, Outcome, RequeueBit, Result, Verdict
from slurm_dsl.ledger.base import LedgerStore
from slurm_dsl.ledger.choose import open_ledger
from tests.cli_run import cli
from tests.ledger_ops import begin_operation, finish_operation

NONCE = "ab" * 16


def op(ledger: LedgerStore, job: str, what: Op, result: Result, now: float, verdict: Optional[Verdict] = None,
       key: Optional[str] = None) -> int:
    op_id = begin_operation(ledger, job, what, NONCE, now, ends_by=now + 30, key=key)
    finish_operation(ledger, op_id, Outcome(what, job, result, RequeueBit.CLEAR), b"", now + 1)
    if verdict is not None:
        ledger.add_settlements([(op_id, verdict, now + 2, None, "read again")], now + 2, by="test")
    return op_id


def lost_ids(ledger: LedgerStore) -> List[int]:
    return [e.id for e in ledger.lost()]


def test_lost_lists_what_was_acknowledged_then_lost_and_not_redone(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        absent = op(ledger, "1", Op.HOLD, Result.OK, 10.0, Verdict.ABSENT)
        gone = op(ledger, "2", Op.REQUEUE, Result.OK, 10.0, Verdict.GONE, key="k")
        op(ledger, "3", Op.HOLD, Result.OK, 10.0)  # acknowledged, never found lost
        op(ledger, "4", Op.HOLD, Result.UNKNOWN, 10.0, Verdict.ABSENT)  # never acknowledged: not lost
        op(ledger, "5", Op.HOLD, Result.REJECTED, 10.0)
        assert lost_ids(ledger) == [absent, gone]
        op(ledger, "1", Op.RELEASE, Result.OK, 20.0)  # another op is no redo
        assert lost_ids(ledger) == [absent, gone]
        again = op(ledger, "1", Op.HOLD, Result.OK, 30.0, Verdict.ABSENT)  # redone, and lost again
        assert lost_ids(ledger) == [gone, again]
        op(ledger, "1", Op.HOLD, Result.OK, 40.0)  # redone for good
        assert lost_ids(ledger) == [gone]
        assert ledger.lost(limit=0) == []


def test_history_lost_says_each_and_how_to_redo_it(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    code, out, _ = cli(["history", "--lost", "--ledger", path])
    assert code == 1  # no ledger there
    with open_ledger(path) as ledger:
        op(ledger, "7", Op.REQUEUE, Result.OK, 10.0, Verdict.ABSENT, key="drain-1")
        op(ledger, "8", Op.HOLD, Result.OK, 10.0, Verdict.GONE)
        op(ledger, "9", Op.HOLD, Result.OK, 10.0, Verdict.ABSENT)
    code, out, _ = cli(["history", "--lost", "--ledger", path, "--json"])
    assert code == 16
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["kind"], r["job_id"], r["redo"]) for r in rows] == [
        ("lost", "7", "slurm-dsl requeue 7 --key drain-1"), ("lost", "8", None), ("lost", "9", "slurm-dsl hold 9")]
    code, out, _ = cli(["history", "--lost", "8", "--ledger", path])
    assert code == 16 and "then lost (gone)" in out and "nothing can redo it" in out and " 7 " not in out
    code, out, _ = cli(["history", "--lost", "6", "--ledger", path])
    assert code == 0 and out.startswith("no acknowledged operation was found lost")
    code, _, err = cli(["history", "--ledger", path])
    assert code == 2 and "give job ids, or --lost" in err
