"""No object is cleared before its clear is saved (docs/contract.md §13.3): the sweep against a real
ledger (each backend), a fake scontrol, an in-memory lookup and a state directory whose job_state
only the test replaces (``real_saves``; ``tests.fakes.write_job_state`` is one save of slurmctld's:
a new file linked in).

The expected answers follow §13.2's words: a job showing Requeue=0 (or gone) clears its object only
when two saves were seen replaced after slurm-dsl's last call on it (the first may have begun
packing before it), by looks taken before the lookup; what a save's header says of the time is
never compared with anything; else the object stays, watched without back-off; a job showing
Requeue=1 again is restored whatever the saves say.  The live tests: tests/integration/test_durability_live.py."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Dict, Optional

import pytest

from slurm_dsl import Op, RequeueBit
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import Outcome, Result
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.run.sweep import Done, SweepReport, sweep
from slurm_dsl.run.tracked import Tracker
from tests.fakes import MemoryLookup, calls_made, write_fake, write_job_state
from tests.ledger_ops import begin_operation, finish_operation

pytestmark = pytest.mark.usefixtures("real_saves")
HOUR = 3600


def info(job: str, requeue: bool, state: str = "PENDING") -> JobInfo:
    return JobInfo(job, state, requeue, 1, 100, "BeginTime")


def requeued(path: str, fake: Path, jobs: list) -> None:  # type: ignore[type-arg]
    """Requeue ``jobs`` ok through the tracker (its own look at job_state taken when each ends)."""
    with Tracker(path, scontrol=str(fake)) as t:
        for job in jobs:
            assert t.run(Op.REQUEUE, job, time.time() + 10).result is Result.OK


def objects(path: str, *jobs: str) -> Dict[str, Optional[RequeueBit]]:
    with open_ledger(path) as ledger:
        return {j: (o.bit if (o := ledger.get(j)) is not None else None) for j in jobs}


def swept(t: Tracker, lookup: MemoryLookup, **more: object) -> SweepReport:
    """One sweep that waits for no save (the test saves between sweeps)."""
    return sweep(t, lookup, save_wait=0.0, **more)  # type: ignore[arg-type]


def test_a_clear_is_kept_until_two_saves_are_seen_after_it_then_cleared(
    tmp_path: Path, ledger_location: str, state: Path
) -> None:
    """Each save's header says it began an hour before the clears (a controller's clock behind the
    ledger's, as a skewed MariaDB or a stepped clock makes it): it does not matter."""
    write_job_state(state, int(time.time()) - HOUR)
    fake = write_fake(tmp_path / "bin", {})
    requeued(ledger_location, fake, ["21", "22"])
    lookup = MemoryLookup({"21": info("21", False)})  # Requeue=0; 22 gone (an id it does not hold)
    with Tracker(ledger_location, scontrol=str(fake)) as t:
        for saves in (0, 1):
            report = swept(t, lookup)
            assert {s.job_id: s.done for s in report.swept} == {"21": Done.UNSAVED, "22": Done.UNSAVED}, saves
            assert report.handled and report.save_error is None  # it waits for slurmctld's next save
            assert objects(ledger_location, "21", "22") == {"21": RequeueBit.MAY_BE_SET, "22": RequeueBit.MAY_BE_SET}
            with open_ledger(ledger_location) as ledger:  # watched: due again at once, no back-off
                assert sorted(o.job_id for o in ledger.due_objects(time.time())) == ["21", "22"]
            write_job_state(state, int(time.time()) - HOUR)
        report = swept(t, lookup)
    assert {s.job_id: s.done for s in report.swept} == {"21": Done.CLEARED, "22": Done.CLEARED}
    assert objects(ledger_location, "21", "22") == {"21": RequeueBit.CLEAR, "22": RequeueBit.CLEAR}


def test_a_save_whose_header_is_after_the_clear_proves_nothing(tmp_path: Path, ledger_location: str,
                                                               state: Path) -> None:
    """The clock finding (issue: a backward step, or a ledger server's clock behind slurmctld's,
    made a save that began before the clear look as if it began after it, and the sweep cleared an
    object whose clear was then lost in a crash): one save seen after the clear, its header an hour
    ahead, and the object stays."""
    write_job_state(state, int(time.time()))
    fake = write_fake(tmp_path / "bin", {})
    requeued(ledger_location, fake, ["27"])
    write_job_state(state, int(time.time()) + HOUR)
    with Tracker(ledger_location, scontrol=str(fake)) as t:
        report = swept(t, MemoryLookup({"27": info("27", False)}))
    assert [s.done for s in report.swept] == [Done.UNSAVED]
    assert "1 more of slurmctld's saves" in report.swept[0].why
    assert objects(ledger_location, "27") == {"27": RequeueBit.MAY_BE_SET}


def test_a_clear_lost_in_a_crash_is_restored_whatever_the_saves(tmp_path: Path, ledger_location: str,
                                                                state: Path) -> None:
    # The controller came back without the requeue's clear: the job shows Requeue=1 again, whatever
    # its own saves since.  The object is restored, and stays watched.
    write_job_state(state, int(time.time()))
    fake = write_fake(tmp_path / "bin", {})
    requeued(ledger_location, fake, ["23"])
    for _ in range(3):
        write_job_state(state, int(time.time()))
    with Tracker(ledger_location, scontrol=str(fake)) as t:
        report = swept(t, MemoryLookup({"23": info("23", True, "RUNNING")}))
    assert [s.done for s in report.swept] == [Done.RESTORED]
    assert calls_made(fake)[-1] == "update JobId=23 Requeue=0"
    assert objects(ledger_location, "23") == {"23": RequeueBit.MAY_BE_SET}


@pytest.mark.parametrize("what", ["missing", "fifo", "symlink"])
def test_saves_that_cannot_be_seen_keep_every_clear_and_say_why(tmp_path: Path, ledger_location: str,
                                                                state: Path, what: str) -> None:
    """A keep that cannot end by itself is no silent 0 (docs/contract.md §13.8): the sweep is not
    settled and says why."""
    fake = write_fake(tmp_path / "bin", {})
    requeued(ledger_location, fake, ["24"])
    target = state / "job_state"
    if what == "fifo":
        os.mkfifo(target)
    elif what == "symlink":
        write_job_state(tmp_path, int(time.time()))
        target.symlink_to(tmp_path / "job_state")
    with Tracker(ledger_location, scontrol=str(fake)) as t:
        report = swept(t, MemoryLookup({"24": info("24", False)}))
    assert [s.done for s in report.swept] == [Done.UNSAVED] and not report.handled
    why = {"missing": "No such file", "fifo": "a FIFO, not a regular file", "symlink": "a symbolic link"}[what]
    assert report.save_error is not None and why in report.save_error, report.save_error
    assert objects(ledger_location, "24") == {"24": RequeueBit.MAY_BE_SET}


def test_a_requeue_that_never_finished_is_anchored_by_the_sweep_then_cleared(
    tmp_path: Path, ledger_location: str, state: Path
) -> None:
    """Its CLI killed, it may have run call 3 until its lease lapsed: the first sweep that holds its
    lease takes the look its quiet moment counts from; two saves after that, it is cleared."""
    write_job_state(state, int(time.time()))
    ends_by = time.time() - 30
    with open_ledger(ledger_location) as ledger:
        begin_operation(ledger, "25", Op.REQUEUE, "0" * 32, ends_by - 60, ends_by=ends_by)
        assert ledger.marks(["25"])["25"].quiet is None
    fake = write_fake(tmp_path / "bin", {})
    lookup = MemoryLookup({"25": info("25", False)})
    with Tracker(ledger_location, scontrol=str(fake)) as t:
        for _ in range(2):
            assert [s.done for s in swept(t, lookup).swept] == [Done.UNSAVED]
            write_job_state(state, int(time.time()))
        report = swept(t, lookup)
    assert [s.done for s in report.swept] == [Done.CLEARED]


def test_a_dry_run_says_what_it_would_keep(tmp_path: Path, ledger_location: str, state: Path) -> None:
    write_job_state(state, int(time.time()))
    fake = write_fake(tmp_path / "bin", {})
    requeued(ledger_location, fake, ["26"])
    with Tracker(ledger_location, scontrol=str(fake)) as t:
        report = swept(t, MemoryLookup({"26": info("26", False)}), dry_run=True)
    assert [s.done for s in report.swept] == [Done.UNSAVED]
    assert objects(ledger_location, "26") == {"26": RequeueBit.MAY_BE_SET}


def test_a_keep_that_cannot_end_is_said_and_the_sweep_is_not_settled(tmp_path: Path, ledger_location: str,
                                                                     state: Path) -> None:
    """Issue 41 item 7: a keep that never ended, reported as fine (exit 0).  An object kept longer
    than KEEP_BOUND since its job's last call (here, a StateSaveLocation slurmctld does not write:
    nothing ever replaces its job_state) makes the sweep unsettled and says why."""
    write_job_state(state, int(time.time()))
    fake = write_fake(tmp_path / "bin", {})
    with open_ledger(ledger_location) as ledger:
        long_ago = ledger.now() - 2 * 3600.0
        op_id = begin_operation(ledger, "28", Op.REQUEUE, "0" * 32, long_ago)
        finish_operation(ledger, op_id, Outcome(Op.REQUEUE, "28", Result.UNKNOWN, RequeueBit.MAY_BE_SET), b"",
                                long_ago, look="somewhere=1:1:1")
    with Tracker(ledger_location, scontrol=str(fake)) as t:
        report = swept(t, MemoryLookup({"28": info("28", False)}))
    assert [s.done for s in report.swept] == [Done.UNSAVED] and not report.handled
    assert report.keep_error is not None and "kept more than 1 h" in report.keep_error, report.keep_error


def test_controllers_that_cannot_be_read_on_a_pair_are_a_keep_that_cannot_end(
    tmp_path: Path, ledger_location: str, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """slurm.conf names a backup, and no heartbeat can be read: no clear that a controller may hold
    back is ever made; the sweep says so and exits 15 rather than 0 for ever."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=unit\nSlurmctldHost=ctl-a\nSlurmctldHost=ctl-b\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    write_job_state(state, int(time.time()))
    fake = write_fake(tmp_path / "bin", {})
    requeued(ledger_location, fake, ["29"])
    with Tracker(ledger_location, scontrol=str(fake)) as t:
        for _ in range(2):  # two saves seen after the clear: from then on, only the controllers keep it
            write_job_state(state, int(time.time()))
            swept(t, MemoryLookup({"29": info("29", False)}))
        report = swept(t, MemoryLookup({"29": info("29", False)}))
    assert [s.done for s in report.swept] == [Done.UNSAVED] and "hand-back" in report.swept[0].why
    assert not report.handled and report.keep_error is not None and "cannot be read" in report.keep_error
