"""The admin's view: ``history``, ``ledger status``, ``ledger prune`` and what they rest on (who ran
each operation, the last sweep, the one way past the append-only triggers), against real SQLite
files and real MariaDB databases (``path`` is either: ``ledger_location``); operations through
the real tracker with a fake scontrol where one must run."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytest

import slurm_dsl.ledger.sqlite as sqlite_module
from slurm_dsl.admin.render import ago, history_lines
from slurm_dsl.admin.view import history_json
from slurm_dsl.core import ledger_rules as rules
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import Call, CallOutcome, InvalidInput, LedgerError, Op, Outcome, Reason, RequeueBit, Result
from slurm_dsl.ledger.base import LedgerStore
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.records import JobObject, PruneResult, iso_utc
from slurm_dsl.run.sweep import sweep
from slurm_dsl.run.tracked import Tracker, current_actor
from tests.cli_run import cli
from tests.fakes import calls_made, write_fake, write_fake_squeue
from tests.ledger_backends import RAW_ERRORS, Raw, checkpointed, is_mariadb, module, schema, shown, store_class
from tests.ledger_ops import acquire_lease, begin_operation, finish_operation, set_bit

ROOT = Path(__file__).resolve().parents[2]
CLEAR, MAY, SET = RequeueBit.CLEAR, RequeueBit.MAY_BE_SET, RequeueBit.SET
DAY = 86400.0
NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z
OLD = NOW - 200 * DAY


def ok_outcome(op: Op, job: str) -> Outcome:
    numbers = (1, 2, 3) if op in (Op.REQUEUE, Op.REQUEUE_HOLD) else (1,)
    calls = tuple(Call(n, 0, "0", b"", CallOutcome.SUCCESS, None, None) for n in numbers)
    return Outcome(op, job, Result.OK, CLEAR if op in (Op.REQUEUE, Op.REQUEUE_HOLD) else None, None, calls, 0)


UNKNOWN_REQUEUE = Outcome(
    Op.REQUEUE, "1", Result.UNKNOWN, MAY, Reason.TIMED_OUT,
    (Call(1, 124, "124", b"", CallOutcome.UNKNOWN, None, Reason.TIMED_OUT),
     Call(3, 1, "1", b"", CallOutcome.REJECTED, "Job has already finished", None)),
    1,
)


def unknown_requeue(job: str) -> Outcome:
    return Outcome(Op.REQUEUE, job, Result.UNKNOWN, MAY)


def record(ledger: LedgerStore, job: str, op: Op, started: float, outcome: Optional[Outcome] = None,
           actor: str = "") -> int:
    """One operation through the store, begun at ``started`` and finished a second later with
    ``outcome`` (default: ok); its nonce is ``started`` in hex."""
    op_id = begin_operation(ledger, job, op, f"{int(started):032x}", started, actor=actor)
    finish_operation(ledger, op_id, outcome or ok_outcome(op, job), b"stderr", started + 1)
    return op_id


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(str(path), isolation_level=None)


@pytest.fixture
def path(ledger_location: str) -> str:
    """The ledger, once per backend (an SQLite file, a MariaDB database's URL)."""
    return ledger_location


# -- the pure rules -------------------------------------------------------------------------------


BEFORE = 1000.0


@pytest.mark.parametrize(
    ("row", "allowed"),
    [
        (rules.PruneRow(999.0, False, CLEAR, False), True),
        (rules.PruneRow(1000.0, False, CLEAR, False), False),  # not older than the cutoff
        (rules.PruneRow(None, False, CLEAR, False), False),  # unfinished: a crash's trace
        (rules.PruneRow(1.0, True, CLEAR, False), False),  # the object's newest row
        (rules.PruneRow(1.0, False, MAY, False), False),  # the bit may be set
        (rules.PruneRow(1.0, False, SET, False), False),
        (rules.PruneRow(1.0, False, CLEAR, True), False),  # an operation or a sweep is on the job
    ],
)
def test_may_prune(row: rules.PruneRow, allowed: bool) -> None:
    assert rules.may_prune(row, BEFORE) is allowed


@pytest.mark.parametrize("days", [0, -1, True, 1.5, "7"])
def test_prune_needs_a_whole_number_of_days_of_at_least_one(days: Any) -> None:
    with pytest.raises(InvalidInput):
        rules.prune_before(NOW, days)


def test_prune_before() -> None:
    assert rules.prune_before(NOW, 1) == NOW - DAY
    assert rules.prune_before(NOW, 90) == NOW - 90 * DAY


@pytest.mark.parametrize(
    ("age", "bucket"),
    [(-5.0, "<1h"), (0.0, "<1h"), (3599.0, "<1h"), (3600.0, "<1d"), (DAY - 1, "<1d"), (DAY, "<1w"),
     (7 * DAY - 1, "<1w"), (7 * DAY, "older"), (1e12, "older")],
)
def test_age_buckets(age: float, bucket: str) -> None:
    assert rules.age_bucket(age) == bucket


def test_ages_names_every_bucket() -> None:
    assert rules.ages([NOW - 10, NOW - 20, NOW - 2 * DAY], NOW) == {"<1h": 2, "<1d": 0, "<1w": 1, "older": 0}
    assert rules.ages([], NOW) == {"<1h": 0, "<1d": 0, "<1w": 0, "older": 0}


@pytest.mark.parametrize(("seconds", "text"), [(5, "5 s"), (119, "119 s"), (600, "10 min"), (3 * 3600, "3.0 h"),
                                                (3 * DAY, "3.0 d")])
def test_ago(seconds: float, text: str) -> None:
    assert ago(seconds) == text


def test_history_of_a_job_never_seen_is_one_no_record_line() -> None:
    records = history_json("77", None, [])
    assert records == [{"kind": "no_record", "job_id": "77"}]
    assert history_lines(records) == ["no record of job 77"]


def test_an_object_without_operations_says_so() -> None:
    obj = JobObject("9", MAY, "sweep --orphans: finished (COMPLETED) at Requeue=1, not tracked; watched", NOW, 0, 0, "")
    lines = history_lines(history_json("9", obj, []))
    assert lines[0].startswith("job 9: bit may_be_set since 2023-11-14T22:13:20Z (sweep --orphans")
    assert "no operation recorded" in lines[1]


def test_iso_utc() -> None:
    assert iso_utc(NOW) == "2023-11-14T22:13:20Z"
    assert iso_utc(0) == "1970-01-01T00:00:00Z"


# -- who ran it -----------------------------------------------------------------------------------


def test_the_actor_names_uid_user_host_and_pid(monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd
    import socket

    monkeypatch.delenv("SUDO_USER", raising=False)
    uid = os.getuid()
    assert current_actor() == (f"uid {uid} ({pwd.getpwuid(uid).pw_name}) on {socket.gethostname()},"
                               f" pid {os.getpid()}")
    monkeypatch.setenv("SUDO_USER", "alice")
    assert current_actor().endswith(", sudo from alice")
    for forged in ("", "x\n, sudo from bob", "a b", "-rf"):
        monkeypatch.setenv("SUDO_USER", forged)
        assert "sudo" not in current_actor()


def test_begin_records_the_actor_and_keeps_it(path: str) -> None:
    with open_ledger(path) as ledger:
        one = record(ledger, "1", Op.HOLD, NOW, actor="uid 0 (root) on ctl1, pid 42")
        two = begin_operation(ledger, "1", Op.HOLD, "b" * 32, NOW + 5)  # the old signature: unknown
        entries = ledger.history("1")
    assert [(e.id, e.actor) for e in entries] == [(one, "uid 0 (root) on ctl1, pid 42"), (two, None)]
    with Raw(path) as conn:
        for sql in (f"UPDATE history SET actor = 'someone else' WHERE id = {two}",  # not even while unfinished
                    f"UPDATE history SET actor = NULL WHERE id = {one}"):
            with pytest.raises(RAW_ERRORS, match="append-only"):
                conn.execute(sql)


def test_the_tracker_and_the_sweeper_record_who_ran_it(tmp_path: Path, path: str) -> None:
    fake = write_fake(tmp_path / "bin", {})
    with Tracker(str(path), scontrol=str(fake)) as t:
        t.run(Op.REQUEUE, "5", time.time() + 10)
        with open_ledger(path) as ledger:  # leave job 5 may_be_set, as a crash would
            begin_operation(ledger, "5", Op.REQUEUE, "c" * 32, time.time(), actor=t.actor)
        report = sweep(t, _FoundRunningAtRequeue1())
    assert [s.done.value for s in report.swept] == ["restored"]
    with open_ledger(path) as ledger:
        actors = [e.actor for e in ledger.history("5")]
    assert actors[0] == actors[1] == current_actor() and f"pid {os.getpid()}" in actors[0]
    assert actors[2] == current_actor() + ", sweep"
    assert calls_made(fake)[-1] == "update JobId=5 Requeue=0"


class _FoundRunningAtRequeue1:
    name = "memory"

    def jobs(self, job_ids: Sequence[str]) -> Dict[str, Optional[JobInfo]]:
        return {j: JobInfo(j, "RUNNING", True, 0, 100, "None") for j in job_ids}


# -- the triggers, the migration ------------------------------------------------------------------


def three_jobs(path: str) -> Dict[str, List[int]]:
    """Job 1 clear with three finished operations; job 2 may_be_set after an unknown requeue;
    job 3 clear with one."""
    with open_ledger(path) as ledger:
        ids = {"1": [record(ledger, "1", Op.HOLD, OLD + i) for i in range(3)]}
        ids["2"] = [record(ledger, "2", Op.HOLD, OLD), record(ledger, "2", Op.REQUEUE, OLD + 1, unknown_requeue("2"))]
        ids["3"] = [record(ledger, "3", Op.HOLD, OLD)]
    return ids


def test_a_plain_delete_and_a_change_to_a_finished_row_are_still_refused(path: str) -> None:
    ids = three_jobs(path)
    with Raw(path) as conn:
        for sql in ("DELETE FROM history",
                    f"DELETE FROM history WHERE id = {ids['1'][0]}",  # prunable, but not through prune
                    f"UPDATE history SET result = 'rejected' WHERE id = {ids['1'][0]}",
                    f"UPDATE history SET finished_at = 1 WHERE id = {ids['1'][1]}"):
            with pytest.raises(RAW_ERRORS, match="append-only"):
                conn.execute(sql)
        assert conn.execute("SELECT count(*) FROM history") == [(6,)]


def test_even_inside_prune_the_file_refuses_what_prune_must_never_remove(path: str) -> None:
    ids = three_jobs(path)
    with open_ledger(path) as ledger:
        unfinished = begin_operation(ledger, "1", Op.HOLD, "d" * 32, OLD + 10)
    with Raw(path) as conn:
        conn.begin()
        conn.start_pruning()
        # Unfinished (and job 1's newest now); a row of an object that is not clear; job 3's only row.
        for doomed in (unfinished, ids["2"][0], ids["3"][0]):
            with pytest.raises(RAW_ERRORS, match="append-only"):
                conn.execute(f"DELETE FROM history WHERE id = {doomed}")
        conn.execute(f"DELETE FROM history WHERE id = {ids['1'][0]}")  # an old finished row of a clear job
        conn.rollback()


def test_a_prune_that_dies_mid_transaction_leaves_the_history_append_only(path: str) -> None:
    ids = three_jobs(path)
    conn = Raw(path)
    conn.begin()
    conn.start_pruning()
    conn.execute(f"DELETE FROM history WHERE id = {ids['1'][0]}")
    conn.close()  # never committed: as if the process died here
    with Raw(path) as conn:
        assert conn.execute("SELECT count(*) FROM pruning") == [(0,)]
        assert conn.execute(f"SELECT count(*) FROM history WHERE id = {ids['1'][0]}") == [(1,)]
        with pytest.raises(RAW_ERRORS, match="append-only"):
            conn.execute(f"DELETE FROM history WHERE id = {ids['1'][0]}")


def test_a_version_1_ledger_is_migrated_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"  # SQLite's schema 1 (MariaDB's starts where SQLite's 2 is)
    conn = raw(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    for statement in sqlite_module.MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO objects (job_id, bit, why, updated_at)"
                 " VALUES ('8', 'may_be_set', 'requeue x started', ?)", (OLD,))
    calls = [{"number": 1, "status": 0, "status_text": "0", "outcome": "success", "message": None, "reason": None}]
    conn.execute("INSERT INTO history (job_id, op, nonce, started_at, prior_bit, finished_at, result, requeue_bit,"
                 " bit_after, detail, exit_status, calls, stderr, stderr_len)"
                 " VALUES ('8', 'hold', 'aa', ?, 'clear', ?, 'ok', NULL, 'clear', '', 0, ?, x'00', 1)",
                 (OLD, OLD + 1, json.dumps(calls)))
    conn.execute("INSERT INTO history (job_id, op, nonce, started_at, prior_bit) VALUES ('8', 'requeue', 'bb', ?,"
                 " 'clear')", (OLD + 2,))
    conn.execute("COMMIT")
    conn.close()

    with open_ledger(path) as ledger:
        assert ledger.schema_version() == len(sqlite_module.MIGRATIONS) == 9
        obj = ledger.get("8")
        assert obj is not None and obj.bit is MAY and obj.why == "requeue x started"
        hold, requeue = ledger.history("8")
        assert (hold.op, hold.result, hold.calls[0].outcome, hold.actor) == (Op.HOLD, Result.OK, "success", None)
        assert (requeue.op, requeue.finished, requeue.actor) == (Op.REQUEUE, False, None)
        finish_operation(ledger, requeue.id, Outcome(Op.REQUEUE, "8", Result.OK, CLEAR), b"", OLD + 3)
        new = record(ledger, "8", Op.HOLD, NOW, actor="me")
        assert ledger.history("8")[-1].actor == "me" and ledger.history("8")[-1].id == new
    conn = raw(path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM history")
    conn.close()
    code, out, _ = cli(["history", "8", "--ledger", str(path)])
    assert code == 0
    rows = [line for line in out.splitlines() if line.strip().split()[0].isdigit()]
    assert [r.split()[-1] for r in rows[:2]] == ["unknown", "unknown"] and rows[2].endswith("me")


# -- history --------------------------------------------------------------------------------------


def test_history_human_and_json(path: str) -> None:
    with open_ledger(path) as ledger:
        first = record(ledger, "1", Op.REQUEUE, NOW, UNKNOWN_REQUEUE, actor="uid 0 (root) on ctl1, pid 7")
        second = record(ledger, "1", Op.RESTORE, NOW + 60, ok_outcome(Op.RESTORE, "1"), actor="uid 0 (root) on ctl1,"
                        " pid 8, sweep")
        running = begin_operation(ledger, "1", Op.HOLD, "e" * 32, NOW + 120, actor="uid 1000 (alice) on ctl1, pid 9")
    code, out, err = cli(["history", "1", "--ledger", str(path)])
    assert (code, err) == (0, "")
    lines = out.splitlines()
    restore_nonce = f"{int(NOW + 60):032x}"
    assert lines[0] == (f"job 1: bit may_be_set since 2023-11-14T22:14:21Z (restore {restore_nonce}: ok; cleared, not"
                        " yet known saved by slurmctld: watched until it is)")
    assert lines[1].split() == ["ID", "STARTED", "(UTC)", "SECS", "OP", "RESULT", "REQUEUE-BIT", "BIT", "BEFORE", "->",
                                "AFTER", "BY"]
    assert lines[2].split() == [str(first), "2023-11-14T22:13:20Z", "1.0", "requeue", "unknown", "may_be_set", "clear",
                                "->", "may_be_set", "uid", "0", "(root)", "on", "ctl1,", "pid", "7"]
    assert lines[3].strip() == "call 1: 124 unknown [timed_out]"
    assert lines[4].strip() == "call 3: 1 rejected: Job has already finished"
    assert lines[5].strip() == "why: timed_out"
    assert lines[6].split()[:9] == [str(second), "2023-11-14T22:14:20Z", "1.0", "restore", "ok", "-", "may_be_set",
                                    "->", "may_be_set"]  # cleared, watched until saved (§13.3)
    assert lines[6].endswith("pid 8, sweep")
    assert lines[8].split()[:9] == [str(running), "2023-11-14T22:15:20Z", "-", "hold", "unfinished", "-",
                                    "may_be_set", "->", "?"]
    assert lines[9].strip().startswith("not finished:")

    code, out, _ = cli(["history", "1", "--json", "--ledger", str(path)])
    assert code == 0
    obj, *ops = [json.loads(line) for line in out.splitlines()]
    watched = "cleared, not yet known saved by slurmctld: watched until it is"
    assert obj == {"kind": "object", "job_id": "1", "bit": "may_be_set",
                   "why": f"restore {restore_nonce}: ok; {watched}",
                   "since": "2023-11-14T22:14:21Z", "since_epoch": NOW + 61, "lookup_failures": 0, "lookup_error": None}
    assert [o["kind"] for o in ops] == ["operation"] * 3 and [o["id"] for o in ops] == [first, second, running]
    one = ops[0]
    assert {k: one[k] for k in ("job_id", "op", "started_at", "started_at_epoch", "finished_at", "finished_at_epoch",
                                 "result", "requeue_bit", "bit_before", "bit_after", "reason", "exit_status",
                                 "actor")} == {
        "job_id": "1", "op": "requeue", "started_at": "2023-11-14T22:13:20Z", "started_at_epoch": NOW,
        "finished_at": "2023-11-14T22:13:21Z", "finished_at_epoch": NOW + 1, "result": "unknown",
        "requeue_bit": "may_be_set", "bit_before": "clear", "bit_after": "may_be_set", "reason": "timed_out",
        "exit_status": 1, "actor": "uid 0 (root) on ctl1, pid 7"}
    assert one["nonce"] == f"{int(NOW):032x}" and one["stderr"] == "stderr" and one["stderr_len"] == 6
    assert one["calls"] == [
        {"number": 1, "status": 124, "outcome": "unknown", "message": None, "reason": "timed_out"},
        {"number": 3, "status": 1, "outcome": "rejected", "message": "Job has already finished", "reason": None}]
    unfinished = ops[2]
    assert (unfinished["result"], unfinished["finished_at"], unfinished["finished_at_epoch"]) == (None, None, None)
    assert unfinished["calls"] == [] and unfinished["actor"] == "uid 1000 (alice) on ctl1, pid 9"


def test_history_of_several_jobs_and_of_jobs_never_seen(path: str) -> None:
    with open_ledger(path) as ledger:
        record(ledger, "1", Op.HOLD, NOW)
    code, out, _ = cli(["history", "3", "1", "3", "--ledger", str(path)])
    assert code == 0, "at least one job has a record"
    assert out.splitlines()[0] == "no record of job 3" and out.splitlines()[1].startswith("job 1: bit clear")
    assert out.count("no record of job 3") == 1, "each job once"
    code, out, _ = cli(["history", "3", "4", "--json", "--ledger", str(path)])
    assert code == 11, "none has: the ledger does not know them"
    assert [json.loads(line) for line in out.splitlines()] == [{"kind": "no_record", "job_id": "3"},
                                                              {"kind": "no_record", "job_id": "4"}]


@pytest.mark.parametrize("bad", ["0", "12_3", "1,2", "-5", "abc", "4294967295"])
def test_history_refuses_a_bad_job_id(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "ledger.sqlite3"  # refused before any ledger is read: one backend says it
    with open_ledger(path):
        pass
    code, out, err = cli(["history", "1", bad, "--ledger", str(path)])
    assert (code, out) == (2, "") and err.startswith("slurm-dsl: ")


@pytest.mark.parametrize("argv", [["history", "1"], ["ledger", "status"], ["ledger", "prune", "--older-than", "9"]])
def test_admin_commands_never_create_a_ledger(tmp_path: Path, argv: List[str]) -> None:
    missing = tmp_path / "typo" / "ledger.sqlite3"
    code, out, err = cli([*argv, "--ledger", str(missing)])
    assert (code, out) == (1, "") and f"no ledger at {missing}" in err
    assert not missing.parent.exists()


# -- ledger status --------------------------------------------------------------------------------


def test_status_human_and_json(path: str, tmp_path: Path) -> None:
    now = time.time()
    with open_ledger(path) as ledger:
        record(ledger, "1", Op.HOLD, now - 30 * DAY)  # clear
        record(ledger, "2", Op.REQUEUE, now - 10 * DAY, unknown_requeue("2"))  # older
        record(ledger, "3", Op.REQUEUE, now - 2 * DAY, Outcome(Op.REQUEUE, "3", Result.BIT_SET, SET))  # <1w
        record(ledger, "4", Op.REQUEUE, now - 600, unknown_requeue("4"))  # <1h
        ledger.lookup_failed("4", "squeue: Unable to contact slurm controller", now - 300)
    code, out, err = cli(["ledger", "status", "--json", "--ledger", str(path)])
    assert (code, err) == (0, ""), "exit 0 whatever it finds: the sweep is the alarm"
    status = json.loads(out)
    assert status["kind"] == "status" and status["ledger"] == shown(path) and status["schema"] == schema(path)
    assert status["history_rows"] == 4 and status["backing_off"] == 1 and status["not_clear"] == 3
    assert status["objects"] == {"clear": 1, "may_be_set": 2, "set": 1}
    assert status["not_clear_by_age"] == {"<1h": 1, "<1d": 0, "<1w": 1, "older": 1}
    oldest = status["oldest_not_clear"]
    assert (oldest["job_id"], oldest["bit"], oldest["why"]) == ("2", "may_be_set",
                                                                f"requeue {int(now - 10 * DAY):032x}: unknown")
    assert oldest["since_epoch"] == pytest.approx(now - 10 * DAY + 1) and oldest["age_seconds"] >= 10 * DAY - 1
    assert oldest["since"] == iso_utc(now - 10 * DAY + 1)
    assert status["last_sweep"] is None

    code, out, _ = cli(["ledger", "status", "--ledger", str(path)])
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == f"ledger {shown(path)} (schema {schema(path)}): 4 history row(s)"
    assert lines[1] == "objects: 1 clear, 2 may_be_set, 1 set"
    assert lines[2] == "not clear, by when their bit last changed: <1h 1, <1d 0, <1w 1, older 1"
    assert lines[3].startswith("oldest not clear: job 2 may_be_set since ") and "10.0 d ago" in lines[3]
    assert lines[4] == "lookup back-off: 1 object(s) whose last lookup failed"
    assert lines[5] == "unfinished operations: none"
    assert lines[6].startswith("unknown operations without a verdict: ")
    assert lines[7].startswith("last sweep: none recorded")


def test_a_sweep_is_recorded_for_status_and_a_dry_run_is_not(path: str, tmp_path: Path) -> None:
    fake = write_fake(tmp_path / "bin", {})
    with open_ledger(path) as ledger:
        record(ledger, "1", Op.REQUEUE, NOW, unknown_requeue("1"))
        record(ledger, "2", Op.REQUEUE, NOW, unknown_requeue("2"))
    # 1 is gone, 2 already shows Requeue=0, 3 shows Requeue=1 and the ledger does not track it.
    squeue = write_fake_squeue(tmp_path / "sq", "2|RUNNING|0|0|1|None\n3|RUNNING|1|0|1|None\n")
    base = ["sweep", "--ledger", str(path), "--scontrol", str(fake), "--squeue", str(squeue), "--lookup", "squeue",
            "--json"]
    code, out, _ = cli([*base, "--dry-run"])
    assert code == 0
    with open_ledger(path) as ledger:
        assert ledger.last_sweep() is None
    before = time.time()
    code, out, _ = cli([*base, "--orphans"])
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    # sweep --json: every line says what it is, and keeps every key it had.
    assert [(r["kind"], r.get("job_id")) for r in rows] == [("job", "1"), ("job", "2"), ("orphan", "3"),
                                                           ("summary", None)]
    assert rows[0]["done"] == rows[1]["done"] == "cleared" and rows[2]["orphan"] is True
    assert {"why", "restore"} <= set(rows[0]) and rows[2]["state"] == "RUNNING"
    assert {"summary", "lookup", "lookup_error", "orphans", "not_clear", "dry_run", "seconds"} <= set(rows[3])
    with open_ledger(path) as ledger:
        last = ledger.last_sweep()
    assert last is not None and before <= last.started_at <= last.finished_at <= time.time()
    assert last.summary == {"counts": {"cleared": 2}, "settled": True, "lookup_error": None,
                            "orphans": 1, "fixed_orphans": []}
    code, out, _ = cli(["ledger", "status", "--ledger", str(path), "--json"])
    sweep_status = json.loads(out)["last_sweep"]
    assert sweep_status["summary"] == last.summary and sweep_status["finished_at"] == iso_utc(last.finished_at)
    code, out, _ = cli(["ledger", "status", "--ledger", str(path)])
    assert out.splitlines()[-1].startswith(f"last sweep: {iso_utc(last.finished_at)} (")
    assert out.splitlines()[-1].endswith("2 cleared; settled")
    assert calls_made(fake) == [], "nothing to restore"


def test_a_failed_lookup_sweep_is_recorded_as_not_settled(path: str, tmp_path: Path) -> None:
    fake = write_fake(tmp_path / "bin", {})
    with open_ledger(path) as ledger:
        record(ledger, "1", Op.REQUEUE, NOW, unknown_requeue("1"))
    squeue = write_fake_squeue(tmp_path / "sq", "", exit_code=1,
                               stderr="slurm_load_jobs error: Unable to contact slurm controller (connect failure)")
    code, _, _ = cli(["sweep", "--ledger", str(path), "--scontrol", str(fake), "--squeue", str(squeue), "--lookup",
                      "squeue"])
    assert code == 15
    code, out, _ = cli(["ledger", "status", "--ledger", str(path)])
    assert code == 0
    assert "1 lookup_failed; NOT settled; lookup failed: " in out.splitlines()[-1]


# -- ledger prune ---------------------------------------------------------------------------------


def populate(path: str) -> Dict[str, List[int]]:
    """History for the prune rules, some of it older than 90 days: per job, its row ids oldest first."""
    now = time.time()
    old = now - 200 * DAY
    with open_ledger(path) as ledger:
        ids: Dict[str, List[int]] = {}
        # 1: clear, three old rows, then a recent one: the three old ones go.
        ids["1"] = [record(ledger, "1", Op.HOLD, old + i) for i in range(3)] + [record(ledger, "1", Op.HOLD, now)]
        # 2: clear, only old rows: all but the newest go.
        ids["2"] = [record(ledger, "2", Op.HOLD, old + i) for i in range(3)]
        # 3: old rows, but its bit may be set: nothing goes.
        ids["3"] = [record(ledger, "3", Op.HOLD, old), record(ledger, "3", Op.REQUEUE, old + 1, unknown_requeue("3"))]
        # 4: clear, an old row, then one that never finished (a crash): the finished one goes, the trace stays.
        ids["4"] = [record(ledger, "4", Op.HOLD, old), begin_operation(ledger, "4", Op.HOLD, "f" * 32, old + 1)]
        # 5: clear and old, but someone holds its lease: nothing goes.
        ids["5"] = [record(ledger, "5", Op.HOLD, old + i) for i in range(2)]
        assert acquire_lease(ledger, "5", "an operation", now, 600)
        # 6: clear, rows only a little old: nothing goes at 90 days.
        ids["6"] = [record(ledger, "6", Op.HOLD, now - 10 * DAY + i) for i in range(2)]
    return ids


def left(path: str) -> Dict[str, List[int]]:
    with open_ledger(path) as ledger:
        return {job: [e.id for e in ledger.history(job)] for job in "123456"}


def test_prune_removes_only_old_finished_rows_of_settled_unleased_objects(path: str) -> None:
    ids = populate(path)
    before = rules.prune_before(time.time(), 90)
    with open_ledger(path) as ledger:
        assert ledger.prune(before, time.time(), dry_run=True) == PruneResult(6, 3, None)
        assert left(path) == ids, "a dry run removes nothing"
        assert ledger.prune(before, time.time()) == PruneResult(6, 3, checkpointed(path))
        if not is_mariadb(path):
            assert os.path.getsize(str(path) + "-wal") == 0, "checkpointed (TRUNCATE)"
        assert ledger.prune(before, time.time()) == PruneResult(0, 0, checkpointed(path)), "nothing more to do"
    assert left(path) == {"1": ids["1"][3:], "2": ids["2"][2:], "3": ids["3"], "4": ids["4"][1:], "5": ids["5"],
                          "6": ids["6"]}
    with Raw(path) as conn:
        assert conn.execute("SELECT count(*) FROM pruning") == [(0,)]
        if not is_mariadb(path):
            assert conn.execute("PRAGMA integrity_check") == [("ok",)]


def test_prune_in_many_small_batches_gives_the_same_answer(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = populate(path)
    monkeypatch.setattr(module(path), "PRUNE_BATCH", 2)
    with open_ledger(path) as ledger:
        assert ledger.prune(rules.prune_before(time.time(), 90), time.time()) == PruneResult(6, 3, checkpointed(path))
    assert left(path)["1"] == ids["1"][3:] and left(path)["3"] == ids["3"]


def test_prune_command_human_json_and_dry_run(path: str) -> None:
    ids = populate(path)
    argv = ["ledger", "prune", "--older-than", "90", "--ledger", str(path)]
    code, out, err = cli([*argv, "--dry-run", "--json"])
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert {k: report[k] for k in ("kind", "dry_run", "removed", "jobs", "older_than_days", "checkpointed")} == {
        "kind": "prune", "dry_run": True, "removed": 6, "jobs": 3, "older_than_days": 90, "checkpointed": None}
    assert report["before_epoch"] == pytest.approx(time.time() - 90 * DAY, abs=60)
    assert report["before"] == iso_utc(report["before_epoch"])
    assert left(path) == ids
    code, out, err = cli(argv)
    assert (code, err) == (0, "")
    assert out.startswith("prune: removed 6 history row(s) of 3 settled job(s), finished before ")
    assert left(path)["1"] == ids["1"][3:]


@pytest.mark.parametrize("days", ["0", "-3", "1.5", "x", ""])
def test_prune_refuses_fewer_than_one_day(tmp_path: Path, days: str) -> None:
    path = str(tmp_path / "ledger.sqlite3")  # refused before the ledger is touched: one backend says it
    ids = populate(path)
    code, out, err = cli(["ledger", "prune", "--older-than", days, "--ledger", str(path)])
    assert (code, out) == (2, "") and "--older-than" in err
    assert left(path) == ids


def test_prune_needs_older_than(tmp_path: Path) -> None:
    code, _, err = cli(["ledger", "prune", "--ledger", str(tmp_path / "ledger.sqlite3")])
    assert code == 2 and "--older-than" in err


def test_prune_leaves_alone_a_job_an_operation_is_running_on(path: str, tmp_path: Path) -> None:
    with open_ledger(path) as ledger:
        old = [record(ledger, "7", Op.HOLD, OLD + i) for i in range(3)]
    # The hold's scontrol waits until prune has run: the operation holds the job's lease all along.
    gate = tmp_path / "gate"
    fake = write_fake(tmp_path / "bin", {"hold": f"while [ ! -e {gate} ]; do sleep 0.02; done; exit 0"})
    outcome: List[Outcome] = []
    with Tracker(str(path), scontrol=str(fake)) as t:
        worker = threading.Thread(target=lambda: outcome.append(t.run(Op.HOLD, "7", time.time() + 20)))
        worker.start()
        try:
            deadline = time.monotonic() + 10
            while not calls_made(fake) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert calls_made(fake) == ["hold 7"]
            with open_ledger(path) as ledger:
                assert ledger.prune(rules.prune_before(NOW, 1), time.time()) == PruneResult(0, 0, checkpointed(path))
        finally:
            gate.touch()
            worker.join(30)
    assert outcome[0].result is Result.OK
    with open_ledger(path) as ledger:
        history = ledger.history("7")
        assert [e.id for e in history[:3]] == old and history[3].finished
        assert ledger.prune(rules.prune_before(time.time(), 1), time.time()) == PruneResult(3, 1, checkpointed(path))
        assert [e.id for e in ledger.history("7")] == [history[3].id]


JOBS = 12


def _worker(path: str, count: int) -> None:
    """The other process of the concurrency test: operations begun and finished as fast as the
    ledger lets it, on the jobs prune is pruning (requeues mark them may_be_set while they run),
    printing each committed step and how many history rows it then sees; then one hold left
    unfinished.  Any error is a traceback and a non-zero exit."""
    with open_ledger(path) as ledger:
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(count):
            job = str(1 + i % JOBS)
            op = Op.REQUEUE if i % 2 else Op.HOLD
            op_id = begin_operation(ledger, job, op, f"{i:032x}", time.time(), actor="worker")
            print(f"begun {op_id} {job}", flush=True)
            time.sleep(0.002)  # its script runs: the write lock is free meanwhile, as it is for real
            finish_operation(ledger, op_id, ok_outcome(op, job), b"", time.time())
            if op.requeues:  # its clear is watched until saved: a sweep clears it, as after a save
                assert acquire_lease(ledger, job, "sweep", time.time(), 10.0)
                assert set_bit(ledger, job, RequeueBit.CLEAR, "sweep: saved", time.time(), owner="sweep")
                ledger.release_lease(job, "sweep")
            print(f"finished {op_id} {job}", flush=True)
            print(f"rows {ledger.count_history()} -", flush=True)
        op_id = begin_operation(ledger, "1", Op.HOLD, "e" * 32, time.time(), actor="worker")
        print(f"begun {op_id} 1", flush=True)


def test_prune_under_a_concurrent_process_loses_nothing_and_keeps_every_newest(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_job = 150
    with open_ledger(path) as ledger:
        pass
    with Raw(path) as conn:  # old history, written fast (one transaction): the hooks allow appending
        conn.begin()
        for j in range(1, JOBS + 1):
            conn.execute("INSERT INTO objects (job_id, bit, why, updated_at) VALUES (?, 'clear', 'old', ?)",
                         (str(j), OLD))
            for i in range(per_job):
                conn.execute("INSERT INTO history (job_id, op, nonce, started_at, prior_bit, finished_at, result,"
                             " bit_after, calls) VALUES (?, 'hold', 'aa', ?, 'clear', ?, 'ok', 'clear', '[]')",
                             (str(j), OLD + i, OLD + i + 1))
        conn.commit()
    monkeypatch.setattr(module(path), "PRUNE_BATCH", 10)  # many short transactions, interleaved with the worker's

    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from tests.admin.test_view import _worker; _worker(sys.argv[1], 400)",
         str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT),
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline() == "ready\n"
    proc.stdin.write("go\n")
    proc.stdin.flush()
    removed, prunes = 0, 0
    with open_ledger(path) as ledger:  # the default busy timeout, as the CLI's
        while proc.poll() is None or prunes == 0:
            removed += ledger.prune(NOW, time.time()).removed
            prunes += 1
        out, err = proc.communicate(timeout=60)
        removed += ledger.prune(NOW, time.time()).removed  # and once more with the worker done
        history = {str(j): ledger.history(str(j)) for j in range(1, JOBS + 1)}
    assert (proc.returncode, err) == (0, ""), "no database is locked, no error of any kind"
    begun: Dict[int, str] = {}
    finished: Dict[int, str] = {}
    seen: List[int] = []
    for line in out.splitlines():
        word, value, job = line.split()
        if word == "rows":
            seen.append(int(value))
        else:
            (begun if word == "begun" else finished)[int(value)] = job
    # Interleaved: between two of its own operations the worker saw rows go, again and again.
    assert sum(1 for a, b in zip(seen, seen[1:]) if b < a) >= 3, seen
    assert len(begun) == 401 and len(finished) == 400
    rows = {e.id: e for entries in history.values() for e in entries}
    for op_id, job in begun.items():  # nothing of the worker's operations is lost
        assert rows[op_id].job_id == job and rows[op_id].actor == "worker"
        assert rows[op_id].finished is (op_id in finished)
    for job, entries in history.items():  # every job's newest record is its last operation
        assert entries[-1].id == max(i for i, j in begun.items() if j == job)
        assert all(e.started_at > OLD + per_job for e in entries), "every old row went, in the end"
    assert removed == JOBS * per_job
    with Raw(path) as conn:
        if not is_mariadb(path):
            assert conn.execute("PRAGMA integrity_check") == [("ok",)]
        assert conn.execute("SELECT count(*) FROM pruning") == [(0,)]


def test_the_prune_units_run_weekly_with_the_sweeps_hardening() -> None:
    units = ROOT / "contrib" / "systemd"
    service = (units / "slurm-dsl-prune.service").read_text()
    timer = (units / "slurm-dsl-prune.timer").read_text()
    sweep_unit = (units / "slurm-dsl-sweep.service").read_text()
    assert "ExecStart=/usr/local/bin/slurm-dsl ledger prune --older-than 90\n" in service
    for line in ("ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "NoNewPrivileges=yes",
                 "ReadWritePaths=/var/lib/slurm-dsl"):
        assert line in sweep_unit and line in service, line
    # The ledger (and the sweep's metrics file) come from the config file, not the units (§10.2).
    assert "Environment=" not in sweep_unit + service and "--metrics-file" not in sweep_unit
    assert "OnCalendar=weekly\n" in timer and "Persistent=true\n" in timer
    assert "slurm-dsl-prune.timer" in (ROOT / "contrib" / "README.md").read_text()


def test_a_ledger_error_while_recording_a_sweep_does_not_hide_its_report(
    path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = write_fake(tmp_path / "bin", {})
    with open_ledger(path) as ledger:
        record(ledger, "1", Op.REQUEUE, NOW, unknown_requeue("1"))

    def broken(self: object, *args: object) -> None:
        raise LedgerError("ledger x: record sweep: disk I/O error", path="x")

    monkeypatch.setattr(store_class(path), "record_sweep", broken)
    with Tracker(str(path), scontrol=str(fake)) as t:
        report = sweep(t, _FoundRunningAtRequeue1())
    assert [s.done.value for s in report.swept] == ["restored"]
    assert "could not record the sweep" in caplog.text
