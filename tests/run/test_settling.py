"""Sweeps settle the ledger's unknown operations in their one lookup, and ``slurm-dsl settle``
does it now (docs/contract.md §9.5, §10, §12), against a real ledger (each backend), a fake
scontrol and a counting lookup (an in-memory one, and pyslurm's adapter over its fake)."""

from __future__ import annotations

import importlib
import json
import os
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import Op, Outcome, RequeueBit, Result, Verdict
from slurm_dsl.core.script import KILL_GRACE
from slurm_dsl.host import runs
from slurm_dsl.ledger.base import LedgerStore
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.lookups.pyslurm import load_pyslurm_lookup
from slurm_dsl.run import looks, settling
from slurm_dsl.run.calls import GUARD_MARGIN
from slurm_dsl.run.deadlines import MAX_TIMEOUT
from slurm_dsl.run.sweep import Done, metrics_text, sweep
from slurm_dsl.run.tracked import Tracker
from tests.cli_run import cli
from tests.conftest import ONE_CONTROLLER, TWO_CONTROLLERS
from tests.fakes import (
    FAKE_CTL,
    MemoryLookup,
    calls_made,
    ended_ago,
    write_fake,
    write_fake_squeue,
    write_heartbeat,
)
from tests.ledger_ops import acquire_lease, begin_operation, finish_operation

FAKE_PYSLURM = Path(__file__).resolve().parents[1] / "fake_pyslurm"
PRIORITY = 4294901657


def record(job: str, *, priority: int = PRIORITY, restarts: int = 0, requeue: bool = False,
           state: str = "RUNNING") -> JobInfo:
    return JobInfo(job, state, requeue, restarts, priority, "None" if priority else "JobHeldAdmin")


def unknown(ledger: LedgerStore, job: str, op: Op, *, ago: float = 60.0, baseline: Optional[JobInfo] = None,
            finish: bool = True, ended: Optional[str] = None, ctl: str = FAKE_CTL) -> int:
    """An operation whose result is unknown (or, ``finish=False``, that never finished), ``ago``
    seconds back on the ledger's clock, its end 1 s after its start; on this host's boot clock too
    (``ended``: where and when else; an unfinished one: this host found it over then); its
    baseline read from the fake's controller (``ctl``: contract §12 Rule 16)."""
    start = ledger.now() - ago
    op_id = begin_operation(ledger, job, op, "0" * 32, start, baseline=baseline,
                                   baseline_at=None if baseline is None else start - 0.2, ends_by=start + 1.0,
                                   baseline_ctl=None if baseline is None else ctl)
    over = runs.boot_clock() - ago + 1.0
    if finish:
        bit = RequeueBit.MAY_BE_SET if op in (Op.REQUEUE, Op.REQUEUE_HOLD) else None
        finish_operation(ledger, op_id, Outcome(op, job, Result.UNKNOWN, bit), b"", start + 1.0,
                                ended=ended_ago(ago - 1.0) if ended is None else ended)
    else:
        ledger.seen_over([op_id], str(runs.observer()), over)
    return op_id


def may_be_set(ledger: LedgerStore, job: str) -> None:
    """An object a requeue left may_be_set, with an ok history row (nothing to settle)."""
    op_id = begin_operation(ledger, job, Op.REQUEUE, "1" * 32, ledger.now())
    finish_operation(ledger, op_id, Outcome(Op.REQUEUE, job, Result.OK, RequeueBit.MAY_BE_SET), b"", ledger.now())


@pytest.fixture
def fake_scontrol(tmp_path: Path) -> str:
    return str(write_fake(tmp_path / "bin", {"clear": "exit 0"}))


def test_the_bound_of_an_old_unfinished_row_is_the_longest_an_operation_runs() -> None:
    assert settling.NO_ENDS_BY_BOUND == MAX_TIMEOUT + KILL_GRACE + GUARD_MARGIN


@pytest.mark.parametrize("with_unknown", [False, True])
def test_a_sweep_makes_one_lookup_for_its_objects_and_its_unknown_operations(
    ledger_location: str, fake_scontrol: str, with_unknown: bool
) -> None:
    with open_ledger(ledger_location) as ledger:
        for job in ("1", "2"):
            may_be_set(ledger, job)
        if with_unknown:
            unknown(ledger, "7", Op.HOLD)
            unknown(ledger, "8", Op.RELEASE)
            unknown(ledger, "2", Op.HOLD)  # a job that is an object too: asked once
    lookup = MemoryLookup({"1": record("1"), "7": record("7", priority=0), "8": record("8", priority=0)})
    with Tracker(ledger_location, scontrol=fake_scontrol) as t:
        report = sweep(t, lookup)
    # One lookup, and one more of the job it said is gone once saves are seen (docs/contract.md §13.8).
    assert len(lookup.asked) == 2 and lookup.asked[1] == ["2"]
    assert sorted(lookup.asked[0]) == (["1", "2", "7", "8"] if with_unknown else ["1", "2"])
    assert {s.job_id: s.done for s in report.swept} == {"1": Done.CLEARED, "2": Done.CLEARED}
    got = {d.entry.job_id: None if d.settled is None else d.settled.verdict for d in report.verdicts}
    assert got == ({"7": Verdict.PRESENT, "8": Verdict.ABSENT, "2": Verdict.GONE} if with_unknown else {})
    assert report.verdicts_written == (3 if with_unknown else 0)
    with open_ledger(ledger_location) as ledger:
        assert ledger.unsettled(ledger.now()) == []
        settled = [e.settlement for e in ledger.history("7")]
        if with_unknown:
            assert settled[0] is not None and settled[0].verdict is Verdict.PRESENT
            assert settled[0].by.startswith("sweep, ") and settled[0].record == record("7", priority=0)
            assert ledger.last_sweep().summary["verdicts"] == {"present": 1, "absent": 1, "gone": 1}  # type: ignore[union-attr]


def test_only_unknown_operations_make_the_lookup_and_no_lease_is_taken(ledger_location: str,
                                                                       fake_scontrol: str) -> None:
    with open_ledger(ledger_location) as ledger:
        unknown(ledger, "7", Op.HOLD)
        assert acquire_lease(ledger, "7", "op:someone", ledger.now(), 600.0)  # a later operation holds the job
    lookup = MemoryLookup({"7": record("7", priority=0)})
    with Tracker(ledger_location, scontrol=fake_scontrol) as t:
        report = sweep(t, lookup)
    assert lookup.asked == [["7"]] and report.swept == [] and report.handled
    assert [d.settled.verdict for d in report.verdicts if d.settled] == [Verdict.PRESENT]
    assert calls_made(Path(fake_scontrol)) == []


def test_a_lookup_that_fails_settles_nothing(ledger_location: str, fake_scontrol: str) -> None:
    with open_ledger(ledger_location) as ledger:
        may_be_set(ledger, "1")
        unknown(ledger, "7", Op.HOLD)
    lookup = MemoryLookup({}, fail="slurmctld unreachable")
    with Tracker(ledger_location, scontrol=fake_scontrol) as t:
        report = sweep(t, lookup)
    assert len(lookup.asked) == 1 and not report.handled
    assert [d.settled for d in report.verdicts] == [None] and report.verdicts_written == 0
    with open_ledger(ledger_location) as ledger:
        assert [e.job_id for e in ledger.unsettled(ledger.now())] == ["7"]


def test_a_dry_run_decides_and_writes_nothing(ledger_location: str, fake_scontrol: str) -> None:
    with open_ledger(ledger_location) as ledger:
        unknown(ledger, "7", Op.HOLD)
    with Tracker(ledger_location, scontrol=fake_scontrol) as t:
        report = sweep(t, MemoryLookup({"7": record("7", priority=0)}), dry_run=True)
    assert [d.settled.verdict for d in report.verdicts if d.settled] == [Verdict.PRESENT]
    assert report.verdicts_written == 0
    with open_ledger(ledger_location) as ledger:
        assert len(ledger.unsettled(ledger.now())) == 1


def test_too_soon_for_absent_is_no_verdict_yet_and_the_delay_is_the_sweeps(ledger_location: str,
                                                                             fake_scontrol: str) -> None:
    with open_ledger(ledger_location) as ledger:
        unknown(ledger, "7", Op.HOLD, ago=5.0)  # ended 4 s ago: absent needs 10 s by default
    lookup = MemoryLookup({"7": record("7")})
    with Tracker(ledger_location, scontrol=fake_scontrol) as t:
        first = sweep(t, lookup)
        second = sweep(t, lookup, settle_delay=2.0)
    assert [d.settled for d in first.verdicts] == [None] and first.verdicts_written == 0
    assert [d.settled.verdict for d in second.verdicts if d.settled] == [Verdict.ABSENT]


@pytest.mark.parametrize("op", [Op.HOLD, Op.REQUEUE])
@pytest.mark.parametrize("finish", [True, False], ids=["unknown", "unfinished"])
def test_where_a_backup_may_hand_back_absent_waits_control_timeout_more(
    ledger_location: str, fake_scontrol: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: Op,
    finish: bool
) -> None:
    # An operation cut off by its deadline (a killed call: nothing printed) ended 25 s ago, its
    # job shows no effect.  One controller: absent.  slurm.conf naming a backup: no verdict yet,
    # since its request may still wait on a restarted primary's socket (docs/contract.md §13.6).
    conf = tmp_path / "slurm.conf"
    monkeypatch.setenv("SLURM_CONF", str(conf))
    verdicts = {}
    for text, job in ((ONE_CONTROLLER, "7"), (TWO_CONTROLLERS, "8")):
        conf.write_text(text)
        with open_ledger(ledger_location) as ledger:
            unknown(ledger, job, op, ago=26.0, baseline=record(job), finish=finish)
        lookup = MemoryLookup({job: record(job)})
        with Tracker(ledger_location, scontrol=fake_scontrol) as t:
            report = sweep(t, lookup, settle_delay=2.0)
        verdicts[job] = [d.settled.verdict if d.settled else None for d in report.verdicts if d.entry.job_id == job]
    assert verdicts == {"7": [Verdict.ABSENT], "8": [None]}


@pytest.mark.parametrize(("writer", "primary"), [(0, "refused"), (1, "refused"), (1, "listening")])
def test_where_a_backup_may_hand_back_absent_and_a_clear_wait_for_controllers_that_hold_nothing_back(
    ledger_location: str, fake_scontrol: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: int,
    primary: str
) -> None:
    # A requeue cut off 300 s ago (far past every bound), its job at Requeue=0 and RestartCnt 0:
    # absent, and its object cleared, only when a heartbeat was seen written after it and no
    # controller listed before its writer listens (docs/contract.md §13.6): a restarted primary that
    # listens may still hold the requeue back (a hand-back).  And only once that writer has been in
    # control for longer than a request may wait on its socket, on this host's boot clock (core.durable
    # Rule 7): the first sweep sees one heartbeat, gives no verdict and keeps the object; once earlier
    # sweeps (their looks in the ledger) saw two heartbeat files after the end, 100 s and 60 s ago, the
    # next one does.
    location = Path(os.environ["SLURM_DSL_STATE_SAVE_LOCATION"])
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        if primary == "listening":
            server.listen(8)
        conf = tmp_path / "slurm.conf"
        conf.write_text(f"SlurmctldHost=ctl-a(127.0.0.1)\nSlurmctldHost=ctl-b(127.0.0.1)\nSlurmctldPort={port}\n")
        monkeypatch.setenv("SLURM_CONF", str(conf))
        write_heartbeat(location, int(time.time()) - 60, writer)
        with open_ledger(ledger_location) as ledger:
            op_id = unknown(ledger, "7", Op.REQUEUE, ago=300.0, baseline=record("7"), ctl=f"{FAKE_CTL}#{writer}")
        with Tracker(ledger_location, scontrol=fake_scontrol) as t:
            first = sweep(t, MemoryLookup({"7": record("7")}), settle_delay=2.0)
        assert [d.settled for d in first.verdicts] == [None]
        assert [s.done for s in first.swept] == [Done.UNSAVED], first.swept
        heartbeat = f"{looks.place().observer}/heartbeat"
        with open_ledger(ledger_location) as ledger:  # what earlier sweeps saw: two more heartbeat files
            for n, ago in ((1, 100.0), (2, 60.0)):
                ledger.look_at_heartbeat(heartbeat, lambda n=n, ago=ago: (f"earlier-{n}#{writer}",  # type: ignore[misc]
                                                                           runs.boot_clock() - ago))
        write_heartbeat(location, int(time.time()), writer)
        with Tracker(ledger_location, scontrol=fake_scontrol) as t:
            report = sweep(t, MemoryLookup({"7": record("7")}), settle_delay=2.0)
    quiet = primary == "refused"
    verdicts = {d.entry.id: d.settled.verdict if d.settled else None for d in report.verdicts}
    assert verdicts == {op_id: Verdict.ABSENT if quiet else None}
    assert [(s.job_id, s.done) for s in report.swept] == [("7", Done.CLEARED if quiet else Done.UNSAVED)], report.swept
    if not quiet:
        assert "hand-back" in report.swept[0].why
    with open_ledger(ledger_location) as ledger:
        assert ledger.due_ids(ledger.now(), None) == ([] if quiet else ["7"])


def test_the_settle_limit_takes_the_newest_first(ledger_location: str, fake_scontrol: str) -> None:
    with open_ledger(ledger_location) as ledger:
        for n, job in enumerate(("7", "8", "9")):
            unknown(ledger, job, Op.HOLD, ago=300.0 - n * 100)
    lookup = MemoryLookup({})
    with Tracker(ledger_location, scontrol=fake_scontrol) as t:
        report = sweep(t, lookup, settle_limit=2)
    assert lookup.asked == [["9", "8"], ["9", "8"]]  # the second: they are gone (§13.8)
    assert [d.entry.job_id for d in report.verdicts] == ["9", "8"]


def test_operations_older_than_a_week_are_left_to_settle(ledger_location: str, fake_scontrol: str) -> None:
    with open_ledger(ledger_location) as ledger:
        unknown(ledger, "7", Op.HOLD, ago=8 * 86400.0)
    lookup = MemoryLookup({})
    with Tracker(ledger_location, scontrol=fake_scontrol) as t:
        report = sweep(t, lookup)
    assert lookup.asked == [] and report.verdicts == []
    code, out, _ = cli(["settle", "7", "--ledger", ledger_location, "--lookup", "squeue", "--squeue",
                        str(write_fake_squeue(Path(fake_scontrol).parent / "sq", ""))])
    assert code == 11 and "gone" in out, out  # settle given the job: any age


def test_a_later_operation_on_the_same_field_is_read_from_its_baseline(ledger_location: str,
                                                                      fake_scontrol: str) -> None:
    # hold 1 unknown; a release later looked the job up (held) before it ran: present, from that record.
    with open_ledger(ledger_location) as ledger:
        held = record("7", priority=0)
        first = unknown(ledger, "7", Op.HOLD, ago=120.0)
        unknown(ledger, "7", Op.RELEASE, ago=60.0, baseline=held)
    with Tracker(ledger_location, scontrol=fake_scontrol) as t:
        report = sweep(t, MemoryLookup({"7": record("7")}))
    got = {d.entry.id: d.settled for d in report.verdicts}[first]
    assert got is not None and got.verdict is Verdict.PRESENT
    assert got.record == held and "a later release" in got.detail


def test_a_later_record_counts_as_read_when_one_boot_clock_says(ledger_location: str, fake_scontrol: str) -> None:
    """core.settle Rule 15: hold unknown, a later release whose record (not held) the ledger's times
    say was read 59 s after the hold's end.  Read on this host's boot clock 59 s after: absent; 2 s
    after (the ledger's clock stepped forward between): undecidable, too soon; on another host:
    undecidable, cannot be told."""
    not_held = record("7")
    firsts = {}
    with open_ledger(ledger_location) as ledger:
        for job, read in (("7", ended_ago(1.0)), ("8", ended_ago(58.0)), ("9", "another-host/b00t/5.0")):
            firsts[job] = unknown(ledger, job, Op.HOLD, ago=120.0, ended=ended_ago(60.0))
            start = ledger.now() - 60.0
            later = begin_operation(ledger, job, Op.RELEASE, "1" * 32, start, baseline=replace(not_held, job_id=job),
                                           baseline_at=start - 0.2, ends_by=start + 1.0, baseline_boot=read)
            finish_operation(ledger, later, Outcome(Op.RELEASE, job, Result.OK, None), b"", start + 1.0,
                                    ended=ended_ago(59.0))
    with Tracker(ledger_location, scontrol=fake_scontrol) as t:
        report = sweep(t, MemoryLookup({j: replace(not_held, job_id=j) for j in firsts}))
    got = {d.entry.job_id: d.settled for d in report.verdicts if d.entry.id in firsts.values()}
    assert {j: s.verdict if s else None for j, s in got.items()} == {
        "7": Verdict.ABSENT, "8": Verdict.UNDECIDABLE, "9": Verdict.UNDECIDABLE}
    assert "too soon" in got["8"].detail and "cannot be told" in got["9"].detail  # type: ignore[union-attr]


# -- pyslurm's adapter over its fake: one lookup, one RPC ----------------------------------------


@pytest.fixture
def fake_pyslurm(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("FAKE_PYSLURM_API", "modern")
    monkeypatch.setenv("FAKE_PYSLURM_VERSION", "22.5.3")
    monkeypatch.setenv("FAKE_PYSLURM_IMPORT", "")
    monkeypatch.syspath_prepend(str(FAKE_PYSLURM))
    sys.modules.pop("pyslurm", None)
    yield importlib.import_module("pyslurm")
    sys.modules.pop("pyslurm", None)


@pytest.mark.parametrize("with_unknown", [False, True])
def test_with_pyslurm_the_sweep_is_one_rpc_with_or_without_unknown_operations(
    ledger_location: str, fake_scontrol: str, fake_pyslurm: Any, with_unknown: bool
) -> None:
    # More than 4 ids: the modern adapter loads every job in one RPC (docs/contract.md §9.3).
    objects = ["1", "2", "3", "4", "5", "6"]
    with open_ledger(ledger_location) as ledger:
        for job in objects:
            may_be_set(ledger, job)
        if with_unknown:
            for job in ("11", "12", "13"):
                unknown(ledger, job, Op.HOLD)
    for number in (11, 12):
        fake_pyslurm.add_job(number, priority=0)
    lookup = load_pyslurm_lookup((22, 5))
    assert lookup is not None
    with Tracker(ledger_location, scontrol=fake_scontrol) as t:
        report = sweep(t, lookup)
    # One RPC, and one more for the jobs it said are gone once saves are seen (§13.8).
    assert fake_pyslurm.RPCS == ["load_jobs", "load_jobs"]
    got = {d.entry.job_id: d.settled.verdict for d in report.verdicts if d.settled}
    assert got == ({"11": Verdict.PRESENT, "12": Verdict.PRESENT, "13": Verdict.GONE} if with_unknown else {})


# -- the command line ---------------------------------------------------------------------------


def test_sweep_json_reports_each_verdict_and_the_metrics_count_the_unsettled(
    ledger_location: str, fake_scontrol: str, tmp_path: Path
) -> None:
    with open_ledger(ledger_location) as ledger:
        hold = unknown(ledger, "7", Op.HOLD)
        unknown(ledger, "8", Op.HOLD, ago=3.0)  # too soon: no verdict yet
    squeue = write_fake_squeue(tmp_path / "sq", f"7|RUNNING|0|0|0|JobHeldAdmin\n8|RUNNING|0|0|{PRIORITY}|None\n")
    metrics = tmp_path / "sweep.prom"
    code, out, _ = cli(["sweep", "--ledger", ledger_location, "--scontrol", fake_scontrol, "--squeue", str(squeue),
                        "--lookup", "squeue", "--json", "--metrics-file", str(metrics)])
    assert code == 0, out
    rows = [json.loads(line) for line in out.splitlines()]
    verdicts = [r for r in rows if r["kind"] == "verdict"]
    assert {(r["job_id"], r["op"], r["verdict"]) for r in verdicts} == {("7", "hold", "present"), ("8", "hold", None)}
    assert next(r["id"] for r in verdicts if r["job_id"] == "7") == hold
    assert rows[-1]["kind"] == "summary" and rows[-1]["verdicts"]["present"] == 1 and rows[-1]["verdicts"]["none"] == 1
    text = metrics.read_text()
    assert "# TYPE slurm_dsl_unknown_unsettled gauge" in text and "slurm_dsl_unknown_unsettled 1\n" in text
    assert len((tmp_path / "sq" / "squeue.log").read_text().splitlines()) == 1, "one lookup RPC"
    code, out, _ = cli(["sweep", "--ledger", ledger_location, "--scontrol", fake_scontrol, "--squeue", str(squeue),
                        "--lookup", "squeue", "--settle-delay", "2"])
    assert code == 0 and "unknown operations: 1 looked at: 1 absent (1 verdict(s) written)" in out, out


def test_sweep_refuses_a_settle_delay_below_two_seconds(ledger_location: str, fake_scontrol: str) -> None:
    code, _, err = cli(["sweep", "--ledger", ledger_location, "--scontrol", fake_scontrol, "--settle-delay", "1.5"])
    assert code == 2 and "at least 2 seconds" in err


def test_metrics_text_names_the_unsettled_gauge(ledger_location: str, fake_scontrol: str) -> None:
    with Tracker(ledger_location, scontrol=fake_scontrol) as t:
        report = sweep(t, MemoryLookup({}))
    text = metrics_text(report, 0, 4)
    assert "# HELP slurm_dsl_unknown_unsettled " in text and "slurm_dsl_unknown_unsettled 4" in text


def test_the_sweeps_own_restore_does_not_hide_what_its_lookup_saw(ledger_location: str, fake_scontrol: str) -> None:
    # An earlier sweep's restore of job 7 timed out (unknown), its object still may_be_set.  This
    # sweep's lookup shows Requeue=1: the restore it runs next is a later operation on the flag,
    # but it began after the lookup, so the lookup still speaks for the earlier restore: absent.
    with open_ledger(ledger_location) as ledger:
        may_be_set(ledger, "7")
        first = unknown(ledger, "7", Op.RESTORE)
    with Tracker(ledger_location, scontrol=fake_scontrol) as t:
        report = sweep(t, MemoryLookup({"7": record("7", requeue=True)}))
    assert [s.done for s in report.swept] == [Done.RESTORED]
    got = {d.entry.id: d.settled for d in report.verdicts}[first]
    assert got is not None and got.verdict is Verdict.ABSENT and got.from_operation is None, got


def test_settle_shows_the_verdict_a_faster_settler_wrote(ledger_location: str) -> None:
    """Two settlers race: the first verdict written is final, and the row shows that one."""
    with open_ledger(ledger_location) as ledger:
        op_id = unknown(ledger, "7", Op.HOLD)
        real = ledger.add_settlements

        def first_another(verdicts: Any, now: float, *, by: str, **gone: Any) -> int:
            real([(op_id, Verdict.UNDECIDABLE, now, None, "the other settler's")], now, by="sweep, elsewhere")
            return real(verdicts, now, by=by, **gone)

        ledger.add_settlements = first_another  # type: ignore[method-assign]
        report = settling.settle_rows(ledger, MemoryLookup({"7": record("7", priority=0)}), job_ids=["7"],
                                      since=0.0, settle_delay=10.0, by="settle, me", scontrol="/usr/bin/scontrol")
    [row] = report.rows
    assert (row.verdict, row.when, row.by, row.detail) == (Verdict.UNDECIDABLE, settling.EARLIER, "sweep, elsewhere",
                                                           "the other settler's")


def test_the_delay_counts_on_the_boot_clock_where_the_operation_ended_on_this_host(
    ledger_location: str, fake_scontrol: str
) -> None:
    """core.settle Rule 15: the ledger's times say a minute since the end (a clock stepped forward
    in between would say so), the boot clock of this host and boot says a moment: no absent yet.
    An operation that ended on another host counts from when this host first found it over: the
    first decision (which keeps that) gives none either, one 10 s later on the boot clock does."""
    with open_ledger(ledger_location) as ledger:
        here = unknown(ledger, "7", Op.HOLD, ended=runs.ended())
        there = unknown(ledger, "8", Op.HOLD, ended=f"another-host/{runs.this_run().boot}/1.0")
        pending = ledger.to_settle(ledger.now())
        answers = {"7": record("7"), "8": record("8")}
        now, booted = ledger.now(), runs.boot_clock()
        soon = settling.decide(ledger, pending, answers, now, booted=booted, anchor=looks.Watch(ledger))
        assert {d.entry.id: d.settled for d in soon} == {here: None, there: None}
        later = settling.decide(ledger, pending, answers, now, booted=booted + 10.0)
        assert {d.entry.id: d.settled.verdict for d in later if d.settled} == {here: Verdict.ABSENT,
                                                                              there: Verdict.ABSENT}
        acknowledged = settling.recheck(ledger, [ledger.history("7")[0]], answers, now, booted=runs.boot_clock())
        assert [d.settled for d in acknowledged] == [None]
    lookup = MemoryLookup({"7": record("7"), "8": record("8")})
    with Tracker(ledger_location, scontrol=fake_scontrol) as t:
        done = sweep(t, lookup)
    assert {d.entry.job_id: d.settled.verdict for d in done.verdicts if d.settled} == {}


def test_a_run_that_never_ended_counts_from_when_this_host_found_it_over(ledger_location: str) -> None:
    """core.settle Rule 15: an operation whose run died mid-call kept no end; the ledger's times say
    it is long past its ``ends_by`` (a clock stepped forward would say so), but this host found it
    over only now: no absent until the delay has passed since, on this host's boot clock."""
    with open_ledger(ledger_location) as ledger:
        start = ledger.now() - 600.0
        op_id = begin_operation(ledger, "7", Op.HOLD, "0" * 32, start, ends_by=start + 1.0)
        pending = ledger.to_settle(ledger.now())
        answers = {"7": record("7")}
        now, booted = ledger.now(), runs.boot_clock()
        first = settling.decide(ledger, pending, answers, now, booted=booted, anchor=looks.Watch(ledger))
        assert [(d.entry.id, d.settled) for d in first] == [(op_id, None)]
        soon = settling.decide(ledger, pending, answers, now, booted=booted + 9.0)
        assert [d.settled for d in soon] == [None]
        later = settling.decide(ledger, pending, answers, now, booted=booted + 10.0)
        assert [d.settled.verdict for d in later if d.settled] == [Verdict.ABSENT]


def test_decide_reads_baselines_only_where_a_verdict_reads_one(ledger_location: str) -> None:
    """The gone jobs' operations without a later one are settled from the sweep's first read
    (``to_settle``, no baseline); the others are read again whole (``recorded``), after the
    lookup: a requeue of a job still there is read against its baseline, and an operation of a
    job still there that finished meanwhile (ok) is not settled."""
    with open_ledger(ledger_location) as ledger:
        gone = unknown(ledger, "7", Op.REQUEUE, baseline=record("7"))
        live = unknown(ledger, "8", Op.REQUEUE, baseline=record("8"))
        finishing = unknown(ledger, "9", Op.HOLD, finish=False)
        twice = unknown(ledger, "10", Op.HOLD)
        after = unknown(ledger, "10", Op.RELEASE, ago=30.0)  # a later one on job 10's priority
        pending = ledger.to_settle(ledger.now())
        assert {p.id for p in pending} == {gone, live, finishing, twice, after}
        finish_operation(ledger, finishing, Outcome(Op.HOLD, "9", Result.OK, None), b"", ledger.now())
        asked = []
        real = ledger.recorded

        def counting(op_ids: Any) -> Any:
            asked.extend(op_ids)
            return real(op_ids)

        ledger.recorded = counting  # type: ignore[method-assign]
        answers = {"7": None, "8": record("8", restarts=1), "9": record("9", priority=0), "10": None}
        decided = {d.entry.id: d.settled for d in settling.decide(ledger, pending, answers, ledger.now())}
        assert sorted(asked) == sorted([live, finishing, twice]), "neither gone nor after read again"
        s_gone, s_live, s_twice, s_after = decided[gone], decided[live], decided[twice], decided[after]
        assert decided[finishing] is None
        assert s_gone is not None and (s_gone.verdict, s_gone.record) == (Verdict.GONE, None)
        assert s_after is s_gone, "one shared value for every gone one"
        assert s_live is not None and (s_live.verdict, s_live.detail) == (Verdict.PRESENT, "RestartCnt 1 > baseline 0")
        assert s_twice is not None and s_twice.verdict is Verdict.UNDECIDABLE  # the later release has no baseline
        assert settling.write(ledger, list(settling.decide(ledger, pending[:0], answers, 0.0)), 0.0, by="x") == 0
        ledger.recorded = real  # type: ignore[method-assign]
        assert settling.write(ledger, [settling.Decided(p, decided[p.id]) for p in pending], ledger.now(),
                              by="sweep") == 4
        assert {e.id: e.settlement.verdict for job in ("7", "8", "10") for e in ledger.history(job)
                if e.settlement is not None} == {gone: Verdict.GONE, live: Verdict.PRESENT,
                                                 twice: Verdict.UNDECIDABLE, after: Verdict.GONE}


def test_the_looks_at_the_heartbeat_are_the_ledgers_whichever_process_took_them(
    ledger_location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # core.durable Rules 6 and 7: each look at the heartbeat is kept when it saw another file than
    # the observer's last, with its writer and this host's boot clock; another process reads them
    # from the ledger; a dry run keeps none.
    location = Path(os.environ["SLURM_DSL_STATE_SAVE_LOCATION"])
    conf = tmp_path / "slurm.conf"
    conf.write_text(TWO_CONTROLLERS + "MessageTimeout=10\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    with open_ledger(ledger_location) as ledger:
        kept = []
        for at, writer, again in ((1000, 0, False), (1000, 0, True), (1010, 0, False), (1030, 1, False)):
            if not again:
                write_heartbeat(location, at, writer)
            control = settling.controls(ledger)
            assert control is not None and (control.writer, control.held_for) == (writer, 40.0)
            kept.append([b.writer for b in control.beats])
        assert kept == [[0], [0], [0, 0], [0, 0, 1]]
        assert control is not None and control.now is not None and control.beats[-1].at <= control.now
        write_heartbeat(location, 1040, 1)
        dry = settling.controls(ledger, keep=False)
        assert dry is not None and [b.writer for b in dry.beats] == [0, 0, 1]
    with open_ledger(ledger_location) as ledger:  # another process
        other = settling.controls(ledger)
        assert other is not None and [b.writer for b in other.beats] == [0, 0, 1, 1]
