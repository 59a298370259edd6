"""--settle, --retry and --key (docs/contract.md §12), through ``run.keyed``, the API and the CLI.

A fake scontrol makes a call's outcome unknown as only a killed call can (``kill -KILL $$``:
the script reads status 137); the fake squeue answers with the job's record in the real ``-O``
shape.  Each test says what the record shows and checks the effect, the exit, what ran (the
fake's own log), and the ledger's history: retries linked to the first run, verdicts appended.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import List

import pytest

import slurm_dsl
from slurm_dsl.core.model import Op, Outcome, OutcomeUnknown, Result, Verdict
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.records import HistoryEntry
from slurm_dsl.run.driver import Ran
from slurm_dsl.run.keyed import run_settled
from slurm_dsl.run.tracked import Tracker
from tests.cli_run import cli
from tests.fakes import calls_made, write_fake, write_fake_squeue
from tests.ledger_ops import acquire_lease, begin_operation, finish_operation

DELAY = 2.0  # the shortest settle delay there is: a test that needs "absent" waits this long
KILLED = "kill -KILL $$"
HELD = "7|PENDING|0|0|0|JobHeldAdmin\n"
NOT_HELD = "7|PENDING|0|0|4294901|Priority\n"
RUNNING = "7|RUNNING|0|1|4294901|None\n"


def once_killed(tmp_path: Path) -> str:
    """sh code: the first such call is killed (unknown), every later one succeeds."""
    flag = tmp_path / "killed-once"
    return f"if [ -e '{flag}' ]; then exit 0; fi; : > '{flag}'; {KILLED}"


def setup(tmp_path: Path, plan: dict, record: str) -> Path:  # type: ignore[type-arg]
    directory = tmp_path / "bin"
    fake = write_fake(directory, plan)
    write_fake_squeue(directory, record)
    return fake


def tracker(tmp_path: Path, fake: Path) -> Tracker:
    return Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fake), squeue=str(fake.parent / "squeue"))


def history(tmp_path: Path, job: str = "7") -> List[HistoryEntry]:
    with open_ledger(str(tmp_path / "ledger.sqlite3")) as ledger:
        return ledger.history(job)


def lookups(fake: Path) -> int:
    log = fake.parent / "squeue.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def rows(events: object) -> List[Outcome]:
    return [e.outcome for e in events if isinstance(e, Ran)]  # type: ignore[attr-defined]


def test_settle_reads_present_at_once_and_exits_ok(tmp_path: Path) -> None:
    fake = setup(tmp_path, {"hold": KILLED}, HELD)
    with tracker(tmp_path, fake) as t:
        start = time.monotonic()
        (row,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 60, settle=True, settle_delay=DELAY))
        took = time.monotonic() - start
    assert (row.result, row.effect, row.exits_as, row.settled) == (Result.UNKNOWN, Verdict.PRESENT, Result.OK, True)
    assert took < DELAY, "a present needs no settle delay"
    assert lookups(fake) == 2  # the array check, and the one look after the run
    (op,) = history(tmp_path)
    assert op.settlement is not None and op.settlement.verdict is Verdict.PRESENT
    assert op.settlement.by.startswith("command, uid ")


def test_settle_without_the_effect_waits_the_delay_then_says_absent(tmp_path: Path) -> None:
    fake = setup(tmp_path, {"hold": KILLED}, NOT_HELD)
    with tracker(tmp_path, fake) as t:
        (row,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 60, settle=True, settle_delay=DELAY))
    assert (row.result, row.effect, row.exits_as) == (Result.UNKNOWN, Verdict.ABSENT, Result.UNKNOWN)
    (op,) = history(tmp_path)
    assert op.settlement is not None and op.finished_at is not None
    assert op.settlement.looked_at >= op.finished_at + DELAY  # absent only after the delay
    assert [c for c in calls_made(fake) if c.startswith("hold")] == ["hold 7"]  # no retry asked


def test_retry_reruns_an_absent_hold_linked_to_the_first(tmp_path: Path) -> None:
    fake = setup(tmp_path, {"hold": once_killed(tmp_path)}, NOT_HELD)
    with tracker(tmp_path, fake) as t:
        (row,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 60, retry=2, settle_delay=DELAY))
    assert (row.result, row.effect, row.exits_as) == (Result.OK, None, Result.OK)
    first, second = history(tmp_path)
    assert first.settlement is not None and first.settlement.verdict is Verdict.ABSENT
    assert (second.retry_of, second.result) == (first.id, Result.OK)
    assert [c for c in calls_made(fake) if c.startswith("hold")] == ["hold 7", "hold 7"]


def test_retry_stops_after_n_runs(tmp_path: Path) -> None:
    fake = setup(tmp_path, {"hold": KILLED}, NOT_HELD)
    with tracker(tmp_path, fake) as t:
        (row,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 60, retry=1, settle_delay=DELAY))
    assert (row.result, row.effect) == (Result.UNKNOWN, Verdict.ABSENT)
    ops = history(tmp_path)
    assert len(ops) == 2 and ops[1].retry_of == ops[0].id
    assert all(o.settlement is not None and o.settlement.verdict is Verdict.ABSENT for o in ops)


def test_a_requeue_whose_restarts_rose_is_present_and_never_run_again(tmp_path: Path) -> None:
    # The record shows RestartCnt 1 where the baseline (the same fake record) shows 1 too: to get
    # "present", the requeue call itself bumps the record the fake squeue prints afterwards.
    directory = tmp_path / "bin"
    after = tmp_path / "after"
    fake = write_fake(directory, {"requeue": f": > '{after}'; {KILLED}"})
    squeue = write_fake_squeue(directory, RUNNING)
    squeue_after = write_fake_squeue(tmp_path / "bin2", "7|PENDING|0|2|4294901|None\n")
    original = squeue.read_text()
    squeue.write_text(original.replace(
        "#!/bin/sh\n", f"#!/bin/sh\n[ -e '{after}' ] && exec '{squeue_after}' \"$@\"\n", 1))
    with tracker(tmp_path, fake) as t:
        (row,) = rows(run_settled(t, Op.REQUEUE, ["7"], time.time() + 60, retry=3, settle_delay=DELAY))
    assert (row.result, row.effect, row.exits_as) == (Result.UNKNOWN, Verdict.PRESENT, Result.OK)
    assert [c for c in calls_made(fake) if c.startswith("requeue")] == ["requeue 7"]


def test_a_key_runs_a_job_once(tmp_path: Path) -> None:
    fake = setup(tmp_path, {}, HELD)  # the record shows what the hold did: read again, it is there
    with tracker(tmp_path, fake) as t:
        (first,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 60, key="nightly-42"))
        (again,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 60, key="nightly-42"))
        (other,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 60, key="nightly-43"))
    assert first.result is Result.OK and not first.settled
    assert (again.result, again.settled, again.calls) == (Result.OK, True, ())
    assert again.detail == "operation 1 with this key took effect: not run again"
    assert other.result is Result.OK and other.calls
    assert [c for c in calls_made(fake) if c.startswith("hold")] == ["hold 7", "hold 7"]
    assert [(o.key, o.op) for o in history(tmp_path)] == [("nightly-42", Op.HOLD), ("nightly-43", Op.HOLD)]


@pytest.mark.parametrize("one_by_one", [True, False], ids=["one-by-one", "bulk"])
def test_a_key_is_read_again_under_the_lease(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_by_one: bool) -> None:
    # docs/contract.md §12, "A key is decided under the job's lease": another run of the key acts
    # on the jobs after this one looked back and before it takes their leases (here: while this
    # one looks its ids up).  This one acts on none of them and prints the other's rows.
    fake = setup(tmp_path, {}, HELD + HELD.replace("7|", "8|"))  # held, as the other run left them
    jobs = ["7", "8"] if not one_by_one else ["7"]
    original = Tracker.look_up
    other_ran: List[Outcome] = []
    others: List[Tracker] = []

    def look_up(self: Tracker, *args: object, **kwargs: object) -> object:
        if not others:
            with tracker(tmp_path, fake) as other:  # another process: its own connection
                others.append(other)
                other_ran.extend(rows(run_settled(other, Op.HOLD, jobs, time.time() + 60, key="nightly-42")))
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Tracker, "look_up", look_up)
    with tracker(tmp_path, fake) as t:
        got = rows(run_settled(t, Op.HOLD, jobs, time.time() + 60, key="nightly-42", one_by_one=one_by_one))
    assert [o.result for o in other_ran] == [Result.OK] * len(jobs)
    assert [(o.job_id, o.result, o.calls) for o in got] == [(j, Result.OK, ()) for j in jobs]
    assert all(o.detail.endswith("with this key took effect: not run again") for o in got)
    holds = [c for c in calls_made(fake) if c.startswith("hold")]
    assert holds == (["hold 7"] if one_by_one else ["hold 7,8"]), holds
    assert [(o.key, o.result) for j in jobs for o in history(tmp_path, j)] == [("nightly-42", Result.OK)] * len(jobs)


def test_a_key_acts_again_where_an_acknowledged_hold_was_lost(tmp_path: Path) -> None:
    # docs/contract.md §13.4: the hold was ok, then the controller came back without it (the fake
    # squeue shows the job not held).  The same command with the key reads the job again, records
    # "acknowledged, then lost" and holds it again, once; a third run finds the second held.
    fake = setup(tmp_path, {}, NOT_HELD)
    with tracker(tmp_path, fake) as t:
        (first,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 60, key="nightly-42"))
        assert first.result is Result.OK
        (again,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 60, key="nightly-42", settle_delay=DELAY))
        assert again.result is Result.OK and again.calls, again  # run again: its own row, its own calls
        write_fake_squeue(fake.parent, HELD)  # the second hold is there
        (third,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 60, key="nightly-42", settle_delay=DELAY))
    assert (third.result, third.calls) == (Result.OK, ()) and "took effect" in third.detail, third
    assert [c for c in calls_made(fake) if c.startswith("hold")] == ["hold 7", "hold 7"]
    lost, redone = history(tmp_path)
    assert lost.settlement is not None and lost.settlement.verdict is Verdict.ABSENT
    assert lost.settlement.detail.startswith("acknowledged, then lost"), lost.settlement.detail
    assert redone.settlement is None and redone.result is Result.OK


def test_a_key_requeues_a_lost_requeue_once(tmp_path: Path) -> None:
    # The requeue was ok, and came back undone (RestartCnt as it was before it): requeued again,
    # once; the run after finds that one present (RestartCnt one above its own baseline).
    fake = setup(tmp_path, {}, RUNNING.replace("|0|1|", "|0|0|"))
    with tracker(tmp_path, fake) as t:
        (first,) = rows(run_settled(t, Op.REQUEUE, ["7"], time.time() + 60, key="k"))
        assert first.result is Result.OK
        (again,) = rows(run_settled(t, Op.REQUEUE, ["7"], time.time() + 60, key="k", settle_delay=DELAY))
        assert again.result is Result.OK and again.calls, again
        write_fake_squeue(fake.parent, "7|PENDING|0|1|4294901|BeginTime\n")  # the second one is there
        (third,) = rows(run_settled(t, Op.REQUEUE, ["7"], time.time() + 60, key="k", settle_delay=DELAY))
    assert third.calls == () and "took effect" in third.detail, third
    assert [c for c in calls_made(fake) if c.startswith("requeue")] == ["requeue 7", "requeue 7"]
    lost, redone = history(tmp_path)
    assert redone.result is Result.OK and redone.settlement is None
    assert lost.settlement is not None and lost.settlement.verdict is Verdict.ABSENT


def test_a_keyed_rerun_whose_acknowledged_job_is_gone_is_not_ok(tmp_path: Path) -> None:
    # The requeue was ok; then slurmctld lost its whole state (a hand-back, measured once in 7 on
    # 26.05: issue 45 item 7) and the job is gone.  The rerun never requeues twice, and its row
    # must not say ok: it exits as gone (11), saying the ok was lost.
    fake = setup(tmp_path, {}, RUNNING.replace("|0|1|", "|0|0|"))
    with tracker(tmp_path, fake) as t:
        (first,) = rows(run_settled(t, Op.REQUEUE, ["7"], time.time() + 60, key="k"))
        assert first.result is Result.OK
        write_fake_squeue(fake.parent, "")  # squeue -j 7: Invalid job id specified
        (again,) = rows(run_settled(t, Op.REQUEUE, ["7"], time.time() + 60, key="k", settle_delay=DELAY))
    assert (again.result, again.effect, again.exits_as, again.calls) == (
        Result.UNKNOWN, Verdict.GONE, Result.NOT_FOUND, ()), again
    assert "acknowledged (ok), then lost" in again.detail
    assert [c for c in calls_made(fake) if c.startswith("requeue")] == ["requeue 7"]
    code, out, _ = cli(["requeue", "7", "--key", "k", "--ledger", str(tmp_path / "ledger.sqlite3"), "--scontrol",
                        str(fake), "--squeue", str(fake.parent / "squeue"), "--timeout", "30"])
    assert code == 11 and " ok " not in out, out


def test_a_key_after_an_unknown_run_waits_the_delay_and_acts_only_on_absent(tmp_path: Path) -> None:
    fake = setup(tmp_path, {"hold": once_killed(tmp_path)}, NOT_HELD)
    with tracker(tmp_path, fake) as t:
        (cut,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 60, key="k"))
        assert cut.result is Result.UNKNOWN and not cut.settled  # no --settle: as without a key
        (again,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 60, key="k", settle_delay=DELAY))
    assert again.result is Result.OK
    first, second = history(tmp_path)
    assert first.settlement is not None and first.settlement.verdict is Verdict.ABSENT
    assert first.settlement.looked_at >= (first.finished_at or 0) + DELAY
    assert second.key == "k" and second.result is Result.OK


def test_a_key_waits_for_an_operation_that_may_still_run_and_expires_at_the_deadline(tmp_path: Path) -> None:
    fake = setup(tmp_path, {}, NOT_HELD)
    with tracker(tmp_path, fake) as t:
        ledger = t.ledger()
        now = ledger.now()
        # Another process's hold with this key, begun and still within its deadline (ends_by).
        assert acquire_lease(ledger, "7", "op:elsewhere", now, 300)
        begin_operation(ledger, "7", Op.HOLD, "a" * 32, now, key="k", ends_by=now + 300)
        (row,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 3, key="k", settle_delay=DELAY))
    assert (row.result, row.settled) == (Result.EXPIRED, True)
    assert "may still act" in row.detail
    assert not [c for c in calls_made(fake) if c.startswith("hold")]


def _undecidable_requeue(t: Tracker, op: Op) -> None:
    """An earlier keyed operation whose outcome is unknown and settled undecidable."""
    ledger = t.ledger()
    now = ledger.now()
    op_id = begin_operation(ledger, "7", op, "b" * 32, now, key="k", ends_by=now)
    finish_operation(ledger, op_id, Outcome(op, "7", Result.UNKNOWN, None), b"", now)
    ledger.add_settlements([(op_id, Verdict.UNDECIDABLE, now, None, "no baseline")], now, by="test")


def test_a_requeue_that_may_have_happened_is_never_run_again_but_a_hold_is(tmp_path: Path) -> None:
    fake = setup(tmp_path, {}, RUNNING)
    with tracker(tmp_path, fake) as t:
        _undecidable_requeue(t, Op.REQUEUE)
        (stop,) = rows(run_settled(t, Op.REQUEUE, ["7"], time.time() + 60, key="k", retry=2, settle_delay=DELAY))
        _undecidable_requeue(t, Op.HOLD)
        (hold,) = rows(run_settled(t, Op.HOLD, ["7"], time.time() + 60, key="k", settle_delay=DELAY))
    assert (stop.result, stop.effect, stop.exits_as) == (Result.UNKNOWN, Verdict.UNDECIDABLE, Result.UNKNOWN)
    assert "never requeued twice" in stop.detail
    assert not [c for c in calls_made(fake) if c.startswith("requeue")]
    assert hold.result is Result.OK and [c for c in calls_made(fake) if c.startswith("hold")] == ["hold 7"]


def test_a_call_that_hangs_until_its_end_is_still_settled_within_the_deadline(tmp_path: Path) -> None:
    fake = setup(tmp_path, {"hold": "sleep 600"}, HELD)
    with tracker(tmp_path, fake) as t:
        deadline = time.time() + 6.0  # the calls get 6 - (2 + 2) = 2 s; settling the rest
        (row,) = rows(run_settled(t, Op.HOLD, ["7"], deadline, settle=True, settle_delay=DELAY))
        ended = time.time()
    assert (row.result, row.effect, row.exits_as) == (Result.UNKNOWN, Verdict.PRESENT, Result.OK)
    assert ended < deadline + 2.0  # within the deadline and the command's small overrun
    (op,) = history(tmp_path)
    assert op.finished_at is not None and op.settlement is not None


def test_a_deadline_too_close_for_settling_is_refused_before_anything(tmp_path: Path) -> None:
    fake = setup(tmp_path, {}, HELD)
    with tracker(tmp_path, fake) as t, pytest.raises(slurm_dsl.InvalidInput, match="need a deadline at least 5 s"):
        run_settled(t, Op.HOLD, ["7"], time.time() + 4.5, settle=True, settle_delay=DELAY)
    assert calls_made(fake) == [] and history(tmp_path) == []


def test_bad_values_are_refused_before_anything_runs(tmp_path: Path) -> None:
    fake = setup(tmp_path, {}, NOT_HELD)
    with tracker(tmp_path, fake) as t:
        for kwargs in ({"key": "two words"}, {"retry": -1}, {"retry": True}, {"settle_delay": 1.0}):
            with pytest.raises(slurm_dsl.InvalidInput):
                list(run_settled(t, Op.HOLD, ["7"], time.time() + 60, **kwargs))
    assert calls_made(fake) == []
    assert history(tmp_path) == []


def test_a_retry_that_cannot_start_still_reports_the_run_that_happened(tmp_path: Path) -> None:
    fake = setup(tmp_path, {"hold": KILLED}, NOT_HELD)
    squeue = fake.parent / "squeue"
    count = tmp_path / "lookups"
    # From the 4th lookup on (the retry's array check), slurmctld cannot be reached.
    squeue.write_text(squeue.read_text().replace("#!/bin/sh\n", (
        "#!/bin/sh\n"
        f"case $1 in --version) ;; *) echo x >> '{count}'; if [ $(wc -l < '{count}') -ge 4 ]; then\n"
        "  echo 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)' >&2; exit 1; fi ;; esac\n"
    ), 1))
    seen: List[Outcome] = []
    with tracker(tmp_path, fake) as t, pytest.raises(slurm_dsl.LookupFailed):
        for event in run_settled(t, Op.HOLD, ["7"], time.time() + 60, retry=2, settle_delay=DELAY):
            assert isinstance(event, Ran)
            seen.append(event.outcome)
    assert [(o.result, o.effect) for o in seen] == [(Result.UNKNOWN, Verdict.ABSENT)]
    assert len(history(tmp_path)) == 1


# -- the API and the command line ---------------------------------------------------------------


def test_the_api_returns_a_present_and_raises_an_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = setup(tmp_path, {"hold": KILLED}, HELD)
    monkeypatch.setenv("SLURM_DSL_SQUEUE", str(fake.parent / "squeue"))
    ledger = str(tmp_path / "ledger.sqlite3")
    out = slurm_dsl.hold("7", timeout=60, scontrol=str(fake), ledger=ledger, settle=True, settle_delay=DELAY)
    assert (out.result, out.effect) == (Result.UNKNOWN, Verdict.PRESENT)
    fake = setup(tmp_path / "b", {"release": KILLED}, HELD)  # held: a release's effect is absent
    monkeypatch.setenv("SLURM_DSL_SQUEUE", str(fake.parent / "squeue"))
    with pytest.raises(OutcomeUnknown) as err:
        slurm_dsl.release("7", timeout=60, scontrol=str(fake), ledger=ledger, settle=True, settle_delay=DELAY)
    assert err.value.outcome is not None and err.value.outcome.effect is Verdict.ABSENT


def test_run_ops_with_a_key_keeps_the_order_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = setup(tmp_path, {}, HELD + "8|PENDING|0|0|0|JobHeldAdmin\n")  # as the holds left them
    monkeypatch.setenv("SLURM_DSL_SQUEUE", str(fake.parent / "squeue"))
    ledger = str(tmp_path / "ledger.sqlite3")
    kw = {"timeout": 60.0, "scontrol": str(fake), "ledger": ledger, "key": "k", "one_by_one": True}
    first = slurm_dsl.run_ops("hold", ["8", "7", "8"], **kw)  # type: ignore[arg-type]
    again = slurm_dsl.run_ops("hold", ["7", "8"], **kw)  # type: ignore[arg-type]
    assert [o.job_id for o in first] == ["8", "7"] and [o.job_id for o in again] == ["7", "8"]
    assert all(o.result is Result.OK for o in first + again)
    assert [c for c in calls_made(fake) if c.startswith("hold")] == ["hold 8", "hold 7"]


def test_the_cli_prints_the_effect_and_exits_by_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = setup(tmp_path, {"hold": KILLED}, HELD)
    monkeypatch.setenv("SLURM_DSL_SQUEUE", str(fake.parent / "squeue"))
    base = ["--scontrol", str(fake), "--ledger", str(tmp_path / "ledger.sqlite3")]
    code, out, _ = cli([*base, "hold", "7", "--timeout", "60", "--settle", "--settle-delay", "2", "--json"])
    row = json.loads(out)
    assert (code, row["result"], row["effect"]) == (0, "unknown", "present")
    code, out, _ = cli([*base, "hold", "7", "--timeout", "60", "--key", "n-1"])
    assert code == 15  # a key alone settles nothing of this run
    code, out, _ = cli([*base, "hold", "7", "--timeout", "60", "--key", "n-1", "--json"])
    row = json.loads(out)  # the same key again: the earlier run settles as present, nothing runs
    assert (code, row["result"], row["effect"], row["calls"]) == (0, "unknown", "present", [])
    assert "took effect" not in row["detail"] and "settled present" in row["detail"]
    assert len([c for c in calls_made(fake) if c.startswith("hold")]) == 2
    code, out, _ = cli([*base, "hold", "7", "--timeout", "60"])
    assert "effect" not in out  # without --settle/--retry/--key nothing changes
    code, _, err = cli([*base, "hold", "7", "--timeout", "60", "--key", "a b"])
    assert code == 2 and "a key is 1-128" in err
    code, _, err = cli([*base, "hold", "7", "--timeout", "60", "--retry", "x"])
    assert code == 2 and "--retry takes a whole number" in err
    code, _, err = cli([*base, "hold", "7", "--timeout", "5", "--settle"])
    assert code == 2 and "--settle and --retry need a deadline at least 13 s away" in err
