"""The baseline committed with the intent (docs/contract.md §9.2, §12; issue 18 item 1).

Every op but restore looks its ids up before it runs (one squeue call); its answer per job is
committed as the operation's ``baseline`` in the same transaction as the intent, with
``baseline_at`` (the ledger-clock time the lookup STARTED) and ``ends_by`` (the ledger-clock start
+ the seconds to the deadline + KILL_GRACE + GUARD_MARGIN).  Each path: a single op, one by one
(the driver), a bulk chunk and a bulk one-id single.  A requeue always looks up before call 1.
A crash right after the intent leaves the baseline committed.

The fake squeue answers in the real ``-O`` shape (tests/fakes.py); the tracker's clock runs 1000 s
ahead of the ledger's, so a time carried over wrongly from one clock to the other shows.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, List

import pytest

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import Op, Result
from slurm_dsl.core.script import KILL_GRACE
from slurm_dsl.host import runs
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.records import HistoryEntry
from slurm_dsl.run import bulk as bulk_module
from slurm_dsl.run import tracked as tracked_module
from slurm_dsl.run.arrays import NOT_LOOKED, LookupAnswer
from slurm_dsl.run.bulk import run_many
from slurm_dsl.run.calls import GUARD_MARGIN
from slurm_dsl.run.driver import Ran, drive
from slurm_dsl.run.tracked import Tracker, start_fields
from tests.fakes import write_fake, write_fake_squeue, write_list_fake
from tests.ledger_ops import acquire_lease

AHEAD = 1000.0  # the tracker's clock minus the ledger's (SQLite's is the host's)
BACKSTOP = KILL_GRACE + GUARD_MARGIN

# As squeue -r -O prints them (tests/fakes.py squeue_record): a running job restarted once, a
# pending one, a held one, and an array's own JobId that holds its one last task (alone).
RECORDS = (
    "71|RUNNING|1|1|4294901|None\n"
    "72|PENDING|1|0|4294900|Priority\n"
    "73|PENDING|0|0|0|JobHeldUser\n"
    "80|80|4|RUNNING|1|0|4294899|None\n"
)
RUNNING_71 = JobInfo("71", "RUNNING", True, 1, 4294901, "None")
PENDING_72 = JobInfo("72", "PENDING", True, 0, 4294900, "Priority")
HELD_73 = JobInfo("73", "PENDING", False, 0, 0, "JobHeldUser")


def ahead() -> float:
    return time.time() + AHEAD


def fakes(tmp_path: Path, *, bulk: bool = False) -> Path:
    """A fake scontrol (every call succeeds) and the fake squeue beside it, both logging to ONE
    file in order (calls.log), so that the lookup's place before call 1 shows."""
    directory = tmp_path / "bin"
    if bulk:
        plan = {j: {"hold": "ok", "release": "ok", "set": "ok", "requeue": "ok", "clear": "ok"}
                for j in ("71", "72", "73", "74", "80")}
        fake = write_list_fake(directory, plan)
    else:
        fake = write_fake(directory, {})
    write_fake_squeue(directory, RECORDS)
    os.symlink(directory / "calls.log", directory / "squeue.log")
    (directory / "calls.log").touch()
    return fake


def log(fake: Path) -> List[str]:
    return (fake.parent / "calls.log").read_text().splitlines()


def rows(ledger_path: str, *jobs: str) -> List[HistoryEntry]:
    with open_ledger(ledger_path) as ledger:
        return [e for job in jobs for e in ledger.history(job)]


def check_times(e: HistoryEntry, before: float, left: float) -> None:
    """``baseline_at`` is the ledger-clock time the lookup started: after ``before`` (the ledger's
    clock when the run began), before the row's start; ``ends_by`` the start + ``left`` (at most,
    the seconds to the deadline when the run began) + the backstop."""
    assert e.baseline_at is not None and e.ends_by is not None
    assert before <= e.baseline_at <= e.started_at < before + 30
    assert e.started_at + BACKSTOP + left - 30 < e.ends_by <= e.started_at + BACKSTOP + left


@pytest.fixture
def ledger_path(tmp_path: Path) -> str:
    return str(tmp_path / "ledger.sqlite3")


@pytest.mark.parametrize("op", [Op.HOLD, Op.RELEASE, Op.REQUEUE, Op.OPEN], ids=str)
def test_a_single_op_commits_its_lookup_as_the_baseline(tmp_path: Path, ledger_path: str, op: Op) -> None:
    fake = fakes(tmp_path)
    before = time.time()
    with Tracker(ledger_path, scontrol=str(fake), squeue=str(fake.parent / "squeue"), clock=ahead) as t:
        assert t.run(op, "71", ahead() + 60).result is Result.OK
    (e,) = rows(ledger_path, "71")
    assert e.baseline == RUNNING_71
    check_times(e, before, 60)
    lines = log(fake)
    assert lines[0].startswith("-h -r -O ") or " -j 71 " in f" {lines[0]} ", lines  # the lookup, first
    assert len([x for x in lines if "-O" in x]) == 1


def test_a_restore_has_no_baseline_and_makes_no_lookup(tmp_path: Path, ledger_path: str) -> None:
    fake = fakes(tmp_path)
    with Tracker(ledger_path, scontrol=str(fake), squeue=str(fake.parent / "squeue"), clock=ahead) as t:
        assert t.run(Op.RESTORE, "71", ahead() + 60).result is Result.OK
    (e,) = rows(ledger_path, "71")
    assert (e.baseline, e.baseline_at) == (None, None) and e.ends_by is not None
    assert log(fake) == ["update JobId=71 Requeue=0"]


def test_a_job_the_lookup_says_is_gone_has_no_baseline(tmp_path: Path, ledger_path: str) -> None:
    fake = fakes(tmp_path)
    with Tracker(ledger_path, scontrol=str(fake), squeue=str(fake.parent / "squeue"), clock=ahead) as t:
        t.run(Op.HOLD, "99", ahead() + 60)
    (e,) = rows(ledger_path, "99")
    assert (e.baseline, e.baseline_at) == (None, None)


@pytest.mark.parametrize("op", [Op.HOLD, Op.REQUEUE], ids=str)
def test_one_by_one_each_job_gets_its_record_from_the_one_lookup(tmp_path: Path, ledger_path: str, op: Op) -> None:
    fake = fakes(tmp_path)
    before = time.time()
    with Tracker(ledger_path, scontrol=str(fake), squeue=str(fake.parent / "squeue"), clock=ahead) as t:
        events = list(drive(t, op, ["71", "72", "73"], ahead() + 60, one_by_one=True))
    assert all(isinstance(ev, Ran) for ev in events)
    got = rows(ledger_path, "71", "72", "73")
    assert [e.baseline for e in got] == [RUNNING_71, PENDING_72, HELD_73]
    for e in got:
        check_times(e, before, 60)
    at = [e.baseline_at or 0.0 for e in got]
    assert max(at) - min(at) < 0.01, "one lookup, one start"
    lines = log(fake)
    assert "-O" in lines[0] and len([x for x in lines if "-O" in x]) == 1, lines


@pytest.mark.parametrize("op", [Op.HOLD, Op.RELEASE, Op.REQUEUE, Op.OPEN], ids=str)
def test_a_bulk_chunk_and_its_one_id_single_commit_their_baselines(tmp_path: Path, ledger_path: str, op: Op) -> None:
    fake = fakes(tmp_path, bulk=True)
    before = time.time()
    with Tracker(ledger_path, scontrol=str(fake), squeue=str(fake.parent / "squeue"), clock=ahead) as t:
        outcomes = list(run_many(t, op, ["71", "72", "80", "73", "74"], deadline=ahead() + 60))
    assert [o.job_id for o in outcomes] == ["71", "72", "80", "73", "74"]
    got = {e.job_id: e for e in rows(ledger_path, "71", "72", "73", "74", "80")}
    assert got["71"].baseline == RUNNING_71 and got["72"].baseline == PENDING_72 and got["73"].baseline == HELD_73
    alone = got["80"].baseline  # run on its own (tracker.run), with the same lookup's record
    assert alone is not None and (alone.job_id, alone.array_job_id, alone.restarts) == ("80", "80", 0)
    assert (got["74"].baseline, got["74"].baseline_at) == (None, None), "gone at the lookup: no baseline"
    for job in ("71", "72", "73", "80"):
        check_times(got[job], before, 60)
    nonces = [got[j].nonce for j in ("71", "72", "80", "73", "74")]
    assert nonces[0] == nonces[1] != nonces[2] != nonces[3] == nonces[4], "two chunks around the single 80"
    lines = log(fake)
    assert "-O" in lines[0] and "-O" not in lines[1], lines  # one lookup, then the calls (and corroboration)


def test_a_bulk_job_another_holds_runs_alone_with_its_baseline(tmp_path: Path, ledger_path: str) -> None:
    fake = fakes(tmp_path, bulk=True)
    with open_ledger(ledger_path) as ledger:  # another operation's lease on 72, lapsing soon
        assert acquire_lease(ledger, "72", "op:elsewhere", ledger.now(), 0.3)
    with Tracker(ledger_path, scontrol=str(fake), squeue=str(fake.parent / "squeue"), clock=ahead) as t:
        list(run_many(t, Op.HOLD, ["71", "72", "73"], deadline=ahead() + 60))
    got = {e.job_id: e for e in rows(ledger_path, "71", "72", "73")}
    assert got["72"].nonce != got["71"].nonce and got["72"].baseline == PENDING_72


# -- a requeue always looks its ids up before call 1 (pinned: issue 20 may let others skip it) ------


def test_a_single_requeue_looks_up_before_call_1(tmp_path: Path, ledger_path: str) -> None:
    fake = fakes(tmp_path)
    with Tracker(ledger_path, scontrol=str(fake), squeue=str(fake.parent / "squeue")) as t:
        t.run(Op.REQUEUE, "71", time.time() + 60)
    lines = log(fake)
    assert "-O" in lines[0] and "71" in lines[0]
    assert lines[1:] == ["update JobId=71 Requeue=1", "requeue 71", "update JobId=71 Requeue=0"]


@pytest.mark.parametrize("one_by_one", [False, True])
def test_a_bulk_requeue_looks_up_before_call_1(tmp_path: Path, ledger_path: str, one_by_one: bool) -> None:
    fake = fakes(tmp_path, bulk=True)
    with Tracker(ledger_path, scontrol=str(fake), squeue=str(fake.parent / "squeue")) as t:
        list(drive(t, Op.REQUEUE, ["71", "72"], time.time() + 60, one_by_one=one_by_one))
    lines = log(fake)
    assert "-O" in lines[0] and "71,72" in lines[0], lines
    assert lines[1].startswith("update JobId=71") or lines[1] == "ping", lines


# -- a crash right after the intent -------------------------------------------------------------------


def test_a_crash_after_the_intent_leaves_the_baseline_committed(
    tmp_path: Path, ledger_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # as a process killed right after the intent

    fake = fakes(tmp_path)
    monkeypatch.setattr(tracked_module, "execute", crash)
    with Tracker(ledger_path, scontrol=str(fake), squeue=str(fake.parent / "squeue")) as t:
        with pytest.raises(KeyboardInterrupt):
            t.run(Op.REQUEUE, "71", time.time() + 60)
    (e,) = rows(ledger_path, "71")
    assert not e.finished and e.baseline == RUNNING_71 and e.baseline_at is not None
    assert (e.baseline_boot or "").startswith(f"{runs.observer()}/"), "the lookup's start on this host's boot clock"


def test_a_crash_in_a_bulk_chunk_leaves_its_baselines_committed(
    tmp_path: Path, ledger_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    fake = fakes(tmp_path, bulk=True)
    monkeypatch.setattr(bulk_module, "_calls", crash)
    with Tracker(ledger_path, scontrol=str(fake), squeue=str(fake.parent / "squeue")) as t:
        with pytest.raises(KeyboardInterrupt):
            list(run_many(t, Op.REQUEUE, ["71", "72", "73"], deadline=time.time() + 60))
    got = rows(ledger_path, "71", "72", "73")
    assert [(e.finished, e.baseline) for e in got] == [(False, RUNNING_71), (False, PENDING_72), (False, HELD_73)]


# -- the times, carried from the tracker's clock to the ledger's --------------------------------------


@pytest.mark.parametrize("offset", [0.0, -3600.0, 86400.0])
def test_start_fields_carry_each_time_as_its_distance_from_now(offset: float) -> None:
    now = 5000.0 + offset  # the tracker's clock, ``offset`` from the ledger's
    looked = LookupAnswer({"1": RUNNING_71, "2": None}, started=now - 0.25, at_boot="ctl1/b00t/12.5")
    baselines, baseline_at, ends_by, at_boot = start_fields(looked, ["1", "2", "3"], 5000.0, now, now + 40)
    assert baselines == {"1": RUNNING_71} and at_boot == "ctl1/b00t/12.5"
    assert baseline_at == 4999.75 and ends_by == 5000.0 + 40 + BACKSTOP
    assert start_fields(looked, ["2"], 5000.0, now, now + 40)[3] is None, "no baseline: no boot clock reading"
    # A lookup that was not made (a restore, or the deadline already past): no baseline, no time.
    assert start_fields(NOT_LOOKED, ["1"], 5000.0, now, now + 40)[:2] == ({}, None)
    assert start_fields(LookupAnswer({"2": None}, now - 1), ["2"], 5000.0, now, now + 40)[:2] == ({}, None)
    assert start_fields(NOT_LOOKED, ["1"], 5000.0, now, now - 5)[2] == 5000.0 + BACKSTOP, "past: nothing left"


def test_a_lookup_skipped_past_the_deadline_gives_no_baseline(tmp_path: Path, ledger_path: str) -> None:
    fake = fakes(tmp_path)
    clock: Callable[[], float] = time.time
    with Tracker(ledger_path, scontrol=str(fake), squeue=str(fake.parent / "squeue"), clock=clock) as t:
        assert t.look_up(Op.REQUEUE, ["71"], time.time() - 1) == NOT_LOOKED
        assert t.look_up(Op.RESTORE, ["71"], time.time() + 60) == NOT_LOOKED
        looked = t.look_up(Op.HOLD, ["71", "99"], time.time() + 60)
    assert looked.infos == {"71": RUNNING_71, "99": None} and looked.started is not None
    assert log(fake) == [x for x in log(fake) if "-O" in x] and len(log(fake)) == 1
