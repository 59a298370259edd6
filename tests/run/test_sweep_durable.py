"""No object is cleared before its clear is saved (docs/contract.md §13.3): the sweep against a real
ledger (each backend), a fake scontrol, an in-memory lookup and a state directory whose job_state
header the test writes (``tests.fakes.write_job_state``: when slurmctld's last save began).

The expected answers follow §13.2's words: a job showing Requeue=0 (or gone) clears its object
only when the save read before the lookup began more than ``CLOCK_MARGIN`` (1 s) after the
object's ``quiet_at``; else the object stays, watched without back-off; a job showing Requeue=1
again is restored whatever the saves say.  The live crash tests: tests/integration/test_durability_live.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, Optional

from slurm_dsl import Op, RequeueBit
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import Result
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.run.sweep import Done, sweep
from slurm_dsl.run.tracked import Tracker
from tests.fakes import MemoryLookup, calls_made, write_fake, write_job_state


def info(job: str, requeue: bool, state: str = "PENDING") -> JobInfo:
    return JobInfo(job, state, requeue, 1, 100, "BeginTime")


def requeued(path: str, fake: Path, jobs: list) -> Dict[str, float]:  # type: ignore[type-arg]
    """Requeue ``jobs`` ok through the tracker; each object's quiet_at (its finish)."""
    with Tracker(path, scontrol=str(fake)) as t:
        for job in jobs:
            assert t.run(Op.REQUEUE, job, time.time() + 10).result is Result.OK
    with open_ledger(path) as ledger:
        return ledger.quiet_times(jobs)


def objects(path: str, *jobs: str) -> Dict[str, Optional[RequeueBit]]:
    with open_ledger(path) as ledger:
        return {j: (o.bit if (o := ledger.get(j)) is not None else None) for j in jobs}


def test_a_clear_is_kept_until_a_save_begun_after_it_and_then_cleared(
    tmp_path: Path, ledger_location: str, state: Path
) -> None:
    fake = write_fake(tmp_path / "bin", {})
    quiet = requeued(ledger_location, fake, ["21", "22"])
    lookup = MemoryLookup({"21": info("21", False)})  # Requeue=0; 22 gone (an id it does not hold)
    with Tracker(ledger_location, scontrol=str(fake)) as t:
        # The last save began in the second of the first finish, then one second after: neither
        # proves either clear (each is at least the other's quiet_at).
        for started in (int(min(quiet.values())), int(min(quiet.values())) + 1):
            write_job_state(state, started)
            report = sweep(t, lookup)
            assert {s.job_id: s.done for s in report.swept} == {"21": Done.UNSAVED, "22": Done.UNSAVED}
            assert report.settled and report.save_error is None  # it waits for slurmctld's next save
            assert objects(ledger_location, "21", "22") == {"21": RequeueBit.MAY_BE_SET, "22": RequeueBit.MAY_BE_SET}
            with open_ledger(ledger_location) as ledger:  # watched: due again at once, no back-off
                assert sorted(o.job_id for o in ledger.pending(time.time())) == ["21", "22"]
        write_job_state(state, int(max(quiet.values())) + 2)  # a save began after both clears
        report = sweep(t, lookup)
    assert {s.job_id: s.done for s in report.swept} == {"21": Done.CLEARED, "22": Done.CLEARED}
    assert objects(ledger_location, "21", "22") == {"21": RequeueBit.CLEAR, "22": RequeueBit.CLEAR}


def test_a_clear_lost_in_a_crash_is_restored_whatever_the_saves(tmp_path: Path, ledger_location: str,
                                                                state: Path) -> None:
    # The controller came back without the requeue's clear: the job shows Requeue=1 again, and its
    # own saves since are after everything.  The object is restored, and stays watched.
    fake = write_fake(tmp_path / "bin", {})
    quiet = requeued(ledger_location, fake, ["23"])
    write_job_state(state, int(quiet["23"]) + 60)
    with Tracker(ledger_location, scontrol=str(fake)) as t:
        report = sweep(t, MemoryLookup({"23": info("23", True, "RUNNING")}))
    assert [s.done for s in report.swept] == [Done.RESTORED]
    assert calls_made(fake)[-1] == "update JobId=23 Requeue=0"
    assert objects(ledger_location, "23") == {"23": RequeueBit.MAY_BE_SET}


def test_a_save_that_cannot_be_read_keeps_every_clear_and_says_why(tmp_path: Path, ledger_location: str,
                                                                   state: Path) -> None:
    fake = write_fake(tmp_path / "bin", {})
    requeued(ledger_location, fake, ["24"])
    with Tracker(ledger_location, scontrol=str(fake)) as t:  # no job_state at all
        report = sweep(t, MemoryLookup({"24": info("24", False)}))
        assert [s.done for s in report.swept] == [Done.UNSAVED] and not report.settled
        assert report.save_error is not None and "job_state: no such file" in report.save_error
        (state / "job_state").write_bytes(b"not a header of slurmctld's")
        report = sweep(t, MemoryLookup({"24": info("24", False)}))
        assert [s.done for s in report.swept] == [Done.UNSAVED] and not report.settled
        assert report.save_error is not None and "not a job_state" in report.save_error
    assert objects(ledger_location, "24") == {"24": RequeueBit.MAY_BE_SET}


def test_a_clear_whose_calls_may_still_run_counts_from_their_end(tmp_path: Path, ledger_location: str,
                                                                 state: Path) -> None:
    # An unfinished requeue (its CLI killed) may have run call 3 until its ends_by: a save that began
    # before then proves nothing, one after it does.
    ends_by = time.time() - 30
    with open_ledger(ledger_location) as ledger:
        ledger.begin_operation("25", Op.REQUEUE, "0" * 32, ends_by - 60, ends_by=ends_by)
        assert ledger.quiet_times(["25"]) == {"25": ends_by}
    fake = write_fake(tmp_path / "bin", {})
    with Tracker(ledger_location, scontrol=str(fake)) as t:
        write_job_state(state, int(ends_by) - 5)  # after its start, before its calls' end
        report = sweep(t, MemoryLookup({"25": info("25", False)}))
        assert [s.done for s in report.swept] == [Done.UNSAVED]
        write_job_state(state, int(ends_by) + 2)
        report = sweep(t, MemoryLookup({"25": info("25", False)}))
    assert [s.done for s in report.swept] == [Done.CLEARED]


def test_a_dry_run_says_what_it_would_keep(tmp_path: Path, ledger_location: str, state: Path) -> None:
    fake = write_fake(tmp_path / "bin", {})
    quiet = requeued(ledger_location, fake, ["26"])
    write_job_state(state, int(quiet["26"]))
    with Tracker(ledger_location, scontrol=str(fake)) as t:
        report = sweep(t, MemoryLookup({"26": info("26", False)}), dry_run=True)
    assert [s.done for s in report.swept] == [Done.UNSAVED]
    assert objects(ledger_location, "26") == {"26": RequeueBit.MAY_BE_SET}
