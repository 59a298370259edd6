"""``slurm-dsl settle``, and what ``history`` and ``ledger status`` show of settling
(docs/contract.md §10, §12), against a real ledger (each backend) and a fake squeue."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import pytest

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import Op, Outcome, RequeueBit, Result
from slurm_dsl.ledger.base import LedgerStore
from slurm_dsl.ledger.choose import open_ledger
from tests.cli_run import cli
from tests.fakes import ended_ago, write_fake_squeue
from tests.ledger_ops import begin_operation, finish_operation

PRIORITY = 4294901657
# squeue's records (id|State|Requeue|RestartCnt|PriorityLong|Reason): 7 held, 8 not, 9 requeued once.
SQUEUE = f"7|RUNNING|0|0|0|JobHeldAdmin\n8|RUNNING|0|0|{PRIORITY}|None\n9|PENDING|0|1|{PRIORITY}|BeginTime\n"


def unknown(ledger: LedgerStore, job: str, op: Op, *, ago: float = 60.0, baseline: Optional[JobInfo] = None,
            result: Result = Result.UNKNOWN) -> int:
    start = ledger.now() - ago
    op_id = begin_operation(ledger, job, op, "0" * 32, start, baseline=baseline,
                                   baseline_at=None if baseline is None else start - 0.2, ends_by=start + 1.0)
    bit = (RequeueBit.MAY_BE_SET if result is Result.UNKNOWN else RequeueBit.CLEAR) if op.requeues else None
    finish_operation(ledger, op_id, Outcome(op, job, result, bit), b"", start + 1.0, ended=ended_ago(ago - 1.0))
    return op_id


@pytest.fixture
def squeue(tmp_path: Path) -> str:
    return str(write_fake_squeue(tmp_path / "sq", SQUEUE))


def lookups(squeue: str) -> int:
    log = Path(squeue).parent / "squeue.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def settle(location: str, squeue: str, *args: str) -> tuple:  # type: ignore[type-arg]
    return cli(["settle", *args, "--ledger", location, "--squeue", squeue, "--lookup", "squeue"])


def rows(out: str) -> List[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in out.splitlines()]


def test_settle_given_jobs_settles_now_and_shows_what_was_settled_earlier(ledger_location: str, squeue: str) -> None:
    base = JobInfo("9", "RUNNING", True, 0, PRIORITY, "None")
    with open_ledger(ledger_location) as ledger:
        hold = unknown(ledger, "7", Op.HOLD)
        # Acknowledged, and the record still shows it: no row (§13.4).  A later hold (the priority
        # again): the unknown hold is read from its baseline.
        ok = unknown(ledger, "7", Op.HOLD, result=Result.OK, ago=30.0, baseline=JobInfo("7", "RUNNING", False, 0, 0,
                                                                                      "JobHeldAdmin"))
        requeue = unknown(ledger, "9", Op.REQUEUE, baseline=base)
    code, out, _ = settle(ledger_location, squeue, "7", "9", "--json")
    # The requeue is present but its flag may be left set (may_be_set): bit_set, never 0 (§12).
    assert code == 14, out
    got = rows(out)
    assert [(r["id"], r["op"], r["effect"], r["settled"]) for r in got] == [
        (hold, "hold", "present", "now"), (requeue, "requeue", "present", "now")]
    assert ok not in [r["id"] for r in got]
    r = got[1]
    assert r["result"] == "unknown" and r["detail"] == "RestartCnt 1 > baseline 0"
    assert r["record"]["restarts"] == 1 and r["by"].startswith("settle, ") and r["settled_at_epoch"] is not None
    assert r["looked_at_epoch"] is not None and r["kind"] == "settle"
    assert lookups(squeue) == 1, "one lookup for every job"
    # Again: nothing new to settle, the same verdicts, said to be earlier; the acknowledged hold,
    # not known saved, is read again (§13.4): that is the one lookup.
    code, out, _ = settle(ledger_location, squeue, "7", "9", "--json")
    assert code == 14 and [(r["effect"], r["settled"]) for r in rows(out)] == [("present", "earlier")] * 2
    assert lookups(squeue) == 2
    with open_ledger(ledger_location) as ledger:
        assert ledger.unsettled(ledger.now()) == []


@pytest.mark.parametrize(("squeue_line", "code", "effect"), [
    (f"7|RUNNING|0|0|{PRIORITY}|None\n", 15, "absent"),  # a hold not on the record, 59 s after its end
    ("", 11, "gone"),
    ("7|RUNNING|0|0|0|JobHeldAdmin\n", 0, "present"),
])
def test_settle_exits_by_the_effect(ledger_location: str, tmp_path: Path, squeue_line: str, code: int,
                                    effect: str) -> None:
    sq = str(write_fake_squeue(tmp_path / "sq1", squeue_line))
    with open_ledger(ledger_location) as ledger:
        unknown(ledger, "7", Op.HOLD)
    got, out, _ = settle(ledger_location, sq, "7")
    assert got == code, out
    assert effect in out.splitlines()[1]


def test_settle_without_jobs_settles_the_last_week_and_the_worst_row_decides(ledger_location: str,
                                                                             squeue: str) -> None:
    with open_ledger(ledger_location) as ledger:
        unknown(ledger, "8", Op.RELEASE, ago=9 * 86400.0)  # older than the week
        unknown(ledger, "7", Op.HOLD)
        unknown(ledger, "8", Op.HOLD, ago=5.0)  # too soon for absent
    code, out, _ = settle(ledger_location, squeue, "--json")
    got = rows(out)
    assert code == 15, out
    assert [(r["job_id"], r["op"], r["effect"], r["settled"]) for r in got] == [
        ("7", "hold", "present", "now"), ("8", "hold", None, "not_yet")]
    code, out, _ = settle(ledger_location, squeue, "--since", "10", "--settle-delay", "2")
    assert code == 15 and "release" in out and "absent" in out, out


def test_a_failed_lookup_settles_nothing(ledger_location: str, tmp_path: Path) -> None:
    sq = str(write_fake_squeue(tmp_path / "sq1", "", exit_code=1,
                               stderr="slurm_load_jobs error: Unable to contact slurm controller (connect failure)"))
    with open_ledger(ledger_location) as ledger:
        unknown(ledger, "7", Op.HOLD)
    code, out, err = settle(ledger_location, sq, "7")
    assert code == 15 and "not_yet" in out and "could not ask" in out and "could not look jobs up" in err
    with open_ledger(ledger_location) as ledger:
        assert len(ledger.unsettled(ledger.now())) == 1


def test_settle_refuses_bad_input_before_anything_runs(tmp_path: Path, squeue: str) -> None:
    missing = str(tmp_path / "none.sqlite3")
    code, _, err = settle(missing, squeue, "12x")
    assert code == 2 and "invalid job id" in err.lower()
    code, _, err = settle(missing, squeue, "7", "--since", "3")
    assert code == 2 and "--since goes only without JOBIDs" in err
    code, _, err = settle(missing, squeue, "--settle-delay", "1")
    assert code == 2 and "at least 2 seconds" in err
    assert lookups(squeue) == 0 and not Path(missing).exists()
    code, _, err = settle(missing, squeue, "7")
    assert code == 1 and "no ledger at" in err


def test_a_job_the_ledger_never_saw(ledger_location: str, squeue: str) -> None:
    with open_ledger(ledger_location) as ledger:
        unknown(ledger, "8", Op.RELEASE, result=Result.OK)  # acknowledged, and still there (8 not held)
    code, out, _ = settle(ledger_location, squeue, "5")
    assert code == 11 and "no record of job 5" in out
    assert lookups(squeue) == 0
    code, out, _ = settle(ledger_location, squeue, "8")
    assert code == 0 and "no unknown operation to settle" in out
    assert lookups(squeue) == 1  # the release read again (§13.4)


def test_settle_records_an_acknowledged_hold_that_a_crash_lost(ledger_location: str, squeue: str) -> None:
    # docs/contract.md §13.4: hold 8 was ok a minute ago; the controller came back without it (8 not
    # held).  settle, given the job or not, records "acknowledged, then lost" and exits as unknown.
    with open_ledger(ledger_location) as ledger:
        lost = unknown(ledger, "8", Op.HOLD, result=Result.OK)
        kept = unknown(ledger, "7", Op.HOLD, result=Result.OK)  # 7 is held: no row
    code, out, _ = settle(ledger_location, squeue, "--json")
    assert code == 15, out
    (row,) = rows(out)
    assert (row["id"], row["result"], row["effect"], row["settled"]) == (lost, "ok", "absent", "now")
    assert row["detail"].startswith("acknowledged, then lost") and lookups(squeue) == 1
    code, out, _ = settle(ledger_location, squeue, "8", "7", "--json")  # found before: shown as earlier
    assert code == 15 and [(r["id"], r["effect"], r["settled"]) for r in rows(out)] == [(lost, "absent", "earlier")]
    assert kept not in [r["id"] for r in rows(out)]


def test_settle_help_teaches_with_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    from slurm_dsl.admin.cli import main

    with pytest.raises(SystemExit) as done:  # argparse's own exit, after printing the help
        main(["settle", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "slurm-dsl settle 4211 4212 --json" in out and "--settle-delay" in out and "SlurmUser" in out


# -- history and ledger status -----------------------------------------------------------------


def test_history_shows_the_baseline_and_the_verdict(ledger_location: str, squeue: str) -> None:
    base = JobInfo("9", "RUNNING", True, 0, PRIORITY, "None")
    with open_ledger(ledger_location) as ledger:
        unknown(ledger, "9", Op.REQUEUE, baseline=base)
    code, out, _ = cli(["history", "9", "--ledger", ledger_location])
    assert code == 0
    assert f"baseline: RUNNING, RestartCnt 0, PriorityLong {PRIORITY}, Requeue=1" in out
    assert "verdict:" not in out  # not settled yet
    settle(ledger_location, squeue, "9")
    code, out, _ = cli(["history", "9", "--ledger", ledger_location])
    line = next(x for x in out.splitlines() if "verdict:" in x)
    assert "verdict: present (settled " in line and "RestartCnt 1 > baseline 0" in line and "by settle, " in line
    code, out, _ = cli(["history", "9", "--ledger", ledger_location, "--json"])
    op = next(r for r in rows(out) if r["kind"] == "operation")
    assert op["baseline"]["restarts"] == 0 and op["effect"] == "present"
    assert op["settlement"]["verdict"] == "present"


def test_ledger_status_counts_the_unsettled_by_age(ledger_location: str, squeue: str) -> None:
    with open_ledger(ledger_location) as ledger:
        unknown(ledger, "7", Op.HOLD)
        unknown(ledger, "8", Op.HOLD, ago=2 * 86400.0)
    code, out, _ = cli(["ledger", "status", "--ledger", ledger_location, "--json"])
    status = json.loads(out)
    assert code == 0 and status["unsettled"] == {"count": 2, "by_age": {"<1h": 1, "<1d": 0, "<1w": 1, "older": 0}}
    _, out, _ = cli(["ledger", "status", "--ledger", ledger_location])
    assert "unknown operations without a verdict: 2, by age: <1h 1, <1d 0, <1w 1, older 0" in out
    settle(ledger_location, squeue)
    _, out, _ = cli(["ledger", "status", "--ledger", ledger_location])
    assert "unknown operations without a verdict: 0" in out  # 7 present, 8 absent


def test_the_grammar_keeps_the_settling_defaults() -> None:
    """The parser imports no wing that acts, so it spells run.settling's defaults itself."""
    from slurm_dsl.admin.commands import settle, sweep
    from slurm_dsl.run import settling

    assert (sweep.DEFAULT_SETTLE_LIMIT, settle.SINCE_DAYS) == (settling.DEFAULT_LIMIT, settling.SINCE_DAYS)


def test_ledger_status_shows_the_verdicts_of_the_last_sweep(ledger_location: str, squeue: str,
                                                            tmp_path: Path) -> None:
    from tests.fakes import write_fake

    with open_ledger(ledger_location) as ledger:
        unknown(ledger, "7", Op.HOLD)
    fake = write_fake(tmp_path / "bin", {})
    code, out, _ = cli(["sweep", "--ledger", ledger_location, "--scontrol", str(fake), "--squeue", squeue,
                        "--lookup", "squeue"])
    assert code == 0 and "unknown operations: 1 looked at: 1 present (1 verdict(s) written)" in out, out
    code, out, _ = cli(["ledger", "status", "--ledger", ledger_location])
    assert "; verdicts: 1 present" in next(x for x in out.splitlines() if x.startswith("last sweep:")), out
