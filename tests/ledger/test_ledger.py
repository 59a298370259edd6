"""The ledger (docs/contract.md §9.1, §9.2) against real SQLite files and real MariaDB databases (the
behaviour tests run on both backends, ``ledger_location``), and real processes for concurrency and
crashes.  What is SQLite's own (the file, WAL, the crash child) runs on SQLite only; MariaDB's own
is in test_mariadb_ledger.py."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import random
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import slurm_dsl.ledger.base as ledger_module
import slurm_dsl.ledger.rows as ledger_rows
import slurm_dsl.ledger.sqlite as sqlite_module
from slurm_dsl.core.combine import next_bit
from slurm_dsl.core.durable import LOOKS_KEPT
from slurm_dsl.core.model import Call, CallOutcome, LedgerError, Op, Outcome, Reason, RequeueBit, Result
from slurm_dsl.core.refusals import ALREADY_FINISHED, INVALID_JOB_ID
from slurm_dsl.ledger.base import STDERR_CAP, LedgerStore, Looks, Marks
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.records import HistoryEntry
from tests.examples import examples
from tests.ledger_backends import RAW_ERRORS, Raw, is_mariadb, schema, shown
from tests.ledger_ops import acquire_lease, begin_operation, finish_operation, set_bit

JOB = "4242"
NONCE = "0123456789abcdef0123456789abcdef"
CHILD = Path(__file__).parents[1] / "ledger_crash_child.py"
ROOT = Path(__file__).resolve().parents[2]

CLEAR, MAY, SET = RequeueBit.CLEAR, RequeueBit.MAY_BE_SET, RequeueBit.SET
S, U, X, R, N = (
    CallOutcome.SUCCESS,
    CallOutcome.UNKNOWN,
    CallOutcome.EXPIRED,
    CallOutcome.REJECTED,
    CallOutcome.NOT_FOUND,
)


def call(number: int, status: int, outcome: CallOutcome, message: Optional[str] = None) -> Call:
    reason = Reason.TIMED_OUT if status == 124 else Reason.UNRECOGNISED_STDERR if outcome is U else None
    return Call(number, status, str(status), b"", outcome, message, reason)


def requeue(result: Result, bit: RequeueBit, *calls: Call, reason: Optional[Reason] = None) -> Outcome:
    return Outcome(Op.REQUEUE, JOB, result, bit, reason, calls, calls[-1].status)


def single(op: Op, result: Result, c: Call) -> Outcome:
    return Outcome(op, JOB, result, None, c.reason if result is Result.UNKNOWN else None, (c,), c.status)


# Outcomes as combine would build them (docs/contract.md §7), made by hand with the model's constructors.
REQUEUE_OK = requeue(Result.OK, CLEAR, call(1, 0, S), call(2, 0, S), call(3, 0, S))
REQUEUE_S1_UNKNOWN = requeue(Result.UNKNOWN, MAY, call(1, 124, U), call(3, 0, S), reason=Reason.TIMED_OUT)
REQUEUE_EXPIRED = requeue(Result.EXPIRED, CLEAR, call(1, 75, X))
REQUEUE_S1_NOT_FOUND = requeue(
    Result.NOT_FOUND, CLEAR, call(1, 1, N, INVALID_JOB_ID), call(3, 1, N, INVALID_JOB_ID)
)
REQUEUE_BIT_SET = requeue(
    Result.BIT_SET, SET, call(1, 0, S), call(2, 0, S), call(3, 75, X), reason=Reason.CLEAR_NOT_RUN
)
REQUEUE_CLEAR_FAILED = requeue(
    Result.UNKNOWN, MAY, call(1, 0, S), call(2, 0, S), call(3, 1, U), reason=Reason.CLEAR_FAILED
)
RESTORE_OK = single(Op.RESTORE, Result.OK, call(1, 0, S))
RESTORE_GONE = single(Op.RESTORE, Result.OK, call(1, 1, N, INVALID_JOB_ID))
RESTORE_FINISHED = single(Op.RESTORE, Result.REJECTED, call(1, 1, R, ALREADY_FINISHED))
REQUEUE_FINISHED_AFTER = requeue(
    Result.OK, MAY, call(1, 0, S), call(2, 0, S), call(3, 1, R, ALREADY_FINISHED), reason=Reason.JOB_FINISHED
)
RESTORE_UNKNOWN = single(Op.RESTORE, Result.UNKNOWN, call(1, 124, U))
HOLD_OK = single(Op.HOLD, Result.OK, call(1, 0, S))
RELEASE_UNKNOWN = single(Op.RELEASE, Result.UNKNOWN, call(1, 1, U))
OPEN_OK = single(Op.OPEN, Result.OK, call(1, 0, S))


def requeue_ok_for(job_id: str) -> Outcome:
    return Outcome(Op.REQUEUE, job_id, Result.OK, CLEAR, None, REQUEUE_OK.calls, 0)


def hold_ok_for(job_id: str) -> Outcome:
    return Outcome(Op.HOLD, job_id, Result.OK, None, None, HOLD_OK.calls, 0)


def fresh_ledger(location: str, **kwargs: Any) -> LedgerStore:
    """The ledger at ``ledger_location`` (created on first open): either backend."""
    return open_ledger(location, **kwargs)


def sqlite_ledger(tmp_path: Path, **kwargs: Any) -> LedgerStore:
    return open_ledger(tmp_path / "ledger.sqlite3", **kwargs)


def force_bit(ledger: LedgerStore, job_id: str, bit: RequeueBit, now: float = 1.0) -> None:
    """Give a job a prior bit the way the sweeper would: under its lease."""
    assert acquire_lease(ledger, job_id, "setup", now, 10.0)
    assert set_bit(ledger, job_id, bit, f"setup {bit.value}", now, owner="setup")
    assert ledger.release_lease(job_id, "setup")


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(str(path), isolation_level=None)


# -- the file -------------------------------------------------------------------------------------


def test_open_creates_parent_0700_and_file_0600_and_wal_files_0600(tmp_path: Path) -> None:
    path = tmp_path / "var" / "lib" / "slurm-dsl" / "ledger.sqlite3"
    old_umask = os.umask(0o022)
    try:
        with open_ledger(path) as ledger:
            begin_operation(ledger, JOB, Op.HOLD, NONCE, 1.0)
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
            assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
            for suffix in ("-wal", "-shm"):
                assert stat.S_IMODE(os.stat(f"{path}{suffix}").st_mode) == 0o600
    finally:
        os.umask(old_umask)


def test_default_path_is_under_var_lib() -> None:
    assert ledger_module.DEFAULT_PATH.startswith("/var/lib/slurm-dsl/")


def test_wal_and_full_sync(tmp_path: Path) -> None:
    with sqlite_ledger(tmp_path):
        pass
    conn = raw(tmp_path / "ledger.sqlite3")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_writer_waits_busy_timeout_then_ledger_error(ledger_location: str) -> None:
    with fresh_ledger(ledger_location):
        pass
    blocker = Raw(ledger_location)
    blocker.lock_writers()
    try:
        with fresh_ledger(ledger_location, busy_timeout=0.3) as ledger:
            # Reads are not blocked by a writer (SQLite's WAL, InnoDB's MVCC).
            assert ledger.get(JOB) is None
            start = time.monotonic()
            with pytest.raises(LedgerError, match="locked") as info:
                acquire_lease(ledger, JOB, "me", 1.0, 10.0)
            waited = time.monotonic() - start
            # MariaDB's lock wait is whole seconds: 0.3 s becomes 1 s.
            assert 0.25 <= waited < (3.0 if is_mariadb(ledger_location) else 2.0)
            assert info.value.path == shown(ledger_location)
    finally:
        blocker.rollback()
        blocker.close()


def test_schema_version_and_reopen_keeps_data(ledger_location: str) -> None:
    assert len(sqlite_module.MIGRATIONS) == 9
    with fresh_ledger(ledger_location) as ledger:
        assert ledger.schema_version() == schema(ledger_location)
        begin_operation(ledger, JOB, Op.REQUEUE, NONCE, 1.0)
    with fresh_ledger(ledger_location) as ledger:
        assert ledger.schema_version() == schema(ledger_location)
        obj = ledger.get(JOB)
        assert obj is not None and obj.bit is MAY
    with Raw(ledger_location) as conn:
        tables = {r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()"
            if is_mariadb(ledger_location) else "SELECT name FROM sqlite_master WHERE type = 'table'"
        )}
    assert {"objects", "history", "leases", "last_sweep", "settlements", "looks", "op_looks"} <= tables


def test_the_looks_at_slurmctlds_saves_are_kept_in_the_order_taken(ledger_location: str) -> None:
    """core.durable Rules 1 and 2 (docs/contract.md §13.2): a look is kept only when it saw another
    file than its observer's look before; the places are the order they were taken in, shared by
    every observer; the last LOOKS_KEPT of an observer are kept; a look that saw nothing is none."""
    with fresh_ledger(ledger_location) as ledger:
        first = ledger.look_at_saves("a", lambda: "1")
        assert first == Looks(first.place, ((first.place, "1"),), "1")
        assert ledger.look_at_saves("a", lambda: "1").chain == first.chain  # the same file: not kept again
        other = ledger.look_at_saves("b", lambda: "9")
        assert other.place > first.place and other.chain == ((other.place, "9"),)
        again = ledger.look_at_saves("a", lambda: "2")
        assert [seen for _, seen in again.chain] == ["1", "2"] and again.place > other.place
        assert ledger.look_at_saves("a", lambda: None) == Looks(again.place, again.chain, None)
        for n in range(3, LOOKS_KEPT + 5):
            last = ledger.look_at_saves("a", functools.partial(str, n))
        assert len(last.chain) <= LOOKS_KEPT and last.chain[-1][1] == str(LOOKS_KEPT + 4)
        assert [p for p, _ in last.chain] == sorted(p for p, _ in last.chain)


def test_the_marks_of_an_object_and_an_operation(ledger_location: str) -> None:
    """What anchors core.durable Rules 2, 4 and 8: a requeue's quiet moment at its start (none: its
    calls may still change the flag) and its finish (where the looks stood, its own look); the
    anchors a sweep gives what has none; a gone mark kept until the job is seen again."""
    with fresh_ledger(ledger_location) as ledger:
        ledger.look_at_saves("a", lambda: "1")
        place = ledger.look_at_saves("a", lambda: "2").place
        op_id = begin_operation(ledger, JOB, Op.REQUEUE, NONCE, 10.0, ends_by=30.0)
        assert ledger.marks([JOB])[JOB] == Marks(None, None, None, None, 30.0)
        finish_operation(ledger, op_id, Outcome(Op.REQUEUE, JOB, Result.UNKNOWN, MAY), b"", 11.0, look="a=2")
        assert ledger.marks([JOB])[JOB] == Marks(place, "a=2", None, None, 11.0)
        assert ledger.op_marks([op_id]) == {op_id: (place, "a=2")}
        # A second requeue that never finishes: no quiet moment until a sweep anchors one.
        begin_operation(ledger, JOB, Op.REQUEUE, NONCE, 12.0, ends_by=40.0)
        assert ledger.marks([JOB])[JOB].quiet is None
        later = ledger.look_at_saves("a", lambda: "3").place
        assert ledger.anchor_quiet([JOB, "77"], "a=3") == 1  # 77 has no object
        assert ledger.anchor_quiet([JOB], "a=4") == 0  # anchored already: kept
        assert ledger.marks([JOB])[JOB][:2] == (later, "a=3")
        assert ledger.mark_gone([JOB], "a=3") == 1 and ledger.mark_gone([JOB], "a=4") == 0
        assert ledger.marks([JOB])[JOB][2:4] == (later, "a=3")
        assert ledger.forget_gone([JOB]) == 1 and ledger.marks([JOB])[JOB][2:4] == (None, None)
        hold = begin_operation(ledger, "88", Op.HOLD, NONCE, 13.0)
        finish_operation(ledger, hold, Outcome(Op.HOLD, "88", Result.OK, None), b"", 14.0)  # no look: None
        assert ledger.op_marks([hold]) == {hold: (later, None)}


def test_a_migration_and_its_version_bump_commit_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with sqlite_ledger(tmp_path):
        pass
    base = sqlite_module.MIGRATIONS
    # The second statement fails: the first must not stay behind, nor the version move.
    monkeypatch.setattr(
        sqlite_module, "MIGRATIONS", (*base, ("CREATE TABLE extra (x)", "CREATE TABLE objects (y)"))
    )
    with pytest.raises(LedgerError, match="already exists"):
        sqlite_ledger(tmp_path)
    conn = raw(tmp_path / "ledger.sqlite3")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(base)
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'extra'").fetchone()[0] == 0
    conn.close()

    monkeypatch.setattr(sqlite_module, "MIGRATIONS", (*base, ("CREATE TABLE extra (x)",)))
    with sqlite_ledger(tmp_path) as ledger:
        assert ledger.schema_version() == len(base) + 1
    conn = raw(tmp_path / "ledger.sqlite3")
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'extra'").fetchone()[0] == 1
    conn.close()


def test_a_newer_schema_is_refused(ledger_location: str) -> None:
    with fresh_ledger(ledger_location):
        pass
    with Raw(ledger_location) as conn:
        conn.execute(
            "UPDATE schema_version SET version = 99" if is_mariadb(ledger_location) else "PRAGMA user_version = 99"
        )
    known = schema(ledger_location)
    with pytest.raises(LedgerError, match=rf"schema version 99, newer than this slurm-dsl knows \({known}\)"):
        fresh_ledger(ledger_location)


def test_a_path_that_cannot_be_created_says_which_and_why(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    bad = tmp_path / "file" / "slurm-dsl" / "ledger.sqlite3"
    with pytest.raises(LedgerError, match="Not a directory") as info:
        open_ledger(bad)
    assert str(bad) in str(info.value) and info.value.path == str(bad)
    with pytest.raises(LedgerError, match="Is a directory"):
        open_ledger(tmp_path)


def test_a_file_that_is_not_a_database_is_a_ledger_error(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LedgerError, match="not a database"):
        open_ledger(path)


# -- operations -----------------------------------------------------------------------------------

# (prior bit, outcome, the object's bit after).  next_bit decides, and a clear made by a call stays
# watched (may_be_set) until a save proves it; these pin what docs/contract.md §7, §9.2, §13.3 require.
CASES: List[Tuple[str, RequeueBit, Outcome, RequeueBit]] = [
    ("requeue unknown -> may_be_set", CLEAR, REQUEUE_S1_UNKNOWN, MAY),
    ("requeue ok -> watched until saved", CLEAR, REQUEUE_OK, MAY),
    ("requeue ok on an earlier may_be_set -> watched", MAY, REQUEUE_OK, MAY),
    ("requeue ok on an earlier set -> watched", SET, REQUEUE_OK, MAY),
    ("requeue expired before call 1 keeps may_be_set", MAY, REQUEUE_EXPIRED, MAY),
    ("requeue expired before call 1 keeps set", SET, REQUEUE_EXPIRED, SET),
    ("requeue expired before call 1 on a clear job", CLEAR, REQUEUE_EXPIRED, CLEAR),
    ("requeue not found, call 3 found it gone -> watched", SET, REQUEUE_S1_NOT_FOUND, MAY),
    ("requeue bit_set -> set", CLEAR, REQUEUE_BIT_SET, SET),
    ("requeue clear failed -> may_be_set", CLEAR, REQUEUE_CLEAR_FAILED, MAY),
    ("restore ok -> watched until saved", SET, RESTORE_OK, MAY),
    ("restore finding the job gone -> watched", MAY, RESTORE_GONE, MAY),
    ("restore finding the job finished leaves may_be_set", MAY, RESTORE_FINISHED, MAY),
    ("requeue whose call 3 found the job finished -> may_be_set", CLEAR, REQUEUE_FINISHED_AFTER, MAY),
    ("restore unknown leaves the bit", MAY, RESTORE_UNKNOWN, MAY),
    ("hold leaves may_be_set", MAY, HOLD_OK, MAY),
    ("hold leaves clear", CLEAR, HOLD_OK, CLEAR),
    ("release unknown leaves set", SET, RELEASE_UNKNOWN, SET),
    ("open leaves set", SET, OPEN_OK, SET),
]


@pytest.mark.parametrize("name, prior, outcome, after", CASES, ids=[c[0] for c in CASES])
def test_begin_and_finish(
    ledger_location: str, name: str, prior: RequeueBit, outcome: Outcome, after: RequeueBit
) -> None:
    with fresh_ledger(ledger_location) as ledger:
        if prior is not CLEAR:
            force_bit(ledger, JOB, prior)
        op_id = begin_operation(ledger, JOB, outcome.op, NONCE, 10.0)
        during = ledger.get(JOB)
        assert during is not None
        assert during.bit is (MAY if outcome.op in (Op.REQUEUE, Op.REQUEUE_HOLD) else prior)
        assert finish_operation(ledger, op_id, outcome, b"err", 11.0) is after
        watched = next_bit(prior, outcome) is CLEAR and after is MAY
        assert after is (MAY if watched else next_bit(prior, outcome))
        obj = ledger.get(JOB)
        assert obj is not None and obj.bit is after
        assert ("not yet known saved" in obj.why) is watched
        if outcome.op in (Op.REQUEUE, Op.RESTORE):
            # Its calls were over when it finished: its quiet moment, where the looks stood then (none yet).
            assert ledger.marks([JOB])[JOB] == Marks(0, None, None, None, 11.0)
        (entry,) = ledger.history(JOB)
        assert (entry.prior_bit, entry.bit_after, entry.result) == (prior, after, outcome.result)
        if outcome.op in (Op.REQUEUE, Op.RESTORE):
            assert obj.why.startswith(f"{outcome.op.value} {NONCE}: {outcome.result.value}")
            assert obj.updated_at == 11.0
            if outcome.reason is not None:
                assert outcome.reason.value in obj.why
        else:
            assert obj.why == during.why and obj.updated_at == during.updated_at


@pytest.mark.parametrize("late", [REQUEUE_OK, RESTORE_OK], ids=["requeue", "restore"])
def test_a_late_finish_never_clears_what_a_newer_requeue_may_have_set(ledger_location: str, late: Outcome) -> None:
    """docs/contract.md §9.2, Rule 7: an operation whose lease lapsed (its CLI frozen past it) finishes
    after a newer requeue began on the same job and left its bit may_be_set: its ok must not clear it."""
    with fresh_ledger(ledger_location) as ledger:
        force_bit(ledger, JOB, MAY)
        stale = begin_operation(ledger, JOB, late.op, NONCE, 10.0)
        newer = begin_operation(ledger, JOB, Op.REQUEUE, NONCE[::-1], 80.0)  # after the stale lease lapsed
        assert finish_operation(ledger, newer, REQUEUE_S1_UNKNOWN, b"", 81.0) is MAY
        assert finish_operation(ledger, stale, late, b"", 90.0) is MAY
        obj = ledger.get(JOB)
        assert obj is not None and obj.bit is MAY and obj.why.startswith(f"requeue {NONCE[::-1]}")
        assert [h.bit_after for h in ledger.history(JOB)] == [MAY, MAY]
        # With nothing begun since, the same finish clears as ever, watched until saved (§13.3).
        again = begin_operation(ledger, JOB, late.op, NONCE, 100.0)
        assert finish_operation(ledger, again, late, b"", 101.0) is MAY
        obj = ledger.get(JOB)
        assert obj is not None and obj.why.startswith(f"{late.op.value} {NONCE}: ok; cleared, not yet known saved")


def test_a_job_with_only_holds_has_a_clear_object(ledger_location: str) -> None:
    with fresh_ledger(ledger_location) as ledger:
        assert ledger.get(JOB) is None
        finish_operation(ledger, begin_operation(ledger, JOB, Op.HOLD, NONCE, 5.0), HOLD_OK, b"", 6.0)
        obj = ledger.get(JOB)
        assert obj is not None and obj.bit is CLEAR and obj.job_id == JOB
        assert ledger.due_objects(100.0) == []


def test_intent_is_committed_before_begin_returns_and_survives_a_crash(ledger_location: str) -> None:
    ledger = open_ledger(ledger_location)
    begin_operation(ledger, JOB, Op.REQUEUE, NONCE, 7.0)
    # Another connection sees it at once: the transaction is committed, not pending.
    with Raw(ledger_location) as conn:
        assert conn.execute("SELECT bit, why FROM objects WHERE job_id = ?", (JOB,)) == [
            ("may_be_set", f"requeue {NONCE} started")
        ]
    ledger.close()  # the process "dies" before finish_operation
    with open_ledger(ledger_location) as ledger:
        obj = ledger.get(JOB)
        assert obj is not None and obj.bit is MAY
        (entry,) = ledger.history(JOB)
        assert not entry.finished and entry.result is None and entry.bit_after is None
        assert [o.job_id for o in ledger.due_objects(8.0)] == [JOB]


def test_finish_refuses_a_second_finish_an_unknown_id_and_a_foreign_outcome(ledger_location: str) -> None:
    with fresh_ledger(ledger_location) as ledger:
        op_id = begin_operation(ledger, JOB, Op.REQUEUE, NONCE, 1.0)
        with pytest.raises(ValueError, match="is requeue 4242, not hold 4242"):
            finish_operation(ledger, op_id, HOLD_OK, b"", 2.0)
        finish_operation(ledger, op_id, REQUEUE_S1_UNKNOWN, b"", 2.0)
        with pytest.raises(LedgerError, match="already finished"):
            finish_operation(ledger, op_id, REQUEUE_OK, b"", 3.0)
        with pytest.raises(LedgerError, match="no operation 999"):
            finish_operation(ledger, 999, REQUEUE_OK, b"", 3.0)
        obj = ledger.get(JOB)
        assert obj is not None and obj.bit is MAY  # the refused finish changed nothing


def test_bad_arguments_are_value_errors(ledger_location: str) -> None:
    with fresh_ledger(ledger_location) as ledger:
        with pytest.raises(ValueError, match="invalid job id"):
            begin_operation(ledger, "123_4", Op.HOLD, NONCE, 1.0)
        with pytest.raises(ValueError, match="finite"):
            begin_operation(ledger, JOB, Op.HOLD, NONCE, float("nan"))
        with pytest.raises(ValueError, match="positive"):
            acquire_lease(ledger, JOB, "me", 1.0, 0.0)
        assert ledger.history(JOB) == []


def test_history_is_complete_and_append_only(ledger_location: str) -> None:
    big = b"x" * (STDERR_CAP + 1000)
    with open_ledger(ledger_location) as ledger:
        first = begin_operation(ledger, JOB, Op.REQUEUE, "aa" * 16, 1.0)
        finish_operation(ledger, first, REQUEUE_CLEAR_FAILED, big, 2.0)
        second = begin_operation(ledger, JOB, Op.RESTORE, "bb" * 16, 3.0)
        finish_operation(ledger, second, RESTORE_OK, b"\x1eDSL bb call 1 0\n\xff\x00", 4.0)
        third = begin_operation(ledger, JOB, Op.HOLD, "cc" * 16, 5.0)
        entries = ledger.history(JOB)
    assert [e.id for e in entries] == [first, second, third]
    one, two, three = entries
    assert (one.op, one.nonce, one.started_at, one.finished_at) == (Op.REQUEUE, "aa" * 16, 1.0, 2.0)
    assert (one.result, one.requeue_bit, one.reason) == (Result.UNKNOWN, MAY, Reason.CLEAR_FAILED)
    assert (one.prior_bit, one.bit_after, one.exit_status) == (CLEAR, MAY, 1)
    assert [(c.number, c.status, c.outcome) for c in one.calls] == [
        (1, 0, "success"),
        (2, 0, "success"),
        (3, 1, "unknown"),
    ]
    assert one.calls[2].reason == "unrecognised_stderr"
    assert one.stderr == big[:STDERR_CAP] and one.stderr_len == len(big)
    assert (two.prior_bit, two.bit_after, two.stderr) == (MAY, MAY, b"\x1eDSL bb call 1 0\n\xff\x00")  # watched
    assert two.calls[0].status_text == "0" and two.calls[0].message is None
    assert three.op is Op.HOLD and not three.finished and three.calls == ()

    with Raw(ledger_location) as conn:
        for sql in (
            "DELETE FROM history",
            f"UPDATE history SET result = 'ok' WHERE id = {first}",
            f"UPDATE history SET nonce = 'dd' WHERE id = {third}",
            f"UPDATE history SET prior_bit = 'set' WHERE id = {third}",
        ):
            with pytest.raises(RAW_ERRORS, match="append-only"):
                conn.execute(sql)
        assert conn.execute("SELECT count(*) FROM history") == [(3,)]


# -- leases, pending and back-off -----------------------------------------------------------------


def test_a_lease_is_exclusive_until_it_expires(ledger_location: str) -> None:
    with fresh_ledger(ledger_location) as ledger:
        assert acquire_lease(ledger, JOB, "a", 100.0, 30.0)
        assert not acquire_lease(ledger, JOB, "b", 129.9, 30.0)
        assert acquire_lease(ledger, JOB, "a", 120.0, 30.0)  # renewal, now until 150
        assert not acquire_lease(ledger, JOB, "b", 149.0, 30.0)
        assert acquire_lease(ledger, "4243", "b", 149.0, 30.0)  # another job is another lease
        assert acquire_lease(ledger, JOB, "b", 150.0, 30.0)  # a's lapsed: a crashed holder
        assert not ledger.release_lease(JOB, "a")  # a no longer holds it
        assert not acquire_lease(ledger, JOB, "a", 151.0, 30.0)
        assert ledger.release_lease(JOB, "b")
        assert acquire_lease(ledger, JOB, "a", 151.0, 30.0)


def test_set_bit_needs_the_lease(ledger_location: str) -> None:
    with fresh_ledger(ledger_location) as ledger:
        begin_operation(ledger, JOB, Op.REQUEUE, NONCE, 1.0)
        assert not set_bit(ledger, JOB, CLEAR, "gone", 2.0, owner="sweeper")  # no lease at all
        assert acquire_lease(ledger, JOB, "sweeper", 2.0, 10.0)
        assert not set_bit(ledger, JOB, CLEAR, "gone", 12.0, owner="sweeper")  # it lapsed
        assert acquire_lease(ledger, JOB, "op", 12.0, 10.0)
        assert not set_bit(ledger, JOB, CLEAR, "gone", 13.0, owner="sweeper")  # another holds it
        obj = ledger.get(JOB)
        assert obj is not None and obj.bit is MAY and obj.why == f"requeue {NONCE} started"
        assert set_bit(ledger, JOB, CLEAR, "job gone", 14.0, owner="op")
        obj = ledger.get(JOB)
        assert obj is not None and (obj.bit, obj.why, obj.updated_at) == (CLEAR, "job gone", 14.0)


def test_pending_oldest_first_skipping_clear_leased_and_backed_off(ledger_location: str) -> None:
    with fresh_ledger(ledger_location, backoff_base=10.0, backoff_cap=100.0) as ledger:
        for job_id, started in (("5", 5.0), ("3", 3.0), ("4", 4.0), ("6", 3.0), ("1", 1.0)):
            begin_operation(ledger, job_id, Op.REQUEUE, NONCE, started)
        finish_operation(ledger,
            begin_operation(ledger, "2", Op.REQUEUE, NONCE, 0.5), requeue_ok_for("2"), b"", 0.6
        )
        finish_operation(ledger, begin_operation(ledger, "9", Op.HOLD, NONCE, 0.5), hold_ok_for("9"), b"", 0.6)
        # 2's requeue cleared its flag, not yet known saved: watched like the others (§13.3).
        assert [o.job_id for o in ledger.due_objects(10.0)] == ["2", "1", "3", "6", "4", "5"]
        acquire_lease(ledger, "2", "sweeper", 10.0, 5.0)
        assert set_bit(ledger, "2", CLEAR, "sweep: saved", 10.0, owner="sweeper")
        ledger.release_lease("2", "sweeper")
        assert [o.job_id for o in ledger.due_objects(10.0)] == ["1", "3", "6", "4", "5"]
        assert [o.job_id for o in ledger.due_objects(10.0, limit=2)] == ["1", "3"]
        assert acquire_lease(ledger, "3", "op", 10.0, 5.0)
        assert ledger.lookup_failed("6", "controller down", 10.0) == 20.0
        assert [o.job_id for o in ledger.due_objects(10.0)] == ["1", "4", "5"]
        assert [o.job_id for o in ledger.due_objects(15.0)] == ["1", "3", "4", "5"]  # lease lapsed
        # Back-off over: 6 became due last, so it waits behind the others.
        assert [o.job_id for o in ledger.due_objects(20.0)] == ["1", "3", "4", "5", "6"]


def test_the_sweep_holding_the_lock_takes_over_other_sweeps_leases_never_an_operations(ledger_location: str) -> None:
    # docs/contract.md §9.5: a lease another *sweep* owns is a dead sweep's once the caller holds the
    # sweep lock; an operation's (op, bulk) keeps its job until it is given back or lapses.
    dead, me = "sweep:ctl1:4711:1:deadbeef", "sweep:ctl2:42:1:cafecafe"
    with fresh_ledger(ledger_location) as ledger:
        for job in ("1", "2", "3", "4", "5"):
            begin_operation(ledger, job, Op.REQUEUE, NONCE, float(job))
        assert ledger.acquire_leases(["1", "2"], dead, 10.0, 100.0) == ["1", "2"]
        assert acquire_lease(ledger, "3", "op:ctl1:4712:1:0badf00d", 10.0, 100.0)
        assert acquire_lease(ledger, "4", "bulk:ctl1:4713:1:12345678", 10.0, 100.0)
        assert acquire_lease(ledger, "5", "sweeper", 10.0, 100.0)  # not a sweep's owner: "sweep:" is the tag
        assert ledger.due_objects(11.0) == []
        assert [o.job_id for o in ledger.due_objects(11.0, reclaim_sweeps=True)] == ["1", "2"]
        assert [o.job_id for o in ledger.due_objects(11.0, 1, reclaim_sweeps=True)] == ["1"]
        assert ledger.acquire_leases(["1", "2", "3", "4", "5"], me, 11.0, 50.0) == []
        assert ledger.acquire_leases(["1", "2", "3", "4", "5"], me, 11.0, 50.0, reclaim_sweeps=True) == ["1", "2"]
        # Taken: the dead sweep's writes and give-backs find nothing of theirs.
        assert ledger.set_bits([("1", CLEAR, "late")], 12.0, owner=dead) == []
        assert ledger.release_leases(["1", "2"], dead) == 0
        assert ledger.set_bits([("1", CLEAR, "gone"), ("2", CLEAR, "gone")], 12.0, owner=me) == ["1", "2"]
        # A sweep's own lease is its own either way; an expired one anyone's.
        assert ledger.acquire_leases(["1"], me, 13.0, 50.0, reclaim_sweeps=True) == ["1"]
        assert ledger.acquire_leases(["3", "4"], me, 111.0, 50.0) == ["3", "4"]


def test_a_watched_object_keeps_its_bit_gets_no_back_off_and_waits_behind_the_others(ledger_location: str) -> None:
    with fresh_ledger(ledger_location, backoff_base=10.0, backoff_cap=100.0) as ledger:
        for job_id, started in (("1", 1.0), ("2", 2.0), ("3", 3.0)):
            begin_operation(ledger, job_id, Op.REQUEUE, NONCE, started)
        ledger.lookup_failed("1", "down", 5.0)  # due at 15
        assert ledger.acquire_leases(["1", "2"], "sweep", 20.0, 10.0) == ["1", "2"]
        assert ledger.watch(["1", "2", "3"], 20.0, owner="sweep") == ["1", "2"]  # 3: no lease, untouched
        for job_id in ("1", "2"):
            obj = ledger.get(job_id)
            assert obj is not None and obj.bit is MAY and (obj.lookup_failures, obj.next_lookup_at) == (0, 20.0)
            assert obj.why == f"requeue {NONCE} started" and obj.updated_at == float(job_id)
        ledger.release_leases(["1", "2"], "sweep")
        assert [o.job_id for o in ledger.due_objects(20.0)] == ["3", "1", "2"]
        assert [o.job_id for o in ledger.due_objects(20.0, limit=1)] == ["3"]


def test_lookup_back_off_doubles_up_to_the_cap_and_set_bit_resets_it(ledger_location: str) -> None:
    with fresh_ledger(ledger_location, backoff_base=10.0, backoff_cap=100.0) as ledger:
        begin_operation(ledger, JOB, Op.REQUEUE, NONCE, 0.0)
        waits = [ledger.lookup_failed(JOB, f"timeout {n}", 1000.0) - 1000.0 for n in range(1, 8)]
        assert waits == [10.0, 20.0, 40.0, 80.0, 100.0, 100.0, 100.0]
        obj = ledger.get(JOB)
        assert obj is not None
        assert (obj.lookup_failures, obj.next_lookup_at, obj.lookup_error) == (7, 1100.0, "timeout 7")
        assert obj.bit is MAY and obj.why == f"requeue {NONCE} started"  # the bit's why is kept
        with Raw(ledger_location) as conn:
            conn.execute("UPDATE objects SET lookup_failures = 5000")
        assert ledger.lookup_failed(JOB, "down", 1000.0) == 1100.0  # 2.0 ** 5000 would overflow
        assert acquire_lease(ledger, JOB, "sweeper", 1000.0, 10.0)
        assert set_bit(ledger, JOB, SET, "still Requeue=1, restore failed", 1001.0, owner="sweeper")
        obj = ledger.get(JOB)
        assert obj is not None
        assert (obj.lookup_failures, obj.next_lookup_at, obj.lookup_error) == (0, 0.0, "")
        with pytest.raises(LedgerError, match="no object for job 77"):
            ledger.lookup_failed("77", "down", 1.0)


# -- invariants -----------------------------------------------------------------------------------

ANY_OUTCOME = [c[2] for c in CASES]


def naive_cleared_by_a_call(outcome: Outcome) -> bool:
    """docs/contract.md §13.3: "a requeue whose call 3 cleared the flag (or found the job gone), and a
    restore that is ok"."""
    if outcome.op is Op.RESTORE:
        return outcome.result is Result.OK
    return outcome.op in (Op.REQUEUE, Op.REQUEUE_HOLD) and any(
        c.number == 3 and (c.outcome is CallOutcome.SUCCESS or c.message == INVALID_JOB_ID) for c in outcome.calls
    )


def naive_after(prior: RequeueBit, outcome: Outcome) -> RequeueBit:
    """The object's bit after ``outcome``: ``next_bit``, and a clear made by a call watched (§13.3)."""
    after = next_bit(prior, outcome)
    return MAY if after is CLEAR and naive_cleared_by_a_call(outcome) else after


def test_the_object_follows_next_bit_over_any_sequence(ledger_location: str) -> None:
    jobs = itertools.count(1)  # each example on a job of its own, all in one ledger

    @settings(max_examples=examples(60), deadline=None)
    @given(st.lists(st.sampled_from(ANY_OUTCOME), max_size=12), st.booleans())
    def check(outcomes: List[Outcome], crash_last: bool) -> None:
        job = str(next(jobs))
        expected = CLEAR
        for i, outcome in enumerate(dataclasses.replace(o, job_id=job) for o in outcomes):
            op_id = begin_operation(ledger, job, outcome.op, f"{i:032x}", float(i))
            if crash_last and i == len(outcomes) - 1:
                if outcome.op in (Op.REQUEUE, Op.REQUEUE_HOLD):
                    expected = MAY  # unfinished requeue: intent stays
                break
            after = naive_after(expected, outcome)
            assert finish_operation(ledger, op_id, outcome, b"", i + 0.5) is after
            expected = after
        obj = ledger.get(job)
        assert (obj.bit if obj else CLEAR) is expected
        entries = ledger.history(job)
        assert [e.op for e in entries] == [o.op for o in outcomes]
        assert all(a.bit_after == b.prior_bit for a, b in zip(entries, entries[1:]) if a.finished)

    with open_ledger(ledger_location) as ledger:
        check()


# -- real processes -------------------------------------------------------------------------------


def child(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(ROOT),
    )


def readline(stream: Optional[IO[str]]) -> str:
    assert stream is not None
    return stream.readline()


def test_two_processes_lose_no_update_and_never_see_database_locked(ledger_location: str) -> None:
    # Two hosts, as far as a MariaDB ledger can tell: two processes, each its own connection.
    path = ledger_location
    count = 150
    workers = [child("worker", path, name, str(count)) for name in ("alpha", "beta")]
    try:
        for proc in workers:
            assert readline(proc.stdout) == "ready\n"
        for proc in workers:  # both start together
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=120)[0] for proc in workers]
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in workers] == [0, 0], outputs
    assert all(out == "done\n" for out in outputs), outputs
    with open_ledger(path) as ledger:
        entries = ledger.history("7")
        assert len(entries) == 2 * count and all(e.finished for e in entries)
        assert {e.nonce for e in entries} == {f"{n}-{i}" for n in ("alpha", "beta") for i in range(count)}
        seven = ledger.get("7")
        assert seven is not None and seven.lookup_failures == 2 * count  # every increment kept
        eight = ledger.get("8")
        assert eight is not None and eight.why in {f"alpha {count - 1}", f"beta {count - 1}"}
        assert eight.bit is SET and ledger.due_objects(time.time() + 1e6) == [eight]  # no lease left


def test_processes_opening_a_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    # The first opener switches the file to WAL, which needs an exclusive lock that SQLite's busy
    # handler does not wait for: Ledger.open must retry it rather than fail with "locked".
    for attempt in range(6):
        path = tmp_path / str(attempt) / "ledger.sqlite3"
        procs = [child("open", str(path)) for _ in range(6)]
        try:
            for proc in procs:
                assert readline(proc.stdout) == "waiting\n"
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            outputs = [proc.communicate(timeout=60)[0] for proc in procs]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        assert outputs == [f"{len(sqlite_module.MIGRATIONS)}\n"] * len(procs)
        assert [proc.returncode for proc in procs] == [0] * len(procs)


def test_sigkill_at_random_moments_loses_nothing_committed(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    rng = random.Random(20240917)
    begun: Dict[int, str] = {}
    finished: Dict[int, str] = {}
    round_number = 0
    # Ten rounds at least, and on until a kill has landed inside an operation (begun, not yet
    # finished): where a kill lands is the machine's speed, and a slow one may need more rounds.
    while round_number < 10 or (len(begun) == len(finished) and round_number < 60):
        proc = child("crash", str(path), str(1000 + round_number * 100000))
        round_number += 1
        seen = [readline(proc.stdout) for _ in range(rng.randrange(1, 120))]
        # Jitter, not synchronisation: it picks the kill's moment within the next operation.
        time.sleep(rng.random() * 0.003)
        os.kill(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        record_reports(seen + rest.splitlines(keepends=True), begun, finished)
        check_crash_invariants(path, begun, finished)
    assert len(finished) > 100  # the rounds did real work
    assert len(begun) > len(finished)  # and some kills landed inside a requeue


def test_sigkill_while_creating_and_migrating_the_file(tmp_path: Path) -> None:
    rng = random.Random(7)
    for attempt in range(12):
        path = tmp_path / str(attempt) / "ledger.sqlite3"
        proc = child("crash", str(path), "1000")
        assert readline(proc.stdout) == "opening\n"
        # Jitter, not synchronisation: a moment within creating the file and migrating it.
        time.sleep(rng.random() * 0.01)
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
        begun: Dict[int, str] = {}
        finished: Dict[int, str] = {}
        record_reports(out.splitlines(keepends=True), begun, finished)
        check_crash_invariants(path, begun, finished)
        with open_ledger(path) as ledger:  # whatever the kill left, the next process carries on
            assert ledger.schema_version() == len(sqlite_module.MIGRATIONS)
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def record_reports(lines: List[str], begun: Dict[int, str], finished: Dict[int, str]) -> None:
    for line in lines:
        if not line.endswith("\n") or line == "opening\n":
            continue  # torn by the kill: not reported
        word, op_id, value = line.split()
        (begun if word == "begun" else finished)[int(op_id)] = value


def check_crash_invariants(path: Path, begun: Dict[int, str], finished: Dict[int, str]) -> None:
    if not path.exists():  # killed before it created the file
        assert not begun and not finished
        return
    conn = raw(path)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    if conn.execute("PRAGMA user_version").fetchone()[0] == 0:  # killed before the migration committed
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        assert not begun and not finished
        conn.close()
        return
    jobs = [r[0] for r in conn.execute("SELECT DISTINCT job_id FROM history")]
    conn.close()
    entries: Dict[int, HistoryEntry] = {}
    with open_ledger(path) as ledger:
        assert ledger.schema_version() == len(sqlite_module.MIGRATIONS)
        for job_id in jobs:
            (entry,) = ledger.history(job_id)  # the child uses a fresh job per operation
            obj = ledger.get(job_id)
            assert obj is not None
            if entry.finished:
                assert obj.bit is entry.bit_after
            elif entry.op in (Op.REQUEUE, Op.REQUEUE_HOLD):
                assert obj.bit is MAY, entry  # intent first: a crash mid-requeue leaves may_be_set
            else:
                assert obj.bit is CLEAR
            entries[entry.id] = entry
    for op_id, job_id in begun.items():
        assert entries[op_id].job_id == job_id
    for op_id, bit in finished.items():
        assert entries[op_id].bit_after is RequeueBit(bit)


# -- a bulk chunk: its intents in one transaction, its results in one -----------------------------


def test_a_chunks_intents_are_one_transaction_committed_before_any_script(ledger_location: str) -> None:
    jobs = [str(n) for n in range(100, 160)]
    with fresh_ledger(ledger_location) as ledger:
        op_ids = ledger.begin_operations([(j, Op.REQUEUE, NONCE) for j in jobs], 5.0, actor="uid 0 (root)")
        assert len(op_ids) == len(set(op_ids)) == len(jobs)
    with fresh_ledger(ledger_location) as other:  # another connection sees every intent at once
        assert all(other.get(j).bit is MAY for j in jobs)  # type: ignore[union-attr]
        assert [h.op for j in jobs for h in other.history(j)] == [Op.REQUEUE] * len(jobs)


def test_a_bad_id_in_a_chunk_writes_no_intent_at_all(ledger_location: str) -> None:
    with fresh_ledger(ledger_location) as ledger:
        with pytest.raises(ValueError):
            ledger.begin_operations([("101", Op.REQUEUE, NONCE), ("1_2", Op.REQUEUE, NONCE)], 5.0)
        assert ledger.get("101") is None


def test_a_chunks_results_are_one_transaction_all_or_none(ledger_location: str) -> None:
    jobs = ["201", "202", "203"]
    with fresh_ledger(ledger_location) as ledger:
        op_ids = ledger.begin_operations([(j, Op.REQUEUE, NONCE) for j in jobs], 5.0)
        bits = ledger.finish_operations([(i, requeue_ok_for(j), b"") for i, j in zip(op_ids, jobs)], 6.0)
        assert bits == [MAY] * 3 and all(ledger.get(j).bit is MAY for j in jobs)  # type: ignore[union-attr]
        again = ledger.begin_operations([(j, Op.REQUEUE, NONCE) for j in jobs], 7.0)
        finished_twice = [(again[0], requeue_ok_for("201"), b""), (op_ids[1], requeue_ok_for("202"), b"")]
        with pytest.raises(LedgerError, match="already finished"):
            ledger.finish_operations(finished_twice, 8.0)
        # The refused batch wrote nothing: 201's second requeue is still only begun (may_be_set).
        assert ledger.get("201").bit is MAY  # type: ignore[union-attr]
        assert [h.finished for h in ledger.history("201")] == [True, False]


def test_a_batch_is_one_transaction_seen_by_others_only_once_it_ends(ledger_location: str) -> None:
    with fresh_ledger(ledger_location) as ledger, fresh_ledger(ledger_location) as other:
        with ledger.batch():
            assert ledger.acquire_leases(["301", "302"], "bulk", 5.0, 60.0) == ["301", "302"]
            op_ids = ledger.begin_operations([("301", Op.REQUEUE, NONCE), ("302", Op.REQUEUE, NONCE)], ledger.now())
            assert ledger.get("301").bit is MAY  # type: ignore[union-attr]  # its own writes, inside
            assert other.get("301") is None, "not committed before the block ends"
            with pytest.raises(RuntimeError, match="do not nest"):
                with ledger.batch():
                    pass
        assert other.get("301").bit is MAY and not acquire_lease(other, "302", "sweep", 6.0, 10.0)  # type: ignore[union-attr]
        with pytest.raises(LedgerError, match="already finished"):
            with ledger.batch():
                ledger.finish_operations([(op_ids[0], requeue_ok_for("301"), b"")], 7.0)
                ledger.release_leases(["301", "302"], "bulk")
                ledger.finish_operations([(op_ids[0], requeue_ok_for("301"), b"")], 7.0)
        # All or none: neither the first finish nor the leases given back were kept.
        assert other.get("301").bit is MAY and [h.finished for h in other.history("301")] == [False]  # type: ignore[union-attr]
        assert not acquire_lease(other, "301", "sweep", 8.0, 10.0)


# -- a bulk chunk, set-based: many ids, repeats, one bad entry, leases of others ------------------

BIG = [str(n) for n in range(50_000, 51_200)]  # 1,200 jobs: three IN lists (ledger_rows.IN_PIECE is 500)


def for_job(template: Outcome, job_id: str) -> Outcome:
    return dataclasses.replace(template, job_id=job_id)


def snapshot(location: str) -> Tuple[List[Tuple[Any, ...]], ...]:
    """Every row of the objects, the history and the leases, past the ledger's code."""
    with Raw(location) as conn:
        return tuple(
            conn.execute(f"SELECT * FROM {table} ORDER BY {key}")
            for table, key in (("objects", "job_id"), ("history", "id"), ("leases", "job_id"))
        )


def test_a_chunk_of_1200_jobs_gets_every_op_id_bit_and_lease_right(ledger_location: str) -> None:
    templates = (REQUEUE_OK, REQUEUE_S1_UNKNOWN, REQUEUE_BIT_SET, REQUEUE_CLEAR_FAILED)
    with fresh_ledger(ledger_location, backoff_base=10.0, backoff_cap=100.0) as ledger:
        # Every third job has an object already, backed off after a failed lookup: the intent resets it.
        known = BIG[::3]
        ledger.finish_operations(
            [(i, for_job(HOLD_OK, j), b"") for i, j in zip(ledger.begin_operations([(j, Op.HOLD, NONCE) for j in known],
                                                                                  1.0), known)],
            1.5,
        )
        assert ledger.lookups_failed(known, "controller down", 2.0) == [12.0] * len(known)

        assert ledger.acquire_leases(BIG, "bulk", 5.0, 60.0) == BIG
        op_ids = ledger.begin_operations([(j, Op.REQUEUE, NONCE) for j in BIG], 5.0, actor="uid 0 (root)")
        assert len(set(op_ids)) == len(BIG) and op_ids == sorted(op_ids)
        objects = {o.job_id: o for o in ledger.objects_not_clear()}
        assert sorted(objects) == BIG
        assert {(o.bit, o.why, o.updated_at, o.lookup_failures, o.next_lookup_at) for o in objects.values()} == {
            (MAY, f"requeue {NONCE} started", 5.0, 0, 0.0)
        }
        begun = {e.id: e for e in ledger.export_history(0, 10_000)}
        for op_id, job_id in zip(op_ids, BIG):
            e = begun[op_id]
            assert (e.job_id, e.op, e.prior_bit, e.actor, e.finished) == (job_id, Op.REQUEUE, CLEAR, "uid 0 (root)",
                                                                          False)

        outcomes = [for_job(templates[n % len(templates)], j) for n, j in enumerate(BIG)]
        stderrs = [f"call {n}\n".encode() if n % 5 else b"" for n in range(len(BIG))]
        stderrs[600] = b"\xff" * (STDERR_CAP + 10)
        bits = ledger.finish_operations(list(zip(op_ids, outcomes, stderrs)), 6.0)
        assert bits == [naive_after(CLEAR, o) for o in outcomes]
        finished = {e.id: e for e in ledger.export_history(0, 10_000)}
        for op_id, job_id, outcome, stderr, bit in zip(op_ids, BIG, outcomes, stderrs, bits):
            e = finished[op_id]
            assert (e.job_id, e.finished_at, e.result, e.bit_after, e.reason) == (
                job_id, 6.0, outcome.result, bit, outcome.reason
            )
            assert (e.stderr, e.stderr_len, len(e.calls)) == (stderr[:STDERR_CAP], len(stderr), len(outcome.calls))
            obj = ledger.get(job_id) if job_id in BIG[:5] else None
            assert obj is None or (obj.bit, obj.updated_at) == (bit, 6.0)
        assert ledger.count_by_bit() == {bit: bits.count(bit) for bit in RequeueBit}

        assert ledger.acquire_leases(BIG, "sweep", 7.0, 10.0) == []  # all still the chunk's
        assert ledger.release_leases(BIG, "bulk") == len(BIG)
        assert ledger.release_leases(BIG, "bulk") == 0
        assert ledger.acquire_leases(BIG, "sweep", 7.0, 10.0) == BIG


@pytest.mark.parametrize("version", [(3, 32, 3), sqlite3.sqlite_version_info])
def test_finishing_a_chunk_needs_no_update_from_on_an_older_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: Tuple[int, int, int]
) -> None:
    # UPDATE ... FROM is SQLite 3.33's: an older library finishes the rows one UPDATE each.
    monkeypatch.setattr(sqlite3, "sqlite_version_info", version)
    with open_ledger(str(tmp_path / "ledger.sqlite3")) as ledger:
        op_ids = ledger.begin_operations([(j, Op.REQUEUE, NONCE) for j in BIG[:700]], 1.0)
        outcomes = [for_job(REQUEUE_OK if n % 2 else REQUEUE_BIT_SET, j) for n, j in enumerate(BIG[:700])]
        bits = ledger.finish_operations([(i, o, b"e") for i, o in zip(op_ids, outcomes)], 2.0)
        assert bits == [naive_after(CLEAR, o) for o in outcomes]
        entries = {e.id: e for e in ledger.export_history(0, 10_000)}
        assert [(entries[i].result, entries[i].bit_after, entries[i].stderr) for i in op_ids] == [
            (o.result, b, b"e") for o, b in zip(outcomes, bits)
        ]


def test_repeats_in_a_chunk_come_out_as_one_call_after_the_other(ledger_location: str) -> None:
    """The same chunk through the batch methods (jobs 1xx) and item by item (jobs 2xx) leaves the
    same objects, history and answers: a job's second start sees what its first left, a job's
    second finish sees the bit its first wrote."""
    n1, n2 = "aa" * 16, "bb" * 16
    starts = [(0, Op.REQUEUE, n1), (0, Op.REQUEUE, n2), (1, Op.HOLD, n1), (1, Op.REQUEUE, n2),
              (2, Op.REQUEUE, n1), (2, Op.HOLD, n2), (3, Op.HOLD, n1), (3, Op.RESTORE, n2),
              (4, Op.REQUEUE, n1), (4, Op.REQUEUE, n2), (5, Op.OPEN, n1)]
    results = [REQUEUE_S1_UNKNOWN, REQUEUE_BIT_SET, HOLD_OK, REQUEUE_OK, REQUEUE_OK, HOLD_OK, HOLD_OK, RESTORE_OK,
               REQUEUE_CLEAR_FAILED, REQUEUE_EXPIRED, OPEN_OK]
    order = [1, 0, 2, 3, 4, 5, 7, 6, 8, 9, 10]  # finishes: job 0's second first, job 3's restore before its hold

    def job(series: int, n: int) -> str:
        return str(series * 100 + n)

    def state(ledger: LedgerStore, series: int) -> List[Tuple[Any, ...]]:
        seen: List[Tuple[Any, ...]] = []
        for n in range(6):
            obj = ledger.get(job(series, n))
            assert obj is not None
            seen.append((obj.bit, obj.why, obj.updated_at, obj.lookup_failures, obj.next_lookup_at))
            seen.extend((e.op, e.nonce, e.started_at, e.prior_bit, e.finished_at, e.result, e.bit_after, e.actor)
                        for e in ledger.history(job(series, n)))
        return seen

    with fresh_ledger(ledger_location, backoff_base=10.0, backoff_cap=100.0) as ledger:
        for series in (1, 2):  # jobs 3 and 4 exist, set, backed off
            for n in (3, 4):
                force_bit(ledger, job(series, n), SET)
            ledger.lookups_failed([job(series, 3), job(series, 4)], "down", 2.0)
        batch_ids = ledger.begin_operations([(job(1, n), op, nonce) for n, op, nonce in starts], 5.0, actor="me")
        single_ids = [begin_operation(ledger, job(2, n), op, nonce, 5.0, actor="me") for n, op, nonce in starts]
        assert [ledger.history(job(1, n))[-2 if i in (0, 2, 4, 6, 8) else -1].id for i, (n, _, _) in
                enumerate(starts)] == batch_ids  # in the order of the starts
        assert state(ledger, 1) == state(ledger, 2)
        batch_bits = ledger.finish_operations(
            [(batch_ids[i], for_job(results[i], job(1, starts[i][0])), b"") for i in order], 6.0
        )
        single_bits = [
            finish_operation(ledger, single_ids[i], for_job(results[i], job(2, starts[i][0])), b"", 6.0) for i in order
        ]
        assert batch_bits == single_bits
        assert state(ledger, 1) == state(ledger, 2)
        # Its first requeue finished last, after the second had begun: a late finish (Rule 7) never
        # makes the bit clearer, so the second's set stays.
        last = ledger.get(job(1, 0))
        assert last is not None and (last.bit, last.why) == (SET, f"requeue {n2}: bit_set (clear_not_run)")


def test_one_bad_entry_among_many_writes_nothing_at_all(ledger_location: str) -> None:
    with fresh_ledger(ledger_location) as ledger:
        op_ids = ledger.begin_operations([(j, Op.REQUEUE, NONCE) for j in BIG], 5.0)
        finish_operation(ledger, op_ids[700], for_job(REQUEUE_OK, BIG[700]), b"", 5.5)
        ledger.acquire_leases(BIG[:10], "bulk", 5.0, 60.0)
        before = snapshot(ledger_location)
        finishes = [(i, for_job(REQUEUE_OK, j), b"") for i, j in zip(op_ids, BIG)]
        with pytest.raises(LedgerError, match=f"operation {op_ids[700]} already finished"):
            ledger.finish_operations(finishes, 6.0)  # the already-finished one in the middle
        unfinished = [f for n, f in enumerate(finishes) if n != 700]
        with pytest.raises(LedgerError, match=f"operation {op_ids[5]} already finished"):
            ledger.finish_operations([*unfinished[:600], unfinished[5], *unfinished[600:]], 6.0)  # one twice
        with pytest.raises(LedgerError, match="no operation 99999999"):
            ledger.finish_operations([*unfinished[:900], (99_999_999, REQUEUE_OK, b""), *unfinished[900:]], 6.0)
        foreign = [*unfinished[:1000], (unfinished[1000][0], HOLD_OK, b""), *unfinished[1001:]]
        with pytest.raises(ValueError, match="is requeue"):
            ledger.finish_operations(foreign, 6.0)
        with pytest.raises(ValueError, match="invalid job id"):
            ledger.begin_operations([(j, Op.REQUEUE, NONCE) for j in [*BIG[:1100], "1_2", *BIG[1100:]]], 6.0)
        with pytest.raises(LedgerError, match="already finished"):
            with ledger.batch():  # a chunk's results with its leases given back: none of it either
                ledger.release_leases(BIG, "bulk")
                ledger.finish_operations(finishes, 6.0)
        assert snapshot(ledger_location) == before
        assert ledger.finish_operations(unfinished, 6.0) == [MAY] * len(unfinished)  # and then all of them (watched)


def test_a_chunks_leases_skip_the_jobs_another_owner_holds(ledger_location: str) -> None:
    live = [j for n, j in enumerate(BIG) if n % 7 == 0]  # another owner's, unexpired at 5.0
    lapsed = [j for n, j in enumerate(BIG) if n % 7 and n % 11 == 0]  # another owner's, expired at 5.0
    own = [j for n, j in enumerate(BIG) if n % 7 and n % 11 and n % 13 == 0]  # the chunk's own: renewed
    with fresh_ledger(ledger_location) as ledger:
        assert ledger.acquire_leases(live, "other", 4.0, 60.0) == live
        assert ledger.acquire_leases(lapsed, "other", 0.0, 5.0) == lapsed
        assert ledger.acquire_leases(own, "bulk", 4.0, 2.0) == own
        wanted = [*BIG, BIG[0], BIG[1]]  # a repeat is answered as its first
        expected = [j for j in wanted if j not in set(live)]
        assert ledger.acquire_leases(wanted, "bulk", 5.0, 60.0) == expected
        with Raw(ledger_location) as conn:
            leases = {j: (o, e) for j, o, e in conn.execute("SELECT job_id, owner, expires_at FROM leases")}
        assert leases == {j: ("other", 64.0) if j in set(live) else ("bulk", 65.0) for j in BIG}
        assert ledger.release_leases([*BIG, BIG[1]], "bulk") == len(BIG) - len(live)
        assert ledger.acquire_leases(BIG, "sweep", 6.0, 10.0) == expected[: len(BIG) - len(live)]


def test_history_ids_read_back_must_be_exactly_the_rows_appended() -> None:
    rows = [("1", "hold", NONCE, 5.0, "clear", None), ("1", "requeue", NONCE, 5.0, "clear", None)]
    found = [(7, "1", "hold", NONCE, "clear"), (9, "1", "requeue", NONCE, "clear")]
    assert ledger_rows.inserted_ids("L", rows, found) == [7, 9]  # gaps (auto_increment_increment > 1) do not matter
    for found in ([(7, "1", "hold", NONCE, "clear")],  # one missing
                  [(7, "1", "requeue", NONCE, "clear"), (8, "1", "hold", NONCE, "clear")],  # not in their order
                  [(7, "1", "hold", NONCE, "clear"), (8, "2", "hold", NONCE, "clear")]):  # another writer's
        with pytest.raises(LedgerError, match="not the 2 this transaction appended"):
            ledger_rows.inserted_ids("L", rows, found)
