"""Operations without a result: ``ledger status`` says how many, which no longer run, and since
when (docs/contract.md §9.2, issue 16 item 11); prune keeps them, and the Requeue flag a requeue
among them may have left set stays tracked.  Both backends (``ledger_location``)."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from slurm_dsl.admin import render, view
from slurm_dsl.admin.cli import main
from slurm_dsl.core.model import LedgerError, NotRecorded, Op, RequeueBit, Result
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.records import Unfinished, iso_utc
from slurm_dsl.run.tracked import Tracker
from tests.fakes import write_fake
from tests.ledger_backends import store_class
from tests.ledger_ops import begin_operation, finish_operation

DAY = 86400.0


def test_a_requeue_whose_result_could_not_be_recorded_is_counted_and_stays_tracked(
    tmp_path: Path, ledger_location: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(*args: object, **kwargs: object) -> object:
        raise LedgerError("the disk is full", path=ledger_location)

    fake = write_fake(tmp_path / "bin", {})  # every call succeeds: the requeue ran, all of it
    monkeypatch.setattr(store_class(ledger_location), "finish_operations", failing)  # one job's too
    with Tracker(ledger_location, scontrol=str(fake)) as t:
        with pytest.raises(NotRecorded) as raised:
            t.run(Op.REQUEUE, "5", time.time() + 10)
    assert raised.value.outcome.result is Result.OK
    monkeypatch.undo()
    with open_ledger(ledger_location) as ledger:
        (entry,) = ledger.history("5")
        obj = ledger.get("5")
        assert obj is not None and obj.bit is RequeueBit.MAY_BE_SET, "the intent stays for the sweeper"
        later = ledger.now() + 3600  # past any lease the failed run could not give back
        status = view.status_json(ledger, later)
        assert [o.job_id for o in ledger.due_objects(later)] == ["5"]
    assert status["unfinished"] == {
        "count": 1, "lapsed": 1, "lapsed_requeues": 1,
        "oldest_lapsed": {"id": entry.id, "job_id": "5", "op": "requeue", "started_at": iso_utc(entry.started_at),
                          "started_at_epoch": entry.started_at, "age_seconds": round(later - entry.started_at, 3)},
    }
    line = render.unfinished_line(status["unfinished"])
    assert line.startswith("unfinished operations: 1, of which 1 no longer running")
    assert f"the oldest: requeue 5 (operation {entry.id}) started {iso_utc(entry.started_at)}, 60 min ago" in line
    assert "1 of them requeues (their object stays may_be_set until a sweep settles it)" in line

    out = io.StringIO()
    assert main(["ledger", "status", "--json", "--ledger", ledger_location], out=out) == 0
    assert json.loads(out.getvalue())["unfinished"]["count"] == 1
    out = io.StringIO()
    assert main(["ledger", "status", "--ledger", ledger_location], out=out) == 0
    assert [x for x in out.getvalue().splitlines() if x.startswith("unfinished operations: 1, of which")]


def test_running_or_lapsed_is_read_from_the_lease_and_the_newest_row(ledger_location: str) -> None:
    t0 = 1_700_000_000.0
    with open_ledger(ledger_location) as ledger:
        begin_operation(ledger, "1", Op.HOLD, "1" * 32, t0 + 50)  # running: its job's newest, leased
        begin_operation(ledger, "2", Op.REQUEUE, "2" * 32, t0 + 20)  # lapsed: no lease
        begin_operation(ledger, "3", Op.HOLD, "3" * 32, t0 + 10)  # lapsed: a later row on its job...
        begin_operation(ledger, "3", Op.RELEASE, "4" * 32, t0 + 60)  # ...which runs, under the lease
        done = begin_operation(ledger, "4", Op.HOLD, "5" * 32, t0)
        from tests.ledger.test_ledger import hold_ok_for

        finish_operation(ledger, done, hold_ok_for("4"), b"", t0 + 1)  # finished: not counted
        assert ledger.acquire_leases(["1", "3"], "op-a", t0 + 60, 600.0) == ["1", "3"]
        assert ledger.unfinished(t0 + 100) == Unfinished(4, 2, 1, (3, "3", Op.HOLD, t0 + 10))
        # Once the lease lapses, nothing runs any more.
        assert ledger.unfinished(t0 + 1000) == Unfinished(4, 4, 1, (3, "3", Op.HOLD, t0 + 10))
        assert view.status_json(ledger, t0 + 100)["unfinished"]["lapsed"] == 2


def test_an_empty_ledger_has_none(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        status = view.status_json(ledger, ledger.now())
    assert status["unfinished"] == {"count": 0, "lapsed": 0, "lapsed_requeues": 0, "oldest_lapsed": None}
    assert render.unfinished_line(status["unfinished"]) == "unfinished operations: none"


def test_prune_keeps_unfinished_rows_and_the_bit_they_left(ledger_location: str) -> None:
    t0 = 1_600_000_000.0
    with open_ledger(ledger_location) as ledger:
        begin_operation(ledger, "2", Op.REQUEUE, "2" * 32, t0)  # a requeue that never finished
        begin_operation(ledger, "2", Op.HOLD, "3" * 32, t0 + 1)  # and a later hold, also unfinished
        begin_operation(ledger, "2", Op.HOLD, "4" * 32, t0 + 2)
        result = ledger.prune(t0 + 400 * DAY, t0 + 401 * DAY)
        assert result.removed == 0
        assert [e.finished for e in ledger.history("2")] == [False, False, False]
        obj = ledger.get("2")
        assert obj is not None and obj.bit is RequeueBit.MAY_BE_SET
        assert ledger.unfinished(t0 + 401 * DAY).lapsed == 3


def test_each_observer_keeps_when_it_first_found_an_operation_over(ledger_location: str) -> None:
    """``seen_over`` (docs/contract.md §13.7): the first reading of each observer stays, a later
    one changes nothing, another observer has its own, and ``keep=False`` keeps nothing."""
    with open_ledger(ledger_location) as ledger:
        one = begin_operation(ledger, "7", Op.HOLD, "0" * 32, ledger.now())
        two = begin_operation(ledger, "8", Op.HOLD, "0" * 32, ledger.now())
        assert ledger.seen_over([one], "host-a/boot-1", 100.0) == {one: 100.0}
        assert ledger.seen_over([one, two], "host-a/boot-1", 150.0) == {one: 100.0, two: 150.0}
        assert ledger.seen_over([one], "host-b/boot-9", 7.0) == {one: 7.0}
        assert ledger.seen_over([one, two], "host-c/boot-2", 3.0, keep=False) == {one: 3.0, two: 3.0}
        assert ledger.seen_over([two], "host-c/boot-2", 4.0, keep=False) == {two: 4.0}
        assert ledger.seen_over([], "host-a/boot-1", 1.0) == {}
