"""A crash re-settles what was acknowledged but not saved (docs/contract.md §13.4): every sweep reads
again, in its one lookup, the operations slurmctld acknowledged that no save has yet proven, records
those the record no longer shows as "acknowledged, then lost", and reads no further back than the
history id it got to (``core.durable`` Rule 4, ``settling.reread``).

A real SQLite ledger, a fake scontrol, an in-memory lookup and a state directory whose job_state
only the test replaces (``real_saves``; ``write_job_state`` is one save).  The ledger's clock (and
the sweep's boot clock) is moved on (``Clock``) instead of waiting out the settle delay and the mark's guard."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from slurm_dsl import Op
from slurm_dsl.core.durable import MARK_GUARD
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import Result, Verdict
from slurm_dsl.core.settle import DEFAULT_SETTLE_DELAY, LOST
from slurm_dsl.host import runs
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.records import HistoryEntry
from slurm_dsl.ledger.sqlite import SqliteLedger
from slurm_dsl.run import sweep as sweep_module
from slurm_dsl.run.sweep import SweepReport, sweep
from slurm_dsl.run.tracked import Tracker
from tests.fakes import MemoryLookup, refuse, write_fake, write_job_state

AGE = MARK_GUARD + DEFAULT_SETTLE_DELAY + 30.0  # older than the mark's guard and the settle delay
pytestmark = pytest.mark.usefixtures("real_saves")


def held(job: str) -> JobInfo:
    return JobInfo(job, "PENDING", False, 0, 0, "JobHeldAdmin")


def eligible(job: str) -> JobInfo:
    return JobInfo(job, "PENDING", False, 0, 4294901, "BeginTime")


def ledger_path(tmp_path: Path) -> str:
    return str(tmp_path / "ledger.sqlite3")


class Clock:
    """The ledger's clock, moved on by the test (``later``) instead of waiting out the settle
    delay and the mark's guard."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def later(self, seconds: float = AGE) -> float:
        """The clock moved ``seconds`` on; the time it now says."""
        self.ahead += seconds
        return time.time() + self.ahead


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The ledger's clock and the sweep's boot clock (the settle delay reads it: core.settle Rule
    15), moved on together."""
    moved = Clock()
    monkeypatch.setattr(SqliteLedger, "now", lambda self: time.time() + moved.ahead)
    monkeypatch.setattr(sweep_module, "boot_clock", lambda: runs.boot_clock() + moved.ahead)
    return moved


def hold(tmp_path: Path, *jobs: str) -> Path:
    write_job_state(Path(os.environ["SLURM_DSL_STATE_SAVE_LOCATION"]), int(time.time()))  # the holds' own looks see it
    fake = write_fake(tmp_path / "bin", {})
    with Tracker(ledger_path(tmp_path), scontrol=str(fake)) as t:
        for job in jobs:
            assert t.run(Op.HOLD, job, time.time() + 10).result is Result.OK
    return fake


def swept(tmp_path: Path, fake: Path, lookup: MemoryLookup, dry_run: bool = False) -> SweepReport:
    with Tracker(ledger_path(tmp_path), scontrol=str(fake)) as t:
        return sweep(t, lookup, dry_run=dry_run, save_wait=0.0)  # the test saves between sweeps


def history(tmp_path: Path, job: str) -> List[HistoryEntry]:
    with open_ledger(ledger_path(tmp_path)) as ledger:
        return ledger.history(job)


def verdicts(report: SweepReport) -> List[Optional[Verdict]]:
    return [None if d.settled is None else d.settled.verdict for d in report.acknowledged]


def test_a_hold_lost_in_a_crash_is_recorded_lost_by_the_next_sweep_and_read_no_more(
    tmp_path: Path, state: Path, clock: Clock
) -> None:
    fake = hold(tmp_path, "31")
    end = time.time()
    clock.later()
    write_job_state(state, int(end) + 5)  # the controller in control has saved since: without the hold
    lookup = MemoryLookup({"31": eligible("31")})
    report = swept(tmp_path, fake, lookup)
    assert verdicts(report) == [Verdict.ABSENT] and report.lost_written == 1
    assert lookup.asked == [["31"]]  # the sweep's one lookup
    (entry,) = history(tmp_path, "31")
    assert entry.result is Result.OK and entry.settlement is not None
    assert entry.settlement.verdict is Verdict.ABSENT and entry.settlement.detail.startswith(LOST)
    assert report.summary()["lost"] == 1 and report.acknowledged_from == entry.id + 1
    again = swept(tmp_path, fake, lookup)  # recorded: never read again
    assert again.acknowledged == [] and lookup.asked[1:] == []
    assert again.summary()["acknowledged_from"] == entry.id + 1


def test_a_kept_hold_is_read_again_until_two_saves_after_it_prove_it(
    tmp_path: Path, state: Path, clock: Clock
) -> None:
    fake = hold(tmp_path, "32")
    clock.later()
    lookup = MemoryLookup({"32": held("32")})
    (entry,) = history(tmp_path, "32")
    for _ in range(2):  # no save since its own look, then one: the first may have begun before it (§13.2)
        report = swept(tmp_path, fake, lookup)
        assert verdicts(report) == [Verdict.PRESENT] and report.acknowledged_from == entry.id
        write_job_state(state, int(time.time()) - 3600)  # whatever its header says
    report = swept(tmp_path, fake, lookup)  # two saves after it, and the job still shows it
    assert verdicts(report) == [Verdict.PRESENT] and report.acknowledged_from == entry.id + 1
    assert swept(tmp_path, fake, lookup).acknowledged == []
    assert history(tmp_path, "32")[0].settlement is None  # a present is never recorded
    assert len(lookup.asked) == 3


def test_absent_only_the_settle_delay_after_the_end_and_nothing_from_a_failed_lookup(
    tmp_path: Path, state: Path, clock: Clock
) -> None:
    fake = hold(tmp_path, "33")
    write_job_state(state, int(time.time()) + 5)
    report = swept(tmp_path, fake, MemoryLookup({"33": eligible("33")}))  # just acknowledged
    (entry,) = history(tmp_path, "33")
    assert verdicts(report) == [None] and report.acknowledged_from == entry.id and entry.settlement is None
    clock.later()
    report = swept(tmp_path, fake, MemoryLookup({}, fail="slurm_load_jobs error: Unable to contact slurm controller"))
    assert verdicts(report) == [None] and report.acknowledged_from == entry.id
    assert history(tmp_path, "33")[0].settlement is None
    report = swept(tmp_path, fake, MemoryLookup({"33": eligible("33")}))
    assert verdicts(report) == [Verdict.ABSENT]


def test_the_mark_waits_at_the_first_operation_not_done_and_a_dry_run_moves_nothing(
    tmp_path: Path, state: Path, clock: Clock
) -> None:
    fake = hold(tmp_path, "34", "35", "36")
    clock.later()
    lookup = MemoryLookup({"34": held("34"), "35": eligible("35"), "36": held("36")})
    dry = swept(tmp_path, fake, lookup, dry_run=True)
    assert verdicts(dry) == [Verdict.PRESENT, Verdict.ABSENT, Verdict.PRESENT]
    assert dry.acknowledged_from is None and all(e.settlement is None for e in history(tmp_path, "35"))
    lookup.known["35"] = held("35")  # all three held now
    report = swept(tmp_path, fake, lookup)  # no save after them: none of the three is proven
    first = history(tmp_path, "34")[0].id
    assert verdicts(report) == [Verdict.PRESENT] * 3 and report.acknowledged_from == first
    lookup.known["34"] = eligible("34")  # 34 lost, 35 and 36 proven by two saves after them
    write_job_state(state, int(time.time()))
    swept(tmp_path, fake, MemoryLookup({}, fail="down"))  # a sweep that looks at saves, and cannot look jobs up
    write_job_state(state, int(time.time()))
    report = swept(tmp_path, fake, lookup)
    assert verdicts(report) == [Verdict.ABSENT, Verdict.PRESENT, Verdict.PRESENT]
    assert report.acknowledged_from == history(tmp_path, "36")[0].id + 1


def test_a_sweep_that_records_a_lost_operation_exits_16_and_its_metric_stays_until_redone(
    tmp_path: Path, state: Path, clock: Clock
) -> None:
    # Issue 45 item 7: the loss is news where admins alert: the sweep's exit status (16, once) and
    # slurm_dsl_lost_not_redone (every sweep, until the op is redone); history --lost lists it.
    from tests.cli_run import cli
    from tests.fakes import write_fake_squeue

    fake = hold(tmp_path, "41")
    end = time.time()
    clock.later()
    write_job_state(state, int(end) + 5)  # saved since, without the hold
    write_fake_squeue(fake.parent, "41|PENDING|0|0|4294901|BeginTime\n")
    metrics = tmp_path / "sweep.prom"
    argv = ["sweep", "--ledger", ledger_path(tmp_path), "--scontrol", str(fake), "--squeue",
            str(fake.parent / "squeue"), "--lookup", "squeue", "--metrics-file", str(metrics)]
    code, out, err = cli(argv)
    assert code == 16, (out, err)
    assert "then lost (1 recorded)" in out and "history --lost" in err
    assert "slurm_dsl_sweep_lost 1\n" in metrics.read_text() and "slurm_dsl_lost_not_redone 1\n" in metrics.read_text()
    code, out, err = cli(argv)  # recorded once: the next sweep exits 0, the metric still says it
    assert code == 0, (out, err)
    assert "slurm_dsl_sweep_lost 0\n" in metrics.read_text() and "slurm_dsl_lost_not_redone 1\n" in metrics.read_text()
    code, out, _ = cli(["history", "--lost", "--ledger", ledger_path(tmp_path)])
    assert code == 16 and "redo: slurm-dsl hold 41" in out
    hold(tmp_path, "41")  # redone
    code, out, _ = cli(["history", "--lost", "--ledger", ledger_path(tmp_path)])
    assert code == 0, out


def lost_holds(tmp_path: Path, state: Path, clock: Clock, listed: str,
               holds: List[List[str]]) -> Tuple[Path, List[str]]:
    """The ``holds`` (each an argv tail: a job and its flags) run and acknowledged, then lost: a
    save after them without them, the settle delay past.  The fake scontrol, and the options that
    name it, its squeue (listing ``listed``) and the ledger."""
    from tests.cli_run import cli
    from tests.fakes import write_fake_squeue

    write_job_state(state, int(time.time()))
    fake = write_fake(tmp_path / "bin", {})
    common = ["--ledger", ledger_path(tmp_path), "--scontrol", str(fake), "--squeue", str(fake.parent / "squeue")]
    write_fake_squeue(fake.parent, listed)
    for tail in holds:
        assert cli(["hold", *tail, *common])[0] == 0
    end = time.time()
    clock.later()
    write_job_state(state, int(end) + 5)  # saved since, without them
    return fake, common


def test_redo_lost_runs_a_lost_keyed_operation_again_once_and_leaves_an_unkeyed_one_to_an_admin(
    tmp_path: Path, state: Path, clock: Clock
) -> None:
    # Issue 45 item 7: a lost keyed change redone without a person, inside the window before a
    # takeover's controller may mark the job NODE_FAIL; never twice, never an unkeyed one.
    import json

    from tests.cli_run import cli
    from tests.fakes import write_fake_squeue

    fake, common = lost_holds(tmp_path, state, clock, "51|RUNNING|0|0|4294901|None\n52|RUNNING|0|0|4294901|None\n",
                              [["51", "--key", "drain-n1"], ["52"]])
    log = fake.parent / "calls.log"
    sweep_argv = ["sweep", *common, "--lookup", "squeue", "--redo-lost", "--settle-delay", "2", "--json"]
    code, out, err = cli(sweep_argv)
    assert code == 16, (out, err)  # 52's loss is still news: no key, no redo
    lines = [json.loads(line) for line in out.splitlines()]
    (redo,) = [line for line in lines if line["kind"] == "redo"]
    assert (redo["job_id"], redo["op"], redo["key"], redo["row"]["result"]) == ("51", "hold", "drain-n1", "ok"), redo
    holds = [line for line in log.read_text().splitlines() if line.startswith("hold")]
    assert holds.count("hold 51") == 2 and holds.count("hold 52") == 1, holds
    redone = [e for e in history(tmp_path, "51") if e.key == "drain-n1"]
    assert len(redone) == 2 and redone[1].admin_reason is not None and "then lost" in redone[1].admin_reason
    code, out, _ = cli(["history", "--lost", "--json", "--ledger", ledger_path(tmp_path)])
    assert code == 16 and [(r["job_id"], r["redo"]) for r in map(json.loads, out.splitlines())] == [
        ("52", "slurm-dsl hold 52")], out
    # The next sweep reads the redone hold there: nothing is run again.
    write_fake_squeue(fake.parent, "51|PENDING|0|0|0|JobHeldAdmin\n52|RUNNING|0|0|4294901|None\n")
    code, out, err = cli(sweep_argv)
    assert [json.loads(line) for line in out.splitlines() if '"redo"' in line] == []
    assert [line for line in log.read_text().splitlines() if line == "hold 51"] == ["hold 51"] * 2


def test_redo_lost_waits_for_a_job_another_run_holds_and_leaves_the_loss_news_when_it_cannot(
    tmp_path: Path, state: Path, clock: Clock
) -> None:
    # Two runs at once: another run holds the job's lease all through the redo's deadline, so the
    # key does not act (nothing runs under someone else's lease) and the loss stays news (exit 16).
    import json

    from tests.cli_run import cli

    fake, common = lost_holds(tmp_path, state, clock, "61|RUNNING|0|0|4294901|None\n", [["61", "--key", "drain-n2"]])
    log = fake.parent / "calls.log"
    with open_ledger(ledger_path(tmp_path)) as ledger:
        assert ledger.acquire_leases(["61"], "another-run", ledger.now(), 600.0) == ["61"]
    conf = tmp_path / "slurm-dsl.conf"  # asked by the config file this time, not the flag
    conf.write_text("[slurm-dsl]\nredo_lost = yes\n")
    conf.chmod(0o644)
    code, out, err = cli(["sweep", *common, "--config", str(conf), "--lookup", "squeue", "--redo-timeout", "6",
                          "--settle-delay", "2", "--json"])
    assert code == 16, (out, err)
    (redo,) = [json.loads(line) for line in out.splitlines() if '"redo"' in line]
    assert redo["row"]["result"] == "expired" and "held the job" in redo["row"]["detail"], redo
    assert [line for line in log.read_text().splitlines() if line == "hold 61"] == ["hold 61"]
    assert "not done again" in err
    code, out, _ = cli(["history", "--lost", "--ledger", ledger_path(tmp_path)])
    assert code == 16 and "hold 61" in out


def test_redo_lost_runs_a_keys_lost_jobs_together_on_the_bulk_path(tmp_path: Path, state: Path, clock: Clock) -> None:
    # A drain's keyed hold of many jobs lost in a takeover is redone in one run, one list call, not
    # one run per job: the window before NODE_FAIL is seconds.
    import json

    from tests.cli_run import cli

    listed = "81|RUNNING|0|0|4294901|None\n82|RUNNING|0|0|4294901|None\n"
    fake, common = lost_holds(tmp_path, state, clock, listed, [["81", "82", "--key", "drain-n3"]])
    code, out, err = cli(["sweep", *common, "--lookup", "squeue", "--redo-lost", "--settle-delay", "2", "--json"])
    assert code == 0, (out, err)
    redos = [json.loads(line) for line in out.splitlines() if '"redo"' in line]
    assert sorted((r["job_id"], r["row"]["result"]) for r in redos) == [("81", "ok"), ("82", "ok")], redos
    holds = [line for line in (fake.parent / "calls.log").read_text().splitlines() if line.startswith("hold")]
    assert holds == ["hold 81,82", "hold 81,82"], holds


def test_a_redo_that_is_itself_unknown_and_absent_stays_news(tmp_path: Path, state: Path, clock: Clock) -> None:
    # The redo's requeue ran its calls but its clear was refused (unknown, clear_failed) and the
    # record still shows no requeue: not redone, so the loss stays news (16), never read as done.
    import json

    from tests.cli_run import cli
    from tests.fakes import write_fake_squeue
    from tests.ground import ACCESS_DENIED

    write_job_state(state, int(time.time()))
    fake = write_fake(tmp_path / "bin", {})
    common = ["--ledger", ledger_path(tmp_path), "--scontrol", str(fake), "--squeue", str(fake.parent / "squeue")]
    write_fake_squeue(fake.parent, "91|RUNNING|0|0|4294901|None\n")
    assert cli(["requeue", "91", "--key", "drain-n4", *common])[0] == 0
    end = time.time()
    clock.later()
    write_job_state(state, int(end) + 5)  # saved since, RestartCnt still 0: the requeue lost
    write_fake(tmp_path / "bin", {"clear": refuse(ACCESS_DENIED)})
    code, out, err = cli(["sweep", *common, "--lookup", "squeue", "--redo-lost", "--settle-delay", "2", "--json"])
    (redo,) = [json.loads(line) for line in out.splitlines() if '"redo"' in line]
    assert (redo["row"]["result"], redo["row"]["reason"]) == ("unknown", "clear_failed"), redo
    assert code in (15, 16), (out, err)  # 15 wins where the flag it may have left is still to restore
    assert "not done again" in err
    requeues = [line for line in (fake.parent / "calls.log").read_text().splitlines() if line.startswith("requeue")]
    assert requeues == ["requeue 91", "requeue 91"], requeues


@pytest.mark.parametrize(("result", "done"), [(Result.OK, True), (Result.BIT_SET, True), (Result.UNKNOWN, False),
                                              (Result.REJECTED, False), (Result.EXPIRED, False)])
def test_a_redo_counts_as_done_when_its_row_exits_ok_or_bit_set(result: Result, done: bool) -> None:
    from slurm_dsl.core.model import Outcome
    from slurm_dsl.run.sweep import Redone

    lost = HistoryEntry.__new__(HistoryEntry)  # only carried
    assert Redone(lost, Outcome(Op.REQUEUE, "91", result, None)).redone is done
    assert Redone(lost, None, "the ledger failed").redone is False
