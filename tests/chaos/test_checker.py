"""The chaos checker on histories written by hand (docs/testing.md §6): each invariant found where
the lines prove it, and not where something else in flight, or a crash, could explain the record.
Pure: no lab."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytest

from tests.chaos import checker
from tests.chaos import schedule as sched
from tests.chaos.history import History, read

T = 1000.0  # the run's start
FIELDS = ("state", "reason", "requeue", "restarts", "priority")


class H:
    """A history, line by line."""

    def __init__(self) -> None:
        self.lines: List[Dict[str, Any]] = []
        self.add("run", t=T, seed=1, settle_delay=2.0, startup_tolerance=2.0)

    def add(self, line_type: str, /, **fields: Any) -> int:
        self.lines.append({"n": len(self.lines) + 1, "type": line_type, **fields})
        return len(self.lines)

    def invoke(self, inv: str, op: str, jobs: Sequence[str], t: float, end: Optional[float], *,
               exit: Optional[int] = None,
               rows: Sequence[Dict[str, Any]] = (), kind: str = "cli", key: Optional[str] = None, retry: int = 0,
               timeout: float = 5.0, stderr: str = "", phase: str = "run", deadline: Optional[float] = None,
               select: bool = False) -> None:
        self.add("invoke", id=inv, kind=kind, op=op, jobs=list(jobs), key=key, retry=retry,
                 timeout=None if kind == "sweep" else timeout, t=T + t, phase=phase, select=select)
        if exit is None:  # the worst row's (docs/contract.md §10)
            exit = max([checker.row_exit(op, r) or 0 for r in rows], default=0)
        if end is not None:
            self.add("end", id=inv, t=T + end, exit=exit, rows=list(rows), stderr=stderr,
                     deadline=None if deadline is None else T + deadline)

    def call(self, inv: str, argv: str, t0: float, t1: Optional[float], exit: Optional[int] = 0,
             stderr: str = "") -> None:
        self.add("call", inv=inv, argv=argv.split(), t0=T + t0, t1=None if t1 is None else T + t1, exit=exit,
                 stderr=stderr)

    def see(self, t: float, source: str = "poll", **jobs: Optional[Sequence[Any]]) -> None:
        self.add("observe", t0=T + t, t1=T + t + 0.01, ok=True, source=source,
                 jobs={j[1:]: (None if r is None else dict(zip(FIELDS, r))) for j, r in jobs.items()})

    def fault(self, fid: str, kind: str, t: float, end: Optional[float] = None, target: Optional[str] = None,
              **extra: Any) -> None:
        self.add("fault", id=fid, kind=kind, t=T + t, target=target, **extra)
        if end is not None:
            self.add("fault_end", id=fid, t=T + end)

    def check(self) -> List[checker.Violation]:
        return checker.check(self.ended()).violations

    def ended(self) -> List[Dict[str, Any]]:
        return [*self.lines, {"n": len(self.lines) + 1, "type": "phase", "name": "calls", "t": T + 99}]


RUNNING = ("RUNNING", "None", 0, 0, 100)
HELD = ("RUNNING", "JobHeldAdmin", 0, 0, 0)


def row(op: str, job: str, result: str, calls: Sequence[Any] = ((1, 0),), **more: Any) -> Dict[str, Any]:
    return {"job_id": job, "op": op, "result": result, "requeue_bit": more.pop("requeue_bit", None),
            "calls": [{"number": n, "status": s} for n, s in calls], **more}


def kinds(violations: Sequence[checker.Violation]) -> List[str]:
    return [v.kind for v in violations]


# -- false claims ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("after", "expected"), [(HELD, []), (RUNNING, ["false-claim"])])
def test_a_hold_ok_is_checked_against_the_record_after_it(after: Sequence[Any], expected: List[str]) -> None:
    h = H()
    h.see(0.0, j7=RUNNING)
    h.invoke("o1", "hold", ["7"], 1.0, 1.5, rows=[row("hold", "7", "ok")])
    h.call("o1", "hold 7", 1.2, 1.21)
    h.see(2.0, j7=after)
    found = h.check()
    assert kinds(found) == expected
    if found:
        assert found[0].job == "7" and found[0].lines[0] == 3  # the invoke line, first


REQUEUED_HELD = ("PENDING", "job_requeued_in_held_state", 0, 1, 0)
REQUEUED = ("PENDING", "BeginTime", 0, 1, 100)


@pytest.mark.parametrize(("after", "expected"), [
    (REQUEUED_HELD, []), (REQUEUED, ["false-claim"]), (RUNNING, ["false-claim", "false-claim"]),
])
def test_a_requeuehold_ok_claims_the_requeue_and_the_hold(after: Sequence[Any], expected: List[str]) -> None:
    """docs/contract.md §1, §12: a requeue into hold that is ok shows RestartCnt up and the job held."""
    h = H()
    h.see(0.0, j7=RUNNING)
    h.invoke("o1", "requeuehold", ["7"], 1.0, 1.5, rows=[
        row("requeuehold", "7", "ok", ((1, 0), (2, 0), (3, 0)), requeue_bit="clear")])
    h.call("o1", "update JobId=7 Requeue=1", 1.1, 1.11)
    h.call("o1", "requeuehold 7", 1.2, 1.21)
    h.call("o1", "update JobId=7 Requeue=0", 1.3, 1.31)
    h.see(2.0, j7=after)
    assert kinds(h.check()) == expected


@pytest.mark.parametrize("other", ["release 7", "requeue 7", "release 7,8"])
def test_a_claim_with_another_call_on_that_field_in_flight_is_not_checkable(other: str) -> None:
    h = H()
    h.invoke("o1", "hold", ["7"], 1.0, 1.5, rows=[row("hold", "7", "ok")])
    h.invoke("o2", "release", ["7"], 1.1, 1.8, rows=[row("release", "7", "ok")])
    h.call("o2", other, 1.6, 1.61)
    h.see(2.0, j7=RUNNING)
    report = checker.check(h.ended())
    assert "false-claim" not in kinds(report.violations)
    assert report.figures["claims not checkable (something else in flight)"] >= 1


def test_a_call_on_another_field_does_not_excuse_a_claim() -> None:
    h = H()
    h.invoke("o1", "hold", ["7"], 1.0, 1.5, rows=[row("hold", "7", "ok")])
    h.invoke("s2", "sweep", [], 1.1, 1.8, kind="sweep")
    h.call("s2", "update JobId=7 Requeue=0", 1.6, 1.61)  # a restore: the flag, not the priority
    h.see(2.0, j7=RUNNING)
    assert kinds(h.check()) == ["false-claim"]


def test_an_acknowledged_change_lost_in_a_crash_is_not_a_false_ok() -> None:
    # an acknowledged change lost in a crash (docs/testing.md §6.4): ok means slurmctld acknowledged it.
    h = H()
    h.invoke("o1", "hold", ["7"], 1.0, 1.5, rows=[row("hold", "7", "ok")])
    h.fault("f1", "slurmctld-kill", 1.7, 2.5)
    h.see(3.0, j7=RUNNING)
    assert h.check() == []


def test_an_id_slurmctld_gave_again_names_another_job() -> None:
    # A crash lost the job before it was saved; the id then names a new job (docs/testing.md §6.4).
    h = H()
    h.invoke("o1", "hold", ["7"], 1.0, 1.5, rows=[row("hold", "7", "ok")])
    h.add("env", t=T + 1.8, kind="reused", job="7")
    h.see(3.0, j7=RUNNING)
    assert h.check() == []


def test_a_graceful_restart_saves_and_excuses_nothing() -> None:
    h = H()
    h.invoke("o1", "hold", ["7"], 1.0, 1.5, rows=[row("hold", "7", "ok")])
    h.fault("f1", "slurmctld-restart", 1.7, 2.5)
    h.see(3.0, j7=RUNNING)
    assert kinds(h.check()) == ["false-claim"]


@pytest.mark.parametrize("result", ["rejected", "not_found", "expired", "not_run"])
def test_an_op_that_says_it_did_nothing_is_contradicted_by_its_effect(result: str) -> None:
    h = H()
    h.see(0.5, j7=("RUNNING", "None", 0, 3, 100))
    h.invoke("o1", "requeue", ["7"], 1.0, 1.5, rows=[row("requeue", "7", result, ((1, 1),), requeue_bit="clear")])
    h.see(2.0, j7=("PENDING", "BeginTime", 0, 4, 100))
    found = h.check()
    assert {v.kind for v in found} == {"false-claim"}
    assert any("RestartCnt=4" in v.message for v in found)


@pytest.mark.parametrize(("after", "expected"), [(RUNNING, ["false-claim"]), (None, [])])
def test_not_found_for_a_job_known_before_and_after_is_false(after: Optional[Sequence[Any]],
                                                              expected: List[str]) -> None:
    h = H()
    h.see(0.5, j7=RUNNING)
    h.invoke("o1", "hold", ["7"], 1.0, 1.5, rows=[row("hold", "7", "not_found", ((1, 1),))])
    h.see(2.0, j7=after)
    assert kinds(h.check()) == expected


def test_a_settled_absent_is_a_claim_of_no_effect_and_present_of_the_effect() -> None:
    h = H()
    h.see(0.5, j7=RUNNING, j8=RUNNING)
    h.invoke("o1", "hold", ["7", "8"], 1.0, 4.0, rows=[
        row("hold", "7", "unknown", ((1, 137),), effect="absent"),
        row("hold", "8", "unknown", ((1, 137),), effect="present")])
    h.see(4.5, j7=HELD, j8=RUNNING)
    assert sorted((v.kind, v.job) for v in h.check()) == [("false-claim", "7"), ("false-claim", "8")]


@pytest.mark.parametrize(("result", "effect"), [("ok", None), ("unknown", "present"), ("unknown", "absent")])
def test_a_row_that_reports_an_earlier_operation_claims_nothing_of_this_one(result: str, effect: Optional[str]) -> None:
    # docs/contract.md §12: a key's "done" row is the earlier operation's result, with no call;
    # another command may have undone it since (found in the hour's run: a hold settled present
    # long ago, the job released and cancelled since).
    h = H()
    h.invoke("o0", "hold", ["7"], 0.1, 0.4, key="k", rows=[row("hold", "7", "ok")])  # operation 3
    h.call("o0", "hold 7", 0.2, 0.3)
    h.see(0.5, j7=HELD)
    h.invoke("o1", "hold", ["7"], 1.0, 1.5, key="k",
             rows=[row("hold", "7", result, (), detail="operation 3 with this key ...", effect=effect)])
    h.see(2.0, j7=RUNNING)
    assert h.check() == []


def test_a_requeue_whose_call_3_succeeded_says_the_flag_is_0() -> None:
    h = H()
    h.see(0.5, j7=RUNNING)
    h.invoke("o1", "requeue", ["7"], 1.0, 1.5, rows=[row("requeue", "7", "ok", ((1, 0), (2, 0), (3, 0)),
                                                         requeue_bit="clear")])
    h.see(2.0, j7=("PENDING", "BeginTime", 1, 1, 100))
    found = h.check()
    assert kinds(found) == ["false-claim"] and "call 3" in found[0].message


# -- lost flags and unsettled operations ----------------------------------------------------------


def final(h: H, flag: int, bit: Optional[str], *, sweeps: int = 2, settled: bool = True, gap: float = 45.0) -> None:
    """Final sweeps ``gap`` seconds apart (the runner's: the settle delay, 2 s, and §13.6's 40 s more
    for an unanswered call, counted from the first one's end), then the final record and the ledger."""
    for i in range(sweeps):
        h.invoke(f"f{i}", "sweep", [], 60.0 + gap * i, 61.0 + gap * i, kind="sweep", phase="final",
                 rows=[{"kind": "summary", "lookup_error": None}])
    h.see(70.0 + gap * sweeps, source="final", j7=("RUNNING", "None", flag, 0, 100))
    h.add("ledger_dump", t=T + 71 + gap * sweeps, ok=True)
    if bit is not None:
        h.add("ledger_object", job="7", bit=bit)
    h.add("ledger_operation", job="7", id=1, op="requeue", result="unknown",
          settlement={"verdict": "present"} if settled else None)


@pytest.mark.parametrize(("flag", "bit", "expected"), [
    (1, "clear", ["lost-flag"]), (1, None, ["lost-flag"]), (1, "may_be_set", []), (1, "set", []), (0, "clear", []),
])
def test_a_job_at_requeue_1_in_the_end_needs_an_object_that_is_not_clear(
    flag: int, bit: Optional[str], expected: List[str]
) -> None:
    h = H()
    final(h, flag, bit)
    assert kinds(h.check()) == expected


def test_a_lost_flag_in_section_13s_window_says_so() -> None:
    h = H()
    h.invoke("d1", "requeue", ["7"], 10.0, 10.5, rows=[row("requeue", "7", "ok", ((1, 0), (2, 0), (3, 0)))])
    h.call("d1", "update JobId=7 Requeue=0", 10.3, 10.31)
    h.fault("f1", "slurmctld-kill-after-ack", 11.0, 12.0)
    final(h, 1, "clear")
    (found,) = h.check()
    assert found.kind == "lost-flag" and found.known == "durability-13" and "§13" in found.message


def test_a_flag_another_admin_set_last_is_theirs_and_one_set_after_it_is_checked() -> None:
    """The other-admin fault: an admin's Requeue=1 (a call of no command of the run) left at 1 is
    no lost flag; a requeue of the run that set it again after the admin's is checked."""
    h = H()
    h.call("x1", "update JobId=7 Requeue=1", 5.0, 5.01)
    final(h, 1, "clear")
    assert h.check() == []
    h = H()
    h.call("x1", "update JobId=7 Requeue=1", 5.0, 5.01)
    h.invoke("o2", "requeue", ["7"], 10.0, 10.5, rows=[row("requeue", "7", "unknown", ((1, 0), (2, -9)))])
    h.call("o2", "update JobId=7 Requeue=1", 10.1, 10.11)
    final(h, 1, "clear")
    assert kinds(h.check()) == ["lost-flag"]


def test_a_purge_killed_before_its_save_is_a_crash() -> None:
    """The slurmctld-kill-after-purge fault: an acknowledged change across it is not a false claim."""
    h = H()
    h.see(9.0, j7=RUNNING)
    h.invoke("o1", "hold", ["7"], 10.0, 10.5, rows=[row("hold", "7", "ok")])
    h.call("o1", "hold 7", 10.1, 10.2)
    h.fault("f1", "slurmctld-kill-after-purge", 10.8, 11.5)
    h.see(12.0, j7=RUNNING)
    assert h.check() == []
    assert "slurmctld-kill-after-purge" in checker.CRASHES and "mariadb-skew" in checker.LEDGER_OUTAGES


def test_an_unknown_operation_without_a_verdict_after_two_sweeps_is_unsettled() -> None:
    h = H()
    final(h, 0, "clear", settled=False)
    assert kinds(h.check()) == ["unsettled"]


def test_final_sweeps_closer_than_an_unanswered_calls_wait_check_nothing() -> None:
    """The final sweeps' host counts from its first look (§13.7), and an unknown whose controller did
    not answer is never absent within CONTROL_TIMEOUT plus MessageTimeout (§13.6): two final
    sweeps 5 s apart may both rightly say "look again later" (seen: an open whose call met a
    slurmctld SIGKILLed mid-call, `Unexpected message received`)."""
    h = H()
    final(h, 0, "clear", settled=False, gap=5.0)
    report = checker.check(h.ended())
    assert report.violations == []
    assert report.figures["unsettled check not made (fewer than two sweeps past the settle delay)"] == 1


def test_an_unsettled_operation_of_a_job_gone_in_the_end_is_not_checked() -> None:
    """§13.2: gone only once two saves are seen after the purge; the run does not watch saves."""
    h = H()
    final(h, 0, "clear", settled=False)
    h.see(82.0, source="final", j7=None)
    report = checker.check(h.ended())
    assert report.violations == []
    assert report.figures["unsettled checks not made (the job gone, its purge not known saved)"] == 1


def test_one_sweep_is_not_enough_to_call_an_operation_unsettled() -> None:
    h = H()
    final(h, 0, "clear", sweeps=1, settled=False)
    report = checker.check(h.ended())
    assert report.violations == []
    assert report.figures["unsettled check not made (fewer than two sweeps past the settle delay)"] == 1


@pytest.mark.parametrize(("ledger", "kind", "clock", "checked"), [
    ("/x/ledger.sqlite3", "clock-step", "host", False),  # the ledger's clock: its times lie 120 s ahead
    ("/x/ledger.sqlite3", "clock-step", "slurmctld", True),  # not the ledger's
    ("mariadb://localhost/x", "mariadb-skew", None, False),
    ("mariadb://localhost/x", "clock-step", "ctl-a", True),  # a command's clock, not the server's
])
def test_no_unsettled_check_before_the_ledgers_clock_passed_what_it_wrote_ahead(
    ledger: str, kind: str, clock: Optional[str], checked: bool
) -> None:
    """An operation begun while the ledger's clock stood 120 s ahead wrote its times so; where its
    run cannot be told over they decide (§13.7): final sweeps 60 s later prove nothing."""
    h = H()
    h.lines[0]["ledger_location"] = ledger
    h.fault("f1", kind, 5.0, 5.1, clock=clock, offset=120.0)
    final(h, 0, "clear", settled=False)
    report = checker.check(h.ended())
    assert kinds(report.violations) == (["unsettled"] if checked else [])
    skipped = report.figures.get("unsettled check not made (fewer than two sweeps past the settle delay)", 0)
    assert skipped == (not checked)


def test_a_corrupt_or_unreadable_ledger_is_lost() -> None:
    h = H()
    h.invoke("o1", "release", ["7"], 1.0, 1.5, exit=1,
             stderr="slurm-dsl: ledger error: ledger /x: begin operation: database disk image is malformed\n")
    h.add("ledger_dump", t=T + 81, ok=False, stderr="slurm-dsl: ledger /x: open: database disk image is malformed")
    assert kinds(h.check()) == ["ledger-lost", "ledger-lost"]


# -- keys ----------------------------------------------------------------------------------------


def keyed_requeues(h: H, second_call_at: float) -> None:
    h.invoke("o1", "requeue", ["7"], 1.0, 2.0, key="k", rows=[row("requeue", "7", "ok", ((1, 0), (2, 0), (3, 0)))])
    h.call("o1", "update JobId=7 Requeue=1", 1.5, 1.51)
    h.call("o1", "requeue 7", 1.52, 1.53)
    h.call("o1", "update JobId=7 Requeue=0", 1.54, 1.55)
    h.invoke("o2", "requeue", ["7"], 1.1, 12.0, key="k",
             rows=[row("requeue", "7", "rejected", ((1, 0), (2, 1), (3, 0)))])
    h.call("o2", "update JobId=7 Requeue=1", second_call_at, second_call_at + 0.01)


def test_a_keyed_run_acting_after_the_key_took_effect_is_found() -> None:
    h = H()
    keyed_requeues(h, 9.0)
    found = [v for v in h.check() if v.kind == "key-acted-twice"]
    assert len(found) == 1 and "o2" in found[0].message and "o1" in found[0].message


def test_a_redo_after_a_crash_is_allowed() -> None:
    # a keyed --retry redoes what a crash lost (docs/testing.md §6.4).
    h = H()
    keyed_requeues(h, 9.0)
    h.fault("f1", "slurmctld-kill", 3.0, 4.0)
    assert "key-acted-twice" not in kinds(h.check())


def test_a_key_twice_by_restart_count() -> None:
    h = H()
    h.see(0.5, j7=RUNNING)
    keyed_requeues(h, 1.0)  # the second started before the first's acknowledgement: the calls say nothing
    h.see(13.0, j7=("PENDING", "BeginTime", 0, 2, 100))
    assert "key-acted-twice" in kinds(h.check())


def test_a_retry_of_a_hold_after_another_command_released_it_is_no_double() -> None:
    # A hold whose row was unknown may be settled absent and held again (docs/contract.md §12).
    h = H()
    h.invoke("o1", "hold", ["7"], 1.0, 2.0, key="k", rows=[row("hold", "7", "unknown", ((1, 137),))])
    h.call("o1", "hold 7", 1.5, 1.51)
    h.invoke("o2", "hold", ["7"], 5.0, 6.0, key="k", rows=[row("hold", "7", "ok")])
    h.call("o2", "hold 7", 5.5, 5.51)
    assert h.check() == []


def test_a_hold_retried_after_its_first_call_was_undone_is_no_double() -> None:
    # The first call was acknowledged but read unknown (killed after it), another command released
    # the job, the verdict absent, and the command's own retry held it again (docs/contract.md §12).
    h = H()
    h.invoke("o1", "hold", ["7"], 1.0, 9.0, retry=1, rows=[row("hold", "7", "ok")])
    h.call("o1", "hold 7", 1.5, 1.51)
    h.call("o1", "hold 7", 6.5, 6.51)
    assert h.check() == []


# -- commands ------------------------------------------------------------------------------------


def test_a_command_past_its_bound_is_found_unless_frozen_or_the_ledger_was_down() -> None:
    h = H()
    h.invoke("o1", "hold", ["7"], 1.0, 1.0 + 5 + 16 + 2 + 3, rows=[row("hold", "7", "unknown", ((1, 124),))])
    assert kinds(h.check()) == ["deadline"]
    h.fault("f1", "cli-stop", 2.0, 6.0, target="o1")
    assert h.check() == []
    h = H()
    h.invoke("o1", "hold", ["7"], 1.0, 30.0, exit=1)
    h.fault("f1", "mariadb-kill", 2.0, 6.0)
    assert h.check() == []


def test_a_call_after_the_deadline_is_found() -> None:
    h = H()
    h.invoke("o1", "requeue", ["7"], 1.0, 8.0, kind="library", deadline=6.0, rows=[
        row("requeue", "7", "unknown", ((1, 0), (2, 124)))])
    h.call("o1", "update JobId=7 Requeue=0", 6.8, 6.81)
    found = h.check()
    assert kinds(found) == ["deadline"] and "after its deadline" in found[0].message


def test_a_runner_frozen_at_its_deadline_is_held_to_the_backstop() -> None:
    """Seed 220665: a library requeue's runner frozen (cli-stop) across its deadline sent no TERM;
    its script started call 2 0.86 s after the deadline, as §2 says it may until the backstop."""
    for fault, start, expected in ((True, 6.9, []), (True, 12.0, ["deadline"]), (False, 6.9, ["deadline"])):
        h = H()
        h.invoke("o1", "requeue", ["7"], 1.0, 13.0, kind="library", deadline=6.0, rows=[
            row("requeue", "7", "ok", ((1, 0), (2, 0), (3, 0)))])
        if fault:
            h.fault("f1", "cli-stop", 5.0, 10.8, target="o1")
        h.call("o1", "update JobId=7 Requeue=1", 2.0, 6.85)
        h.call("o1", "requeue 7", start, start + 0.01)
        assert kinds(h.check()) == expected, (fault, start)


def test_a_command_frozen_while_it_started_set_its_deadline_after_the_freeze() -> None:
    """Seed 202: a cli-stop 0.2 s after the start held the command before its handler set the
    deadline; its call 11.8 s after the start (timeout 8.3 s) was within it."""
    h = H()
    h.invoke("o1", "restore", ["7"], 0.0, 14.0, timeout=8.3, rows=[row("restore", "7", "ok")])
    h.fault("f1", "cli-stop", 0.2, 4.9, target="o1")
    h.call("o1", "ping", 5.3, 5.31)
    h.call("o1", "update JobId=7 Requeue=0", 12.0, 12.01)
    assert "deadline" not in kinds(h.check())
    h = H()
    h.invoke("o1", "restore", ["7"], 0.0, 14.0, timeout=8.3, rows=[row("restore", "7", "ok")])
    h.fault("f1", "cli-stop", 6.0, 9.0, target="o1")  # frozen after its first call: no later deadline
    h.call("o1", "ping", 5.3, 5.31)
    h.call("o1", "update JobId=7 Requeue=0", 12.0, 12.01)
    assert "deadline" in kinds(h.check())


def test_a_commands_deadline_is_dated_by_its_first_lookup() -> None:
    # Set when its handler started (docs/contract.md §10.0), before any process it starts: a call
    # more than the timeout after its first lookup started after the deadline, however slow the
    # command's start-up was.
    h = H()
    h.invoke("o1", "requeue", ["7"], 1.0, 9.0, timeout=5.0, rows=[row("requeue", "7", "unknown", ((1, 0), (2, 124)))])
    h.call("o1", "lookup", 1.4, None, None)
    h.call("o1", "update JobId=7 Requeue=0", 7.0, 7.01)  # 1.4 + 5 = 6.4 < 7.0 < 1 + 5 + 2
    assert kinds(h.check()) == ["deadline"]


def test_a_traceback_a_usage_error_that_ran_and_a_wrong_exit_status() -> None:
    h = H()
    h.invoke("o1", "hold", ["7"], 1.0, 1.5, exit=1, stderr="Traceback (most recent call last):\n  File ...")
    h.invoke("o2", "hold", ["8"], 2.0, 2.5, exit=2)
    h.call("o2", "hold 8", 2.2, 2.21)
    h.invoke("o3", "hold", ["9", "10"], 3.0, 3.5, exit=0,
             rows=[row("hold", "9", "ok"), row("hold", "10", "rejected", ((1, 1),))])
    assert sorted(kinds(h.check())) == ["exit-status", "traceback", "usage-ran"]


def test_a_selection_acts_on_the_jobs_its_names_name_and_no_other() -> None:
    """docs/contract.md §10.3: a command given --name of its jobs' names acts on those (one that
    finished meanwhile is not listed, so has no row), never on another job, never twice."""
    h = H()
    h.invoke("i1", "hold", ["7", "8"], 1.0, 2.0, rows=[row("hold", "7", "ok")], select=True)
    h.invoke("i2", "hold", ["7", "8"], 3.0, 4.0, rows=[row("hold", "7", "ok"), row("hold", "9", "ok")], select=True)
    h.invoke("i3", "hold", ["7", "8"], 5.0, 6.0, rows=[row("hold", "7", "ok"), row("hold", "7", "ok")], select=True)
    h.invoke("i4", "hold", ["7"], 7.0, 8.0, rows=[row("hold", "9", "ok")])  # by id: not a selection
    found = [v for v in h.check() if v.kind == "selection"]
    assert [v.message.split()[0] for v in found] == ["i2", "i3"], found


@pytest.mark.parametrize(("second", "restarts", "expected"), [
    ("success", 1, []), ("success", 0, ["false-claim"]),
    ("rejected", 0, []), ("rejected", 1, ["false-claim"]),
])
def test_a_bit_set_requeue_says_whether_its_call_2_requeued(second: str, restarts: int, expected: List[str]) -> None:
    """§7 rule 3: a bit_set's flag is 1, and the job was requeued exactly when its call 2 succeeded."""
    h = H()
    h.see(0.5, j7=RUNNING)
    bit_set = {"job_id": "7", "op": "requeue", "result": "bit_set", "requeue_bit": "set",
               "calls": [{"number": 1, "status": 0, "outcome": "success"},
                         {"number": 2, "status": 0 if second == "success" else 1, "outcome": second},
                         {"number": 3, "status": 75, "outcome": "expired"}]}
    h.invoke("o1", "requeue", ["7"], 1.0, 1.5, rows=[bit_set])
    h.see(2.0, j7=("PENDING" if restarts else "RUNNING", "None", 1, restarts, 100))
    assert kinds(h.check()) == expected


def test_a_key_that_says_ok_without_any_run_of_it_acting_never_acted() -> None:
    """At least once (§12): a keyed run may print an earlier run's ok, but only one its key's runs
    made; an ok under a key none of whose runs called the effect on the job is found."""
    h = H()
    h.invoke("o1", "hold", ["7"], 1.0, 2.0, key="k1", rows=[row("hold", "7", "ok")])
    h.call("o1", "hold 7", 1.1, 1.2)
    h.invoke("o2", "hold", ["7"], 3.0, 4.0, key="k1", rows=[row("hold", "7", "ok")])  # the earlier ok: fine
    h.invoke("o3", "hold", ["8"], 5.0, 6.0, key="k2", rows=[row("hold", "8", "ok")])  # nobody held 8
    h.invoke("o4", "hold", ["9"], 7.0, 8.0, key="k3", rows=[row("hold", "9", "unknown", effect="present")])
    found = [v for v in h.check() if v.kind == "key-never-acted"]
    assert [v.message.split(" under ")[1].split(":")[0] for v in found] == ["key k2"], found


def test_a_keys_requeues_into_hold_or_not_are_one_operation() -> None:
    """A key's requeues are one (docs/contract.md §1): a requeue printing the ok of the same key's
    earlier requeue into hold is no key that never acted; one that requeues again acted twice."""
    h = H()
    h.invoke("o1", "requeuehold", ["7", "8"], 1.0, 2.0, key="k1",
             rows=[row("requeuehold", j, "ok", ((1, 0), (2, 0), (3, 0))) for j in ("7", "8")])
    h.call("o1", "update JobId=7,8 Requeue=1", 1.1, 1.2)
    h.call("o1", "requeuehold 7,8", 1.3, 1.4)
    h.call("o1", "update JobId=7,8 Requeue=0", 1.5, 1.6)
    h.invoke("o2", "requeue", ["7", "8"], 3.0, 4.0, key="k1",
             rows=[row("requeue", "7", "ok", ()), row("requeue", "8", "ok", ((1, 0), (2, 0), (3, 0)))])
    h.call("o2", "update JobId=8 Requeue=1", 3.1, 3.2)
    h.call("o2", "requeue 8", 3.3, 3.4)
    h.call("o2", "update JobId=8 Requeue=0", 3.5, 3.6)
    found = [(v.kind, v.job) for v in h.check() if v.kind.startswith("key-")]
    assert found == [("key-acted-twice", "8")], found


def test_one_command_calling_its_effect_twice_on_a_job_acted_twice() -> None:
    """A command without --retry acts on each job once: a second requeue call on a job (as a
    requeue whose RestartCnt check would pass all the same) is found; another job's, or a retrying
    command's, is not."""
    h = H()
    h.invoke("o1", "requeue", ["7", "8"], 1.0, 3.0, rows=[])
    h.call("o1", "update JobId=7,8 Requeue=1", 1.1, 1.2)
    h.call("o1", "requeue 7,8", 1.3, 1.4)
    h.call("o1", "requeue 8", 1.5, 1.6, exit=1)
    h.invoke("o2", "hold", ["9"], 4.0, 5.0, rows=[], retry=1)
    h.call("o2", "hold 9", 4.1, 4.2)
    h.call("o2", "hold 9", 4.3, 4.4)
    found = [v for v in h.check() if v.kind == "acted-twice"]
    assert [v.message.split()[0] for v in found] == ["o1"] and "job 8" in found[0].message, found


def test_a_settled_row_exits_by_its_effect() -> None:
    h = H()
    h.invoke("o1", "requeue", ["7", "8"], 1.0, 9.5, exit=14, rows=[
        row("requeue", "7", "ok", requeue_bit="clear"),
        row("requeue", "8", "unknown", ((1, 0), (2, 137)), effect="present", requeue_bit="set")])
    assert "exit-status" not in kinds(h.check())


# -- the pieces ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "expected"), [
    (["hold", "1,2"], ("hold", ("1", "2"), {"prio"})),
    (["release", "3"], ("release", ("3",), {"prio"})),
    (["requeue", "4"], ("requeue", ("4",), {"restarts", "flag", "prio"})),
    (["update", "JobId=5,6", "Requeue=1"], ("requeue=1", ("5", "6"), {"flag"})),
    (["update", "JobId=7", "Requeue=0"], ("requeue=0", ("7",), {"flag"})),
    (["update", "JobId=7", "StartTime=now"], ("update", ("7",), {"prio", "flag", "restarts"})),
    (["ping"], ("other", (), set())),
])
def test_what_a_call_writes(argv: List[str], expected: Any) -> None:
    action, ids, fields = checker.parse_call(argv)
    assert (action, ids, set(fields)) == expected


@pytest.mark.parametrize(("exit", "stderr", "acked"), [
    (0, "", {"1", "2", "3"}),
    (1, "Job is pending execution for job 2\n", {"1", "3"}),
    (1, "Invalid job id specified for job 3\nslurm_suspend error: Invalid job id specified\n", {"1", "2"}),
    (1, "Unexpected message received for job 1\n", {"2", "3"}),
    (1, "2_1: Job has already finished\n", set()),
    (137, "", set()),
    (None, "", set()),
])
def test_which_ids_a_call_had_acknowledged(exit: Optional[int], stderr: str, acked: set[str]) -> None:
    assert set(checker.acked_ids(["1", "2", "3"], exit, stderr)) == acked


def test_the_checker_imports_nothing_of_the_product() -> None:
    # Written apart from the product (issue 33): only the standard library.
    for name in ("checker.py", "history.py"):
        tree = ast.parse((Path(__file__).parent / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                assert not module.startswith(("slurm_dsl", "tests")), f"{name} imports {module}"


def test_a_history_whose_run_has_not_ended_is_not_checked() -> None:
    with pytest.raises(ValueError, match="has not ended"):
        checker.check(H().lines)


def test_a_history_round_trips(tmp_path: Path) -> None:
    history = History(tmp_path / "h.jsonl")
    assert history.write("run", t=T, seed=3) == 1
    assert history.write("note", kind="a note may carry a kind", t=T) == 2
    history.close()
    assert [x["type"] for x in read(tmp_path / "h.jsonl")] == ["run", "note"]
    (tmp_path / "bad.jsonl").write_text('{"n": 2, "type": "run"}\n')
    with pytest.raises(ValueError, match="not a history line"):
        read(tmp_path / "bad.jsonl")


# -- the schedule --------------------------------------------------------------------------------


def test_a_seed_gives_one_schedule_and_switching_a_fault_off_keeps_the_rest() -> None:
    options = sched.Options(seed=11, minutes=2.0)
    full = sched.make(options)
    assert sched.make(options).events == full.events
    assert sched.make(sched.Options(seed=12, minutes=2.0)).events != full.events
    without = sched.make(sched.Options(seed=11, minutes=2.0, without=sched.expand(frozenset({"durability-13"}))))
    assert not any(f.kind in sched.GROUPS["durability-13"] for f in without.faults())
    assert [e for e in full.events if not (isinstance(e, sched.Fault) and e.kind in sched.GROUPS["durability-13"])] == \
        without.events
    kinds_seen = {f.kind for f in full.faults()}
    assert {"cli-kill", "cli-stop", "ledger-lock"} <= kinds_seen
    assert any(isinstance(e, sched.Invoke) and e.episode for e in full.events)


def test_another_rate_for_one_fault_kind_keeps_the_others() -> None:
    base = sched.make(sched.Options(seed=11, minutes=2.0))
    more = sched.make(sched.Options(seed=11, minutes=2.0, fault_rates=(("slurmctld-kill-after-ack", 6.0),)))
    def moments(schedule: sched.Schedule, kind: str) -> List[float]:
        return [f.t for f in schedule.faults() if f.kind == kind]
    assert len(moments(more, "slurmctld-kill-after-ack")) > len(moments(base, "slurmctld-kill-after-ack"))
    assert moments(more, "cli-kill") == moments(base, "cli-kill")


def test_a_shrunk_schedule_keeps_its_slots_and_faults_only() -> None:
    small = sched.make(sched.Options(seed=11, minutes=2.0, only_slots=frozenset({0, 3}), only_faults=frozenset({1})))
    assert all(set(e.slots) <= {0, 3} for e in small.events if isinstance(e, sched.Invoke))
    assert {f.number for f in small.faults()} <= {1}


def test_unknown_fault_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        sched.expand(frozenset({"slurmctld-kil"}))
    assert sched.expand(frozenset({"durability-13"})) == {"slurmctld-kill", "slurmctld-kill-after-ack"}


def test_shrinking_keeps_the_smallest_schedule_that_still_fails(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    # A fake lab: the violation comes back while fault `needed` and job slot 3 are in the schedule.
    from tests.chaos import __main__ as chaos

    options = sched.Options(seed=11, minutes=2.0)
    needed = sched.make(options).faults()[5].number
    lines = [{"n": 1, "type": "run", "t": T}, {"n": 2, "type": "job", "job": "7", "slot": 3},
             {"n": 3, "type": "fault", "t": T + 30.0, "id": f"f{needed}", "kind": "cli-kill"}]
    found = checker.Report([checker.Violation("lost-flag", "...", (3,), "7")], {})

    def play(candidate: sched.Options, directory: Path, settle_delay: float, pair: bool = False) -> Any:
        kept = {f.number for f in sched.make(candidate).faults()}
        fails = needed in kept and (candidate.only_slots is None or 3 in candidate.only_slots)
        return (found if fails else checker.Report([], {})), []

    monkeypatch.setattr(chaos, "play", play)
    best, how = chaos.shrink(options, found, lines, 12, tmp_path, 2.0)
    assert best.only_slots == frozenset({3}) and best.minutes == 0.9  # 30 s + 20 s, in tenths of a minute
    assert best.only_faults is not None and needed in best.only_faults
    assert len(sched.make(best).faults()) <= 3
    assert how.startswith("shrunk in ") and "from 14 job slots" in how and "to 1 job slots" in how
    assert "--only-slots 3" in chaos.replay(best, "", 2.0)
