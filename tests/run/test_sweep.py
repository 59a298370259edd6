"""The sweeper's rule and its edge, against a real ledger (each backend: ``ledger_location``), a
fake scontrol and an in-memory lookup (the squeue lookup itself is tested against the live lab)."""

from __future__ import annotations

import gc
import io
import time
from pathlib import Path
from typing import Dict, Optional, Sequence

import pytest

from slurm_dsl import Op, RequeueBit
from slurm_dsl.admin.cli import main as cli_main
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import InvalidInput, Outcome, Result, SweepBusy
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.run.deadlines import steady
from slurm_dsl.run.sweep import Action, Done, decide, metrics_text, sweep
from slurm_dsl.run.tracked import Tracker
from tests.cli_run import cli
from tests.fakes import MemoryLookup, calls_made, refuse, write_fake, write_fake_squeue
from tests.ground import ALREADY_FINISHED, INVALID_USER_ID
from tests.ledger_backends import shown
from tests.ledger_ops import acquire_lease, begin_operation, finish_operation


def info(job: str, state: str = "RUNNING", requeue: bool = True) -> JobInfo:
    return JobInfo(job, state, requeue, 0, 100, "None")


@pytest.mark.parametrize(
    ("found", "action"),
    [
        (None, Action.CLEAR),
        # A finished job at Requeue=1 can still be requeued by its owner: watched, never cleared.
        (info("1", "COMPLETED", True), Action.WATCH),
        (info("1", "CANCELLED", True), Action.WATCH),
        (info("1", "FAILED", True), Action.WATCH),
        (info("1", "COMPLETED", False), Action.CLEAR),
        (info("1", "CANCELLED", False), Action.CLEAR),
        (info("1", "RUNNING", False), Action.CLEAR),
        (info("1", "PENDING", False), Action.CLEAR),
        (info("1", "RUNNING", True), Action.RESTORE),
        (info("1", "PENDING", True), Action.RESTORE),
        (info("1", "COMPLETING", True), Action.RESTORE),
    ],
)
def test_decide(found: Optional[JobInfo], action: Action) -> None:
    assert decide(found)[0] is action


def mark(path: str, jobs: Sequence[str], bit: RequeueBit = RequeueBit.MAY_BE_SET) -> None:
    """Objects as an unknown requeue leaves them: through the real begin/finish."""
    with open_ledger(path) as ledger:
        for job in jobs:
            op_id = begin_operation(ledger, job, Op.REQUEUE, "0" * 32, time.time())
            out = Outcome(Op.REQUEUE, job, Result.UNKNOWN, bit)
            finish_operation(ledger, op_id, out, b"", time.time())


@pytest.fixture
def setup(tmp_path: Path, ledger_location: str) -> tuple:  # type: ignore[type-arg]
    path = ledger_location
    fake = write_fake(tmp_path / "bin", {"clear": 'case $JOB in 9*) ' + refuse(INVALID_USER_ID) + ' ;; esac; exit 0'})
    return path, fake


def bits(path: str) -> Dict[str, str]:
    with open_ledger(path) as ledger:
        return {j: ledger.get(j).bit.value for j in ("1", "2", "3", "4", "5", "90")  # type: ignore[union-attr]
                if ledger.get(j) is not None}


def test_one_lookup_settles_everything(setup: tuple) -> None:  # type: ignore[type-arg]
    path, fake = setup
    mark(path, ["1", "2", "3", "4", "90"])
    lookup = MemoryLookup({"2": info("2", "COMPLETED"), "3": info("3", requeue=False), "4": info("4"),
                           "90": info("90")})
    with Tracker(path, scontrol=str(fake)) as t:
        report = sweep(t, lookup)
    # One lookup for all, and one more of the job it said is gone, once slurmctld is seen to have
    # saved since (docs/contract.md §13.8: a purge is saved late too).
    assert len(lookup.asked) == 2 and sorted(lookup.asked[0]) == ["1", "2", "3", "4", "90"]
    assert lookup.asked[1] == ["1"]
    done = {s.job_id: s.done for s in report.swept}
    assert done == {"1": Done.CLEARED, "2": Done.WATCHING, "3": Done.CLEARED, "4": Done.RESTORED,
                    "90": Done.RESTORE_FAILED}
    assert calls_made(fake) == ["update JobId=4 Requeue=0", "update JobId=90 Requeue=0"]
    # 4's restore cleared its flag: watched until a save proves it (docs/contract.md §13.3).
    assert bits(path) == {"1": "clear", "2": "may_be_set", "3": "clear", "4": "may_be_set", "90": "may_be_set"}
    assert not report.handled
    with open_ledger(path) as ledger:
        # The failed restore backs off; the watched finished job and the restored one are due again at once.
        assert sorted(o.job_id for o in ledger.due_objects(time.time())) == ["2", "4"]
        assert [h.op.value for h in ledger.history("4")] == ["requeue", "restore"]
        assert [h.op.value for h in ledger.history("2")] == ["requeue"], "no restore of a finished job"


def test_a_watched_job_is_restored_once_it_comes_back(setup: tuple) -> None:  # type: ignore[type-arg]
    path, fake = setup
    mark(path, ["5"])
    with Tracker(path, scontrol=str(fake)) as t:
        for _ in range(3):
            report = sweep(t, MemoryLookup({"5": info("5", "CANCELLED")}))
            assert [s.done for s in report.swept] == [Done.WATCHING] and report.handled
        assert calls_made(fake) == []
        report = sweep(t, MemoryLookup({"5": info("5", "PENDING")}))  # its owner requeued it
        assert [s.done for s in report.swept] == [Done.RESTORED]
        assert calls_made(fake) == ["update JobId=5 Requeue=0"]
        assert bits(path) == {"5": "may_be_set"}  # its clear is not yet known saved
        report = sweep(t, MemoryLookup({"5": info("5", "PENDING", requeue=False)}))  # after a save
    assert [s.done for s in report.swept] == [Done.CLEARED]
    assert bits(path) == {"5": "clear"}


def test_a_job_that_finishes_before_its_restore_is_watched(tmp_path: Path, ledger_location: str) -> None:
    path = ledger_location
    fake = write_fake(tmp_path / "bin", {"clear": refuse(ALREADY_FINISHED)})
    mark(path, ["6"])
    with Tracker(path, scontrol=str(fake)) as t:
        report = sweep(t, MemoryLookup({"6": info("6", "RUNNING")}))
    assert [s.done for s in report.swept] == [Done.WATCHING] and report.handled
    assert bits(path) == {}  # bits() lists 1-5 and 90 only
    with open_ledger(path) as ledger:
        obj = ledger.get("6")
        assert obj is not None and obj.bit is RequeueBit.MAY_BE_SET and obj.lookup_failures == 0
        assert [o.job_id for o in ledger.due_objects(time.time())] == ["6"]


def test_a_failed_lookup_changes_nothing_and_backs_off(setup: tuple) -> None:  # type: ignore[type-arg]
    path, fake = setup
    mark(path, ["1", "2"])
    with Tracker(path, scontrol=str(fake)) as t:
        report = sweep(t, MemoryLookup({}, fail="slurmctld unreachable"))
    assert report.lookup_error == "slurmctld unreachable" and not report.handled
    assert {s.done for s in report.swept} == {Done.LOOKUP_FAILED}
    assert bits(path) == {"1": "may_be_set", "2": "may_be_set"}
    assert calls_made(fake) == []
    with open_ledger(path) as ledger:
        assert ledger.due_objects(time.time()) == []
        assert len(ledger.due_objects(time.time() + 3600)) == 2


def test_dry_run_changes_nothing(setup: tuple) -> None:  # type: ignore[type-arg]
    path, fake = setup
    mark(path, ["1", "4"])
    with Tracker(path, scontrol=str(fake)) as t:
        report = sweep(t, MemoryLookup({"4": info("4")}), dry_run=True)
    # 1 is gone, but a dry run marks nothing and looks no more: its purge is not known saved.
    assert {s.job_id: s.done for s in report.swept} == {"1": Done.UNSAVED, "4": Done.WOULD_RESTORE}
    assert bits(path) == {"1": "may_be_set", "4": "may_be_set"}
    assert calls_made(fake) == []


def test_a_leased_job_is_left_alone(setup: tuple) -> None:  # type: ignore[type-arg]
    path, fake = setup
    mark(path, ["1", "2"])
    with open_ledger(path) as ledger:
        assert acquire_lease(ledger, "1", "an operation", time.time(), 60)
    lookup = MemoryLookup({})
    with Tracker(path, scontrol=str(fake)) as t:
        report = sweep(t, lookup)
    # Job 1's object is the operation's; its unknown requeue is still settled, in the same lookup
    # (and the one more of the jobs it says are gone, once slurmctld is seen to save: §13.8).
    assert lookup.asked == [["2", "1"], ["2", "1"]]
    assert bits(path) == {"1": "may_be_set", "2": "clear"}
    assert report.handled


def test_limit(setup: tuple) -> None:  # type: ignore[type-arg]
    path, fake = setup
    mark(path, ["1", "2", "3"])
    with Tracker(path, scontrol=str(fake)) as t:
        report = sweep(t, MemoryLookup({}), limit=2)
    assert len(report.swept) == 2
    assert sorted(bits(path).values()) == ["clear", "clear", "may_be_set"]


def test_nothing_to_do_asks_nothing(setup: tuple) -> None:  # type: ignore[type-arg]
    path, fake = setup
    lookup = MemoryLookup({})
    with Tracker(path, scontrol=str(fake)) as t:
        report = sweep(t, lookup)
    assert lookup.asked == [] and report.handled and report.swept == []


def test_one_sweeper_at_a_time(ledger_location: str) -> None:
    with open_ledger(ledger_location) as one, open_ledger(ledger_location) as other:
        with one.sweep_lock():
            with pytest.raises(SweepBusy, match="another sweep") as busy:
                with other.sweep_lock():
                    pass
            assert shown(ledger_location) in busy.value.path  # the message says which ledger
        with other.sweep_lock():
            pass  # released on exit


def test_metrics_text_is_a_prometheus_textfile(setup: tuple) -> None:  # type: ignore[type-arg]
    path, fake = setup
    mark(path, ["1"])
    with Tracker(path, scontrol=str(fake)) as t:
        report = sweep(t, MemoryLookup({}))
    text = metrics_text(report, 0, 0)
    assert 'slurm_dsl_sweep_objects{done="cleared"} 1' in text
    assert "slurm_dsl_objects_not_clear 0" in text
    for line in text.splitlines():
        assert line.startswith("# ") or line.split()[-1].replace(".", "").isdigit(), line


# --- the command line --------------------------------------------------------


def test_cli_sweep_settles_and_writes_metrics(setup: tuple, tmp_path: Path) -> None:  # type: ignore[type-arg]
    import json

    from tests.fakes import write_fake_squeue

    path, fake = setup
    mark(path, ["1", "2", "4"])
    squeue = write_fake_squeue(tmp_path / "sq", "2|COMPLETED|1|0|1|None\n4|RUNNING|1|0|1|None\n")
    metrics = tmp_path / "sweep.prom"
    code, out, _ = cli(["sweep", "--ledger", path, "--scontrol", str(fake), "--squeue", str(squeue), "--json",
                        "--metrics-file", str(metrics), "--lookup", "squeue"])
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    jobs = [r for r in rows if r["kind"] == "job"]  # the unknown requeues' verdicts have kind verdict
    assert {r["job_id"]: r["done"] for r in jobs} == {"1": "cleared", "2": "watching", "4": "restored"}
    # 2 is watched (finished at Requeue=1), 4 restored and watched until its clear is saved (§13.3).
    assert rows[-1]["not_clear"] == 2 and rows[-1]["summary"]["restored"] == 1
    assert rows[-1]["lookup"] == "squeue"
    assert "slurm_dsl_objects_not_clear 2" in metrics.read_text()
    # One lookup RPC, and one more of the job it said is gone once saves are seen (§13.8).
    asked = (tmp_path / "sq" / "squeue.log").read_text().splitlines()
    assert len(asked) == 2 and " -j 1 " in asked[1], asked


def test_cli_sweep_with_slurmctld_unreachable_changes_nothing(setup: tuple, tmp_path: Path) -> None:  # type: ignore[type-arg]
    from tests.fakes import write_fake_squeue

    path, fake = setup
    mark(path, ["1", "2"])
    squeue = write_fake_squeue(tmp_path / "sq", "", exit_code=1,
                               stderr="slurm_load_jobs error: Unable to contact slurm controller (connect failure)")
    code, out, _ = cli(["sweep", "--ledger", path, "--scontrol", str(fake), "--squeue", str(squeue), "--lookup",
                        "squeue"])
    assert code == 15
    assert "2 lookup_failed" in out
    assert bits(path) == {"1": "may_be_set", "2": "may_be_set"}


def test_cli_second_sweep_exits_at_once(setup: tuple) -> None:  # type: ignore[type-arg]
    path, fake = setup
    with open_ledger(path) as ledger, ledger.sweep_lock():
        code, out, _ = cli(["sweep", "--ledger", path, "--scontrol", str(fake)])
    assert (code, out) == (3, "")


def test_cli_orphans_are_listed_and_fixed_only_with_fix(setup: tuple, tmp_path: Path) -> None:  # type: ignore[type-arg]
    from tests.fakes import write_fake_squeue

    path, fake = setup
    squeue = write_fake_squeue(tmp_path / "sq", "7|RUNNING|1|0|1|None\n8|RUNNING|0|0|1|None\n9|COMPLETED|1|0|1|None\n")
    code, out, _ = cli(["sweep", "--ledger", path, "--scontrol", str(fake), "--squeue", str(squeue), "--orphans"])
    # A finished job at Requeue=1 is an orphan too: its owner can still requeue it.
    assert code == 0 and "7  orphan" in out and "8  orphan" not in out and "9  orphan" in out
    assert calls_made(fake) == []
    code, out, _ = cli(["sweep", "--ledger", path, "--scontrol", str(fake), "--squeue", str(squeue), "--orphans",
                        "--fix"])
    assert code == 0
    assert calls_made(fake) == ["update JobId=7 Requeue=0"], "a finished job cannot be restored"
    with open_ledger(path) as ledger:
        adopted = ledger.get("9")
        assert adopted is not None and adopted.bit is RequeueBit.MAY_BE_SET, "it is watched from now on"


def test_a_sweep_holding_the_lock_takes_over_a_dead_sweeps_leases_after_the_grace(setup: tuple) -> None:  # type: ignore[type-arg]
    # Job 1 is leased by a sweep that died mid-restore, job 3 by an operation: the sweep given
    # ``reclaim_at`` waits for it, then settles 1; 3 stays the operation's.  (Owners as
    # tracked.lease_owner writes them.)
    path, fake = setup
    mark(path, ["1", "3"])
    with open_ledger(path) as ledger:
        now = ledger.now()
        assert ledger.acquire_leases(["1"], "sweep:ctl1:4711:1:deadbeef", now, 600.0) == ["1"]
        assert ledger.acquire_leases(["3"], "op:ctl1:4712:1:0badf00d", now, 600.0) == ["3"]
    with Tracker(path, scontrol=str(fake)) as t:
        before = sweep(t, MemoryLookup({}))  # no take-over: a dead sweep's lease keeps its job
        start = steady()
        report = sweep(t, MemoryLookup({}), reclaim_at=start + 0.5)
        waited = steady() - start
    assert before.swept == []
    assert [(s.job_id, s.done) for s in report.swept] == [("1", Done.CLEARED)]
    assert waited >= 0.5
    assert bits(path) == {"1": "clear", "3": "may_be_set"}
    with open_ledger(path) as ledger:
        assert not acquire_lease(ledger, "3", "sweep:ctl2:42:1:cafecafe", ledger.now(), 10.0)


def test_a_sweep_with_no_dead_sweeps_lease_does_not_wait_for_the_grace(setup: tuple) -> None:  # type: ignore[type-arg]
    path, fake = setup
    mark(path, ["1"])
    with Tracker(path, scontrol=str(fake)) as t:
        start = steady()
        report = sweep(t, MemoryLookup({}), reclaim_at=start + 60.0)
        assert steady() - start < 60.0
    assert [(s.job_id, s.done) for s in report.swept] == [("1", Done.CLEARED)]


def test_the_sweep_command_takes_over_a_dead_sweeps_leases(setup: tuple, tmp_path: Path) -> None:  # type: ignore[type-arg]
    # ``slurm-dsl sweep`` holds the sweep lock, so it takes over (after RECLAIM_GRACE) the lease
    # of the sweep killed before it; squeue no longer knows job 1: cleared.
    path, fake = setup
    mark(path, ["1"])
    with open_ledger(path) as ledger:
        assert ledger.acquire_leases(["1"], "sweep:ctl1:4711:1:deadbeef", ledger.now(), 600.0) == ["1"]
    squeue = write_fake_squeue(tmp_path / "sq", "")
    out = io.StringIO()
    code = cli_main(["sweep", "--ledger", path, "--scontrol", str(fake), "--squeue", str(squeue), "--lookup",
                     "squeue"], out=out)
    assert (code, bits(path)) == (0, {"1": "clear"}), out.getvalue()


class CollectorSeen(MemoryLookup):
    """A MemoryLookup that notes whether the garbage collector was enabled when it was asked."""

    def __init__(self, jobs: Dict[str, JobInfo], fail: Optional[str] = None) -> None:
        super().__init__(jobs, fail)
        self.collector: list[bool] = []

    def jobs(self, job_ids: Sequence[str]) -> Dict[str, Optional[JobInfo]]:
        self.collector.append(gc.isenabled())
        return super().jobs(job_ids)


@pytest.mark.parametrize("fail", [None, "slurmctld unreachable"])
def test_the_collector_is_paused_while_a_sweep_runs_and_enabled_again_after(setup: tuple, fail: Optional[str]) -> None:  # type: ignore[type-arg]
    path, fake = setup
    mark(path, ["1"])
    lookup = CollectorSeen({}, fail)
    assert gc.isenabled()
    with Tracker(path, scontrol=str(fake)) as t:
        report = sweep(t, lookup)
    # Paused during the sweep's lookups (the second: of the gone job, once saves are seen, §13.8).
    assert lookup.collector == ([False, False] if fail is None else [False]), "paused during the sweep"
    assert gc.isenabled(), "enabled again after it, whether the lookup could ask or not"
    assert report.handled is (fail is None)


def test_a_sweep_leaves_a_paused_collector_paused(setup: tuple) -> None:  # type: ignore[type-arg]
    path, fake = setup
    mark(path, ["1"])
    lookup = CollectorSeen({})
    gc.disable()
    try:
        with Tracker(path, scontrol=str(fake)) as t:
            sweep(t, lookup)
        assert set(lookup.collector) == {False} and not gc.isenabled(), "the caller's choice kept"
    finally:
        gc.enable()


def test_the_collector_is_enabled_again_when_a_sweep_raises(setup: tuple) -> None:  # type: ignore[type-arg]
    path, fake = setup
    with Tracker(path, scontrol=str(fake)) as t, pytest.raises(InvalidInput):
        sweep(t, MemoryLookup({}), settle_limit=0)
    assert gc.isenabled()
