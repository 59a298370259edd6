"""Operations through the ledger: lease, intent first, the bit after (docs/contract.md §9.2)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import slurm_dsl
from slurm_dsl import Op, RequeueBit, Result
from slurm_dsl.admin.cli import main
from slurm_dsl.core.model import WholeArray
from slurm_dsl.core.script import KILL_GRACE
from slurm_dsl.host.process import backstop
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.sqlite import SqliteLedger
from slurm_dsl.run.deadlines import MAX_TIMEOUT
from slurm_dsl.run.tracked import Tracker, lease_ttl
from tests.fakes import calls_made, descendants, refuse, write_fake, write_fake_squeue
from tests.ground import ALREADY_FINISHED, INVALID_JOB_ID, UNEXPECTED
from tests.ledger_backends import bit
from tests.ledger_ops import acquire_lease


@pytest.fixture
def ledger_path(tmp_path: Path) -> str:
    return str(tmp_path / "ledger.sqlite3")


def test_an_ok_requeue_leaves_the_object_watched_until_its_clear_is_saved(tmp_path: Path, ledger_path: str) -> None:
    # docs/contract.md §13.3: the outcome says the calls cleared the flag; the object stays
    # may_be_set until a sweep knows slurmctld saved that.
    fake = write_fake(tmp_path / "bin", {})
    with Tracker(ledger_path, scontrol=str(fake)) as t:
        out = t.run(Op.REQUEUE, "11", time.time() + 5)
    assert (out.result, out.requeue_bit) == (Result.OK, RequeueBit.CLEAR)
    assert bit(ledger_path, "11") is RequeueBit.MAY_BE_SET
    with open_ledger(ledger_path) as ledger:
        (entry,) = ledger.history("11")
        obj = ledger.get("11")
        marks = ledger.marks(["11"])["11"]
        # Its quiet moment: when its calls were over, where the looks at slurmctld's saves stood then,
        # and the look its process took (core.durable Rule 2).
        assert entry.finished_at is not None and marks.quiet_at == entry.finished_at
        assert marks.quiet is not None and marks.quiet_look is not None
    assert entry.result == "ok" and len(entry.calls) == 3
    assert obj is not None and obj.why.endswith("cleared, not yet known saved by slurmctld: watched until it is")


def test_a_requeue_that_hangs_in_call_2_marks_the_object_set(tmp_path: Path, ledger_path: str) -> None:
    fake = write_fake(tmp_path / "bin", {"requeue": "exec sleep 30"})
    with Tracker(ledger_path, scontrol=str(fake)) as t:
        out = t.run(Op.REQUEUE, "12", time.time() + 1)
    assert (out.result, out.requeue_bit) == (Result.UNKNOWN, RequeueBit.SET)
    assert bit(ledger_path, "12") is RequeueBit.SET


def test_controller_down_marks_may_be_set_then_restore_clears(tmp_path: Path, ledger_path: str) -> None:
    down = write_fake(tmp_path / "down", {}, default=refuse(UNEXPECTED))
    with Tracker(ledger_path, scontrol=str(down)) as t:
        assert t.run(Op.REQUEUE, "13", time.time() + 5).result is Result.UNKNOWN
    assert bit(ledger_path, "13") is RequeueBit.MAY_BE_SET
    with Tracker(ledger_path, scontrol=str(down)) as t:
        assert t.run(Op.RESTORE, "13", time.time() + 5).result is Result.UNKNOWN
    assert bit(ledger_path, "13") is RequeueBit.MAY_BE_SET, "a failed restore leaves the bit"
    finished = write_fake(tmp_path / "finished", {"clear": refuse(ALREADY_FINISHED)})
    with Tracker(ledger_path, scontrol=str(finished)) as t:
        assert t.run(Op.RESTORE, "13", time.time() + 5).result is Result.REJECTED
    assert bit(ledger_path, "13") is RequeueBit.MAY_BE_SET, "a finished job may still show Requeue=1"
    gone = write_fake(tmp_path / "gone", {"clear": refuse(INVALID_JOB_ID)})
    with Tracker(ledger_path, scontrol=str(gone)) as t:
        assert t.run(Op.RESTORE, "13", time.time() + 5).result is Result.OK
    assert bit(ledger_path, "13") is RequeueBit.MAY_BE_SET, "gone, but its purge is not known saved (§13.3)"


def test_a_leased_job_is_not_touched_and_the_op_expires(tmp_path: Path, ledger_path: str) -> None:
    fake = write_fake(tmp_path / "bin", {})
    with open_ledger(ledger_path) as ledger:
        assert acquire_lease(ledger, "14", "someone else", time.time(), 60)
    with Tracker(ledger_path, scontrol=str(fake)) as t:
        out = t.run(Op.REQUEUE, "14", time.time() + 0.3)
    assert (out.result, out.requeue_bit) == (Result.EXPIRED, RequeueBit.CLEAR)
    assert calls_made(fake) == []


def test_the_public_operations_record_and_raise(tmp_path: Path, ledger_path: str) -> None:
    fake = write_fake(tmp_path / "bin", {"hold": refuse(ALREADY_FINISHED, suspend_line=True)})
    with pytest.raises(slurm_dsl.Rejected) as info:
        slurm_dsl.hold("15", timeout=5, scontrol=str(fake), ledger=ledger_path)
    assert info.value.job_id == "15"
    assert slurm_dsl.requeue(15, timeout=5, scontrol=str(fake), ledger=ledger_path).result is Result.OK
    with open_ledger(ledger_path) as ledger:
        assert [h.op.value for h in ledger.history("15")] == ["hold", "requeue"]


def test_an_unusable_ledger_runs_nothing(tmp_path: Path) -> None:
    fake = write_fake(tmp_path / "bin", {})
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(slurm_dsl.DSLError):
        slurm_dsl.requeue("16", timeout=5, scontrol=str(fake), ledger=str(blocker / "ledger.sqlite3"))
    assert calls_made(fake) == []


@pytest.mark.parametrize("op", [Op.RESTORE, Op.OPEN], ids=str)
def test_a_refusal_before_running_writes_nothing(ledger_path: str, op: Op) -> None:
    # A restore looks nothing up first, so a bad scontrol path was first refused by execute, after
    # the intent: the history kept an unfinished operation that never ran.
    with Tracker(ledger_path, scontrol="/usr/bin/scontrol\nx") as tracker:
        with pytest.raises(slurm_dsl.InvalidInput):
            tracker.run(op, "16", time.time() + 5, checked=True)
    with open_ledger(ledger_path) as ledger:
        assert (ledger.history("16"), ledger.get("16")) == ([], None)


CHILD = """
import sys, time
from slurm_dsl.run.tracked import Tracker
with Tracker(sys.argv[1], scontrol=sys.argv[2]) as t:
    t.run("requeue", "17", time.time() + 60)
"""


def test_a_crash_during_a_requeue_leaves_may_be_set(tmp_path: Path, ledger_path: str) -> None:
    # Call 1 hangs: the child is killed while scontrol runs, after the intent was committed.
    fake = write_fake(tmp_path / "bin", {"set": "sleep 30"})
    child = subprocess.Popen([sys.executable, "-c", CHILD, ledger_path, str(fake)], start_new_session=True)
    deadline = time.monotonic() + 30
    while calls_made(fake) == []:
        assert time.monotonic() < deadline and child.poll() is None
        time.sleep(0.02)
    # A crash of the whole host side: the child and the script it started, at once.
    for pid in [child.pid, *descendants(child.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    child.wait()
    assert bit(ledger_path, "17") is RequeueBit.MAY_BE_SET
    with open_ledger(ledger_path) as ledger:
        (entry,) = ledger.history("17")
        assert entry.finished_at is None
        assert ledger.due_objects(time.time()) == [], "the crashed process's lease has not lapsed yet"
        assert [o.job_id for o in ledger.due_objects(time.time() + 3600)] == ["17"]


def test_an_outcome_that_cannot_be_recorded_is_logged_and_the_intent_kept(
    tmp_path: Path, ledger_path: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from slurm_dsl.core.model import LedgerError

    def full_disk(*args: object, **kwargs: object) -> RequeueBit:
        raise LedgerError("database or disk is full", path=ledger_path)

    fake = write_fake(tmp_path / "bin", {})
    monkeypatch.setattr(SqliteLedger, "finish_operations", full_disk)  # one job's too (tracked.record)
    with Tracker(ledger_path, scontrol=str(fake)) as t:
        with pytest.raises(LedgerError):
            t.run(Op.REQUEUE, "18", time.time() + 5)
    assert "could not record requeue 18: ok" in caplog.text
    monkeypatch.undo()
    assert bit(ledger_path, "18") is RequeueBit.MAY_BE_SET
    with open_ledger(ledger_path) as ledger:
        assert ledger.due_objects(time.time()) != [], "the lease was given back"


# squeue -r as the lab printed it for array 165 (tasks 1 and 3 pending in the remainder,
# task 2 split off as 166), and a plain job 167 (tests/lookups/test_squeue.py SPLIT_ARRAY).
SPLIT_ARRAY = (
    "166|165|2|PENDING|0|0|0|JobHeldAdmin\n165|165|1|PENDING|0|0|0|JobHeldUser\n"
    "165|165|3|PENDING|0|0|0|JobHeldUser\n167|PENDING|0|0|4294901679|None\n"
)


@pytest.mark.parametrize("op", [Op.HOLD, Op.RELEASE, Op.REQUEUE, Op.OPEN])
def test_an_arrays_own_id_is_refused_before_anything_runs(
    tmp_path: Path, ledger_path: str, op: Op, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    fake = write_fake(tmp_path / "bin", {})
    write_fake_squeue(tmp_path / "bin", SPLIT_ARRAY)  # beside scontrol: the squeue it uses
    with Tracker(ledger_path, scontrol=str(fake)) as t:
        with pytest.raises(WholeArray, match="job 165 is the own JobId of array 165, whose 3 tasks") as info:
            t.run(op, "165", time.time() + 5)
        assert info.value.job_ids == ["165"]
        assert t.run(op, "166", time.time() + 5).result is Result.OK  # a split task: a single job
        assert t.run(Op.RESTORE, "165", time.time() + 5).result is Result.OK  # only ever clears flags
    assert calls_made(fake) == [*CALLS_ON_166[op], "update JobId=165 Requeue=0"]
    with open_ledger(ledger_path) as ledger:
        assert [h.op for h in ledger.history("165")] == [Op.RESTORE]


CALLS_ON_166 = {
    Op.HOLD: ["hold 166"],
    Op.RELEASE: ["release 166"],
    Op.OPEN: ["release 166"],
    Op.REQUEUE: ["update JobId=166 Requeue=1", "requeue 166", "update JobId=166 Requeue=0"],
}


def test_cli_refuses_a_list_with_an_arrays_own_id_and_runs_none_of_it(
    tmp_path: Path, ledger_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    fake = write_fake(tmp_path / "bin", {})
    write_fake_squeue(tmp_path / "bin", SPLIT_ARRAY)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["hold", "167", "165", "--timeout", "5", "--scontrol", str(fake), "--ledger", ledger_path])
    assert code == 2 and "whose 3 tasks" in err.getvalue() and "Nothing ran" in err.getvalue()
    assert calls_made(fake) == []
    assert len((tmp_path / "bin" / "squeue.log").read_text().splitlines()) == 1, "one lookup for all ids"


def test_cli_could_not_look_up_is_exit_1_and_nothing_ran(
    tmp_path: Path, ledger_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    fake = write_fake(tmp_path / "bin", {})
    write_fake_squeue(tmp_path / "bin", "", exit_code=1,
                      stderr="slurm_load_jobs error: Unable to contact slurm controller (connect failure)")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["requeue", "167", "--timeout", "5", "--scontrol", str(fake), "--ledger", ledger_path])
    assert code == 1 and "nothing ran" in err.getvalue() and "unreachable" in err.getvalue()
    assert calls_made(fake) == []


@given(left=st.floats(0.0, MAX_TIMEOUT), slack=st.floats(0.0, 60.0))
def test_a_lease_outlasts_the_backstop_of_every_run_it_covers(left: float, slack: float) -> None:
    # docs/contract.md §2, §9.2: the backstop KILLs a run's group whole seconds after its start, past
    # the runner's KILL (left + KILL_GRACE) by at least half a second; a lease taken ``left`` before
    # the deadline lasts at least that long, plus its slack for the ledger writes.
    whole = int(-(-(left + KILL_GRACE + 0.5) // 1))  # the smallest whole number of seconds past it
    assert backstop(left) == whole
    assert lease_ttl(left, slack) >= whole + slack
