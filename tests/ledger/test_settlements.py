"""The ledger's settling API (docs/contract.md §9.1, §12; issue 18): what an operation records at
its start (baseline, baseline_at, key, retry_of, ends_by), the settlements table (appended, final,
one per operation) and the reads that settling needs (``unsettled``, ``count_unsettled``,
``keyed``, ``later_operations``).  Both backends (``ledger_location``), and SQLite's schema 2 ->
3 on a real schema-2 file made by the migrations.

Rule 1: a verdict is final: a second one for an operation is skipped, never an error, and a batch
with one bad id writes nothing.  Rule 2: ``unsettled`` is every row with no settlement whose result
is unknown, or that has no result and no longer runs (a later row of its job, no unexpired lease,
or ``ends_by`` passed), newest first.  The expected answers are worked out here from those words,
not from the store's helpers.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import slurm_dsl.ledger.sqlite as sqlite_module
from slurm_dsl.core import ledger_rules as rules
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import (
    Call,
    CallOutcome,
    InvalidInput,
    LedgerError,
    Op,
    Outcome,
    Reason,
    RequeueBit,
    Result,
    Verdict,
)
from slurm_dsl.ledger import schema
from slurm_dsl.ledger.base import LedgerStore
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.records import HistoryEntry, Settlement
from tests.examples import examples
from tests.ledger_backends import RAW_ERRORS, Raw, is_mariadb
from tests.ledger_ops import begin_operation, finish_operation

T0 = 1_700_000_000.25
PENDING = JobInfo("7", "PENDING", True, 0, 4294901, "BeginTime")
RUNNING = JobInfo("7", "RUNNING", True, 1, 4294900, "None", array_job_id="6", array_tasks=1)


def unknown(op: Op, job: str) -> Outcome:
    calls = (Call(1, 124, "124", b"", CallOutcome.UNKNOWN, None, Reason.TIMED_OUT),)
    bit = RequeueBit.MAY_BE_SET if op in (Op.REQUEUE, Op.REQUEUE_HOLD) else None
    return Outcome(op, job, Result.UNKNOWN, bit, Reason.TIMED_OUT, calls, 124)


def ok(op: Op, job: str) -> Outcome:
    calls = (Call(1, 0, "0", b"", CallOutcome.SUCCESS, None, None),)
    return Outcome(op, job, Result.OK, RequeueBit.CLEAR if op.requeues else None, None, calls, 0)


def nonce(n: int) -> str:
    return f"{n:032x}"


def run(ledger: LedgerStore, job: str, op: Op, at: float, outcome: Optional[Outcome], n: int, **start: object) -> int:
    """One operation at ``at``, finished a second later with ``outcome`` (None: left unfinished)."""
    op_id = begin_operation(ledger, job, op, nonce(n), at, **start)  # type: ignore[arg-type]
    if outcome is not None:
        finish_operation(ledger, op_id, outcome, b"err\n", at + 1)
    return op_id


# -- what a start records ---------------------------------------------------------------------------


def test_the_start_columns_are_stored_and_read_back(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        first = begin_operation(ledger, "7", Op.REQUEUE, nonce(1), T0, actor="me", baseline=PENDING,
                                       baseline_at=T0 - 0.125, key="nightly-2026-12-01", ends_by=T0 + 95.5)
        ids = ledger.begin_operations([("7", Op.HOLD, nonce(2)), ("8", Op.HOLD, nonce(3))], T0 + 1,
                                      baselines={"7": RUNNING}, baseline_at=T0 + 0.5, key="k",
                                      retry_of={"8": first}, ends_by=T0 + 50)
        plain = begin_operation(ledger, "9", Op.RESTORE, nonce(4), T0 + 2)
        (a, b), (c,), (d,) = ledger.history("7"), ledger.history("8"), ledger.history("9")
    assert (a.id, a.baseline, a.baseline_at, a.key, a.retry_of, a.ends_by) == (
        first, PENDING, T0 - 0.125, "nightly-2026-12-01", None, T0 + 95.5)
    assert (b.id, b.baseline, b.baseline_at, b.key, b.retry_of, b.ends_by) == (ids[0], RUNNING, T0 + 0.5, "k", None,
                                                                              T0 + 50)
    # A job without a baseline has no baseline_at either.
    assert (c.id, c.baseline, c.baseline_at, c.key, c.retry_of, c.ends_by) == (ids[1], None, None, "k", first, T0 + 50)
    assert (d.id, d.baseline, d.baseline_at, d.key, d.retry_of, d.ends_by, d.settlement) == (
        plain, None, None, None, None, None, None)
    blob = a.to_json()
    assert blob["baseline"] == {"job_id": "7", "state": "PENDING", "requeue": True, "restarts": 0,
                                "priority": 4294901, "reason": "BeginTime", "array_job_id": None, "array_tasks": 1}
    assert (blob["baseline_at_epoch"], blob["ends_by_epoch"], blob["key"], blob["retry_of"]) == (
        T0 - 0.125, T0 + 95.5, "nightly-2026-12-01", None)
    assert blob["baseline_at"] == "2023-11-14T22:13:20Z" and (blob["effect"], blob["settlement"]) == (None, None)
    with Raw(ledger_location) as conn:
        (text,) = conn.execute("SELECT baseline FROM history WHERE id = ?", (first,))[0]
    assert json.loads(text)["restarts"] == 0 and " " not in text, "compact JSON, every field"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"key": ""}, "a key is 1-128 letters"),
        ({"key": "x" * 256}, "a key is 1-128 letters"),
        ({"key": "a\nb"}, "a key is 1-128 letters"),
        ({"baseline_at": float("nan")}, "baseline_at must be a finite number"),
        ({"ends_by": "soon"}, "ends_by must be a finite number"),
        ({"retry_of": 0}, "retry_of must name a history id"),
        ({"retry_of": True}, "retry_of must name a history id"),
        ({"baseline": {"job_id": "7"}}, "must be a JobInfo"),
        ({"baseline": JobInfo("7", "PENDING", True, "0", 1, "")}, "restarts"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_start_field_is_refused_and_writes_nothing(
    ledger_location: str, kwargs: Dict[str, object], match: str
) -> None:
    with open_ledger(ledger_location) as ledger:
        with pytest.raises(InvalidInput, match=match):
            begin_operation(ledger, "7", Op.REQUEUE, nonce(1), T0, **kwargs)  # type: ignore[arg-type]
        assert ledger.history("7") == [] and ledger.get("7") is None


def test_the_start_columns_are_guarded_like_the_others(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        op_id = begin_operation(ledger, "7", Op.HOLD, nonce(1), T0, baseline=PENDING, baseline_at=T0, key="k",
                                       ends_by=T0 + 9)
    with Raw(ledger_location) as conn:
        for column, value in [("baseline", "{}"), ("baseline_at", 1.0), ("op_key", "other"), ("retry_of", 1),
                              ("ends_by", 1.0)]:
            with pytest.raises(RAW_ERRORS, match="append-only"):
                conn.execute(f"UPDATE history SET {column} = ? WHERE id = ?", (value, op_id))


def test_a_malformed_stored_record_is_a_ledger_error(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        begin_operation(ledger, "7", Op.HOLD, nonce(1), T0)
        begin_operation(ledger, "8", Op.HOLD, nonce(2), T0)
    with Raw(ledger_location) as conn:  # as another program could have written them
        conn.execute("INSERT INTO history (job_id, op, nonce, started_at, prior_bit, baseline) VALUES"
                     " ('7', 'hold', ?, ?, 'clear', '{\"job_id\": \"7\"}')", (nonce(3), T0 + 1))
        conn.execute("INSERT INTO history (job_id, op, nonce, started_at, prior_bit, baseline) VALUES"
                     " ('8', 'hold', ?, ?, 'clear', 'not json')", (nonce(4), T0 + 1))
    with open_ledger(ledger_location) as ledger:
        for job in "78":
            with pytest.raises(LedgerError, match="a stored job record is malformed"):
                ledger.history(job)


# -- settlements ------------------------------------------------------------------------------------


def test_acknowledged_reads_the_ok_and_unfinished_rows_without_a_verdict_in_id_order(ledger_location: str) -> None:
    # What a sweep reads again after a crash may have lost them (docs/contract.md §13.4), on both
    # dialects: ok and bit_set rows, and unfinished ones, from an id on and a time on, none with a
    # settlement; never an unknown or refused one; at most the limit, oldest id first.
    bit_set = Outcome(Op.REQUEUE, "9", Result.BIT_SET, RequeueBit.SET, Reason.CLEAR_FAILED, (), 1)
    with open_ledger(ledger_location) as ledger:
        old = run(ledger, "5", Op.HOLD, T0 - 100, ok(Op.HOLD, "5"), 1)  # started before ``since``
        held = run(ledger, "7", Op.HOLD, T0, ok(Op.HOLD, "7"), 2)
        run(ledger, "8", Op.HOLD, T0 + 1, unknown(Op.HOLD, "8"), 3)
        requeued = run(ledger, "9", Op.REQUEUE, T0 + 2, bit_set, 4)
        open_ = run(ledger, "10", Op.RELEASE, T0 + 3, None, 5)
        lost = run(ledger, "11", Op.HOLD, T0 + 4, ok(Op.HOLD, "11"), 6)
        ledger.add_settlements([(lost, Verdict.ABSENT, T0 + 20, None, "acknowledged, then lost")], T0 + 21, by="sweep")
        assert [r.id for r in ledger.acknowledged(old, T0)] == [held, requeued, open_]
        assert [r.id for r in ledger.acknowledged(old, T0 - 200)] == [old, held, requeued, open_]
        assert [r.id for r in ledger.acknowledged(requeued, T0, limit=1)] == [requeued]
        (read,) = ledger.acknowledged(requeued, T0, limit=1)
    assert (read.job_id, read.op, read.result, read.reason) == ("9", Op.REQUEUE, Result.BIT_SET, Reason.CLEAR_FAILED)


def test_add_settlements_writes_each_once_and_history_shows_it(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        a = run(ledger, "7", Op.REQUEUE, T0, unknown(Op.REQUEUE, "7"), 1, baseline=PENDING, baseline_at=T0)
        b = run(ledger, "8", Op.HOLD, T0, None, 2)  # unfinished: settled like an unknown result
        written = ledger.add_settlements(
            [(a, Verdict.PRESENT, T0 + 20, RUNNING, "RestartCnt 1 > baseline 0"),
             (b, Verdict.GONE, T0 + 20, None, "gone"),
             (a, Verdict.ABSENT, T0 + 30, PENDING, "a second verdict in the same batch")],
            T0 + 21, by="sweep uid 0 (root) on ctl1",
        )
        assert written == 2
        # A second settler that raced the first: skipped, not an error, and the first one stays.
        assert ledger.add_settlements([(a, Verdict.ABSENT, T0 + 40, PENDING, "late")], T0 + 41, by="settle") == 0
        assert ledger.add_settlements([], T0 + 41, by="settle") == 0
        (entry,) = ledger.history("7")
        (other,) = ledger.history("8")
    s = entry.settlement
    assert s is not None and isinstance(s, Settlement)
    assert (s.op_id, s.job_id, s.verdict, s.looked_at, s.record, s.settled_at, s.by, s.detail) == (
        a, "7", Verdict.PRESENT, T0 + 20, RUNNING, T0 + 21, "sweep uid 0 (root) on ctl1", "RestartCnt 1 > baseline 0")
    assert other.settlement is not None and (other.settlement.verdict, other.settlement.record) == (Verdict.GONE, None)
    blob = entry.to_json()
    assert blob["effect"] == "present" and blob["result"] == "unknown", "next to the result, never instead"
    assert blob["settlement"] == {
        "kind": "verdict", "id": s.id, "op_id": a, "job_id": "7", "verdict": "present",
        "looked_at": "2023-11-14T22:13:40Z", "looked_at_epoch": T0 + 20,
        "record": {"job_id": "7", "state": "RUNNING", "requeue": True, "restarts": 1, "priority": 4294900,
                   "reason": "None", "array_job_id": "6", "array_tasks": 1},
        "settled_at": "2023-11-14T22:13:41Z", "settled_at_epoch": T0 + 21,
        "by": "sweep uid 0 (root) on ctl1", "detail": "RestartCnt 1 > baseline 0",
    }


def test_a_batch_with_one_bad_id_writes_nothing(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        a = run(ledger, "7", Op.HOLD, T0, unknown(Op.HOLD, "7"), 1)
        done = run(ledger, "8", Op.HOLD, T0, ok(Op.HOLD, "8"), 2)
        with pytest.raises(LedgerError, match=f"no operation {a + 100} to settle"):
            ledger.add_settlements([(a, Verdict.PRESENT, T0, None, ""), (a + 100, Verdict.GONE, T0, None, "")],
                                   T0 + 5, by="sweep")
        with pytest.raises(LedgerError, match=f"operation {done} finished ok, not unknown"):
            ledger.add_settlements([(a, Verdict.PRESENT, T0, None, ""), (done, Verdict.PRESENT, T0, None, "")],
                                   T0 + 5, by="sweep")
        with pytest.raises(InvalidInput, match="not a verdict"):
            ledger.add_settlements([(a, "maybe", T0, None, "")], T0 + 5, by="sweep")  # type: ignore[list-item]
        with pytest.raises(InvalidInput, match="looked_at must be a finite number"):
            ledger.add_settlements([(a, Verdict.GONE, float("inf"), None, "")], T0 + 5, by="sweep")
        assert [e.settlement for e in ledger.history("7")] == [None]
        assert ledger.unsettled(T0 + 10, since=0.0)[0].id == a


def test_gone_ones_are_written_by_id_alone_like_the_others(ledger_location: str) -> None:
    """``add_settlements``' ``gone``: the settlement ``OneLookup.gone`` gives, for ids alone, in the
    same transaction; an operation already settled (or settled by ``verdicts`` first) is skipped."""
    with open_ledger(ledger_location) as ledger:
        a = run(ledger, "7", Op.REQUEUE, T0, unknown(Op.REQUEUE, "7"), 1, baseline=PENDING, baseline_at=T0)
        b = run(ledger, "8", Op.HOLD, T0, None, 2)  # unfinished
        c = run(ledger, "9", Op.HOLD, T0, unknown(Op.HOLD, "9"), 3)
        ledger.add_settlements([(c, Verdict.PRESENT, T0 + 5, None, "held")], T0 + 6, by="settle")
        written = ledger.add_settlements([(b, Verdict.ABSENT, T0 + 19, None, "first")], T0 + 21, by="sweep, me",
                                         gone=[a, b, a, c], gone_at=T0 + 20)
        assert written == 2  # b's ABSENT (first), a's GONE; c kept its verdict
        assert ledger.add_settlements([], T0 + 30, by="sweep", gone=[a], gone_at=T0 + 29) == 0  # a second settler
        settled = {e.id: e.settlement for job in "789" for e in ledger.history(job)}
    sa, sb, sc = settled[a], settled[b], settled[c]
    assert sa is not None and (sa.verdict, sa.looked_at, sa.record, sa.settled_at, sa.by, sa.detail, sa.job_id) == (
        Verdict.GONE, T0 + 20, None, T0 + 21, "sweep, me", "gone: slurmctld no longer knows the job", "7")
    assert sb is not None and (sb.verdict, sb.detail) == (Verdict.ABSENT, "first")
    assert sc is not None and (sc.verdict, sc.by) == (Verdict.PRESENT, "settle")


def test_a_gone_batch_with_one_bad_id_writes_nothing(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        a = run(ledger, "7", Op.HOLD, T0, unknown(Op.HOLD, "7"), 1)
        b = run(ledger, "8", Op.HOLD, T0, unknown(Op.HOLD, "8"), 2)
        done = run(ledger, "9", Op.HOLD, T0, Outcome(Op.HOLD, "9", Result.REJECTED, None), 3)
        acked = run(ledger, "10", Op.HOLD, T0, ok(Op.HOLD, "10"), 4)
        with pytest.raises(LedgerError, match=f"no operation {b + 100} to settle"):
            ledger.add_settlements([(a, Verdict.PRESENT, T0, None, "")], T0 + 5, by="sweep", gone=[b, b + 100],
                                   gone_at=T0 + 4)
        with pytest.raises(LedgerError, match=f"operation {done} finished rejected, not unknown"):
            ledger.add_settlements([], T0 + 5, by="sweep", gone=[b, done], gone_at=T0 + 4)
        # An acknowledged one takes a final "lost" verdict only (docs/contract.md §13.4), never present.
        with pytest.raises(LedgerError, match=f"operation {acked} finished ok, not unknown"):
            ledger.add_settlements([(acked, Verdict.PRESENT, T0, None, "")], T0 + 5, by="keyed")
        for bad in (True, "3", 2.0):
            with pytest.raises(InvalidInput, match="must be a history id"):
                ledger.add_settlements([], T0 + 5, by="sweep", gone=[b, bad], gone_at=T0 + 4)  # type: ignore[list-item]
        with pytest.raises(InvalidInput, match="gone_at must be a finite number"):
            ledger.add_settlements([], T0 + 5, by="sweep", gone=[b], gone_at=float("nan"))
        assert [e.settlement for job in "78" for e in ledger.history(job)] == [None, None]


def test_to_settle_is_unsettled_without_baselines_and_recorded_reads_them_again(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        a = run(ledger, "7", Op.REQUEUE, T0, unknown(Op.REQUEUE, "7"), 1, baseline=PENDING, baseline_at=T0 - 1,
                ends_by=T0 + 30)
        b = run(ledger, "8", Op.HOLD, T0 + 5, None, 2)  # unfinished, no lease: no longer runs
        run(ledger, "9", Op.HOLD, T0 + 6, ok(Op.HOLD, "9"), 3)
        whole = ledger.unsettled(T0 + 60, since=0.0)
        pending = ledger.to_settle(T0 + 60, since=0.0)
        assert [p.id for p in pending] == [e.id for e in whole] == [b, a]
        assert [tuple(p) for p in pending] == [
            (e.id, e.job_id, e.op, e.result, e.started_at, e.finished_at, e.ends_by) for e in whole]
        assert [p.id for p in ledger.to_settle(T0 + 60, since=T0 + 1)] == [b]
        assert [p.id for p in ledger.to_settle(T0 + 60, since=0.0, limit=1)] == [b]
        again = ledger.recorded([a, b, b + 100])
        assert sorted(again) == [a, b] and again[a] == whole[1] and again[a].baseline == PENDING
        assert ledger.recorded([]) == {}


def test_settlements_are_append_only(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        a = run(ledger, "7", Op.HOLD, T0, unknown(Op.HOLD, "7"), 1)
        ledger.add_settlements([(a, Verdict.PRESENT, T0 + 2, None, "")], T0 + 3, by="sweep")
    with Raw(ledger_location) as conn:
        with pytest.raises(RAW_ERRORS, match="append-only"):
            conn.execute("UPDATE settlements SET verdict = 'absent'")
        with pytest.raises(RAW_ERRORS, match="append-only"):
            conn.execute("DELETE FROM settlements")
        with pytest.raises(RAW_ERRORS):  # one per operation
            conn.execute("INSERT INTO settlements (op_id, job_id, verdict, looked_at, settled_at, settled_by, detail)"
                         " VALUES (?, '7', 'absent', 1, 1, 'x', '')", (a,))
        assert conn.execute("SELECT count(*) FROM settlements") == [(1,)]


def test_prune_removes_settlements_only_with_their_rows(ledger_location: str) -> None:
    old = T0 - 200 * 86400
    with open_ledger(ledger_location) as ledger:
        gone = run(ledger, "7", Op.HOLD, old, unknown(Op.HOLD, "7"), 1)
        newest = run(ledger, "7", Op.HOLD, old + 10, unknown(Op.HOLD, "7"), 2)  # an object's newest row stays
        recent = run(ledger, "8", Op.HOLD, T0 - 10, unknown(Op.HOLD, "8"), 3)
        run(ledger, "8", Op.RELEASE, T0 - 5, ok(Op.RELEASE, "8"), 4)
        assert ledger.add_settlements([(i, Verdict.PRESENT, T0, None, str(i)) for i in (gone, newest, recent)],
                                      T0, by="sweep") == 3
        assert ledger.prune(rules.prune_before(T0, 90), T0, dry_run=True).removed == 1
        with Raw(ledger_location) as conn:
            assert conn.execute("SELECT count(*) FROM settlements") == [(3,)], "a dry run removes nothing"
        assert ledger.prune(rules.prune_before(T0, 90), T0).removed == 1
        assert [e.id for e in ledger.history("7")] == [newest] and ledger.history("7")[0].settlement is not None
        assert ledger.history("8")[0].settlement is not None
    with Raw(ledger_location) as conn:
        assert sorted(r[0] for r in conn.execute("SELECT op_id FROM settlements")) == [newest, recent]


def test_prune_removes_what_else_is_kept_of_an_operation_with_it(ledger_location: str) -> None:
    """An operation's looks (``op_looks``) and when it was found over (``op_seen``) go with its row."""
    old = T0 - 200 * 86400
    with open_ledger(ledger_location) as ledger:
        gone = run(ledger, "7", Op.HOLD, old, unknown(Op.HOLD, "7"), 1)
        newest = run(ledger, "7", Op.HOLD, old + 10, unknown(Op.HOLD, "7"), 2)
        ledger.anchor_operations([gone, newest], None)
        ledger.seen_over([gone, newest], "host-a/boot-1", 5.0)
        assert ledger.add_settlements([(i, Verdict.PRESENT, T0, None, str(i)) for i in (gone, newest)],
                                      T0, by="sweep") == 2
        assert ledger.prune(rules.prune_before(T0, 90), T0).removed == 1
    with Raw(ledger_location) as conn:
        for table in ("op_looks", "op_seen"):
            assert [r[0] for r in conn.execute(f"SELECT op_id FROM {table}")] == [newest], table


# -- unsettled and its counts -----------------------------------------------------------------------


def naive_unsettled(rows: List[Tuple[HistoryEntry, bool, bool]], now: float, since: float) -> List[int]:
    """Rule 2 in the module's words, from each row, whether it is its job's newest, and whether
    its job holds an unexpired lease."""
    chosen = []
    for e, newest, leased in rows:
        if e.settlement is not None or e.started_at < since:
            continue
        if e.finished:
            if e.result is Result.UNKNOWN:
                chosen.append(e)
        elif not newest or not leased or (e.ends_by is not None and now >= e.ends_by):
            chosen.append(e)
    chosen.sort(key=lambda e: (-e.started_at, -e.id))
    return [e.id for e in chosen]


def test_unsettled_follows_the_lease_the_later_row_and_ends_by(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        running = run(ledger, "1", Op.HOLD, T0 + 50, None, 1, ends_by=T0 + 200)  # leased, its job's newest
        no_lease = run(ledger, "2", Op.REQUEUE, T0 + 20, None, 2)
        superseded = run(ledger, "3", Op.HOLD, T0 + 10, None, 3)
        later = run(ledger, "3", Op.RELEASE, T0 + 60, None, 4)  # runs, under job 3's lease
        past_end = run(ledger, "4", Op.HOLD, T0 + 30, None, 5, ends_by=T0 + 90)  # leased, but its end has passed
        run(ledger, "5", Op.HOLD, T0, ok(Op.HOLD, "5"), 6)  # finished ok: nothing to settle
        unknown_one = run(ledger, "6", Op.HOLD, T0 + 40, unknown(Op.HOLD, "6"), 7)
        settled = run(ledger, "7", Op.HOLD, T0 + 45, unknown(Op.HOLD, "7"), 8)
        ledger.add_settlements([(settled, Verdict.PRESENT, T0 + 47, None, "")], T0 + 48, by="sweep")
        assert ledger.acquire_leases(["1", "3", "4"], "op-a", T0 + 60, 600.0) == ["1", "3", "4"]

        def ids(now: float, **kw: object) -> List[int]:
            return [e.id for e in ledger.unsettled(now, **kw)]  # type: ignore[arg-type]

        assert ids(T0 + 89) == [unknown_one, no_lease, superseded]
        assert ids(T0 + 90) == [unknown_one, past_end, no_lease, superseded]  # now >= ends_by
        assert ids(T0 + 90, limit=2) == [unknown_one, past_end]
        assert ids(T0 + 90, limit=-1) == ids(T0 + 90)
        assert ids(T0 + 90, since=T0 + 20) == [unknown_one, past_end, no_lease]
        assert ids(T0 + 90, job_ids=["3", "6", "9", "3"]) == [unknown_one, superseded]
        assert ids(T0 + 90, job_ids=["3", "6"], limit=1) == [unknown_one]
        assert ids(T0 + 90, job_ids=[]) == []
        # The lease lapses: nothing runs any more.
        assert ids(T0 + 1000) == [later, running, unknown_one, past_end, no_lease, superseded]
        assert ledger.count_unsettled(T0 + 1000) == [6, 0, 0, 0]
        assert ledger.count_unsettled(T0 + 90, edges=(55.0, 75.0)) == [1, 2, 1]  # ages 50, 60, 70, 80
        assert ledger.count_unsettled(T0 + 10 * 86400) == [0, 0, 0, 6]
        with pytest.raises(InvalidInput, match="edges must be positive and increasing"):
            ledger.count_unsettled(T0, edges=(10.0, 5.0))
        with pytest.raises(ValueError):
            ledger.unsettled(T0, job_ids=["not a job"])


OPS = st.tuples(
    st.sampled_from("123"),  # job
    st.sampled_from([Op.HOLD, Op.REQUEUE]),
    st.sampled_from(["unfinished", "ok", "unknown"]),
    st.booleans(),  # settled (if it can be)
    st.one_of(st.none(), st.integers(0, 60)),  # ends_by, seconds after T0
)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, max_size=8), leased=st.sets(st.sampled_from("123")), now=st.integers(0, 80),
       since=st.integers(0, 8))
def test_unsettled_is_rule_2(
    tmp_path_factory: pytest.TempPathFactory, ops: List[Tuple[str, Op, str, bool, Optional[int]]],
    leased: set[str], now: int, since: int,
) -> None:
    path = str(tmp_path_factory.mktemp("u") / "ledger.sqlite3")
    with open_ledger(path) as ledger:
        for n, (job, op, how, settle, ends_by) in enumerate(ops):
            outcome = {"unfinished": None, "ok": ok(op, job), "unknown": unknown(op, job)}[how]
            op_id = run(ledger, job, op, T0 + n, outcome, n, ends_by=None if ends_by is None else T0 + ends_by)
            if settle and how != "ok":
                ledger.add_settlements([(op_id, Verdict.ABSENT, T0 + n, None, "")], T0 + n, by="sweep")
        if leased:
            ledger.acquire_leases(sorted(leased), "op-a", T0 + 100, 600.0)
        rows = [e for job in "123" for e in ledger.history(job)]
        newest = {job: max((e.id for e in rows if e.job_id == job), default=0) for job in "123"}
        facts = [(e, e.id == newest[e.job_id], e.job_id in leased) for e in rows]
        assert [e.id for e in ledger.unsettled(T0 + now, since=T0 + since)] == naive_unsettled(
            facts, T0 + now, T0 + since)
        assert sum(ledger.count_unsettled(T0 + now)) == len(naive_unsettled(facts, T0 + now, -1e300))


def test_unsettled_reads_only_the_unknown_and_unfinished_rows(tmp_path: Path) -> None:
    """The index (SQLite's partial index) is what the read walks: the query plan says so."""
    path = str(tmp_path / "ledger.sqlite3")
    with open_ledger(path) as ledger:
        for n in range(300):
            run(ledger, str(n % 50 + 1), Op.HOLD, T0 + n, ok(Op.HOLD, str(n % 50 + 1)), n)
        run(ledger, "99", Op.HOLD, T0 + 400, unknown(Op.HOLD, "99"), 400)
        assert [e.job_id for e in ledger.unsettled(T0 + 500)] == ["99"]
    from slurm_dsl.ledger import rows as ledger_rows
    from slurm_dsl.ledger.query import UNSETTLED_WHERE as _UNSETTLED_WHERE
    from slurm_dsl.ledger.store import SqlStore

    sql = ledger_rows.SELECT_HISTORY + _UNSETTLED_WHERE.format(unsettled=SqlStore.UNSETTLED)
    conn = sqlite3.connect(path)
    plan = " ".join(str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql + " ORDER BY h.started_at DESC,"
                                                     " h.id DESC", (0.0, T0, T0)))
    conn.close()
    assert "history_unsettled" in plan and "SCAN h " not in plan + " ", plan


def test_mariadb_unsettled_uses_its_indexed_column(mariadb_location: str) -> None:
    with open_ledger(mariadb_location) as ledger:
        for n in range(40):
            run(ledger, str(n + 1), Op.HOLD, T0 + n, ok(Op.HOLD, str(n + 1)), n)
        run(ledger, "99", Op.HOLD, T0 + 400, unknown(Op.HOLD, "99"), 400)
    import slurm_dsl.ledger.mariadb as mariadb_module
    from slurm_dsl.ledger import rows as ledger_rows
    from slurm_dsl.ledger.query import UNSETTLED_WHERE as _UNSETTLED_WHERE

    sql = ledger_rows.SELECT_HISTORY + _UNSETTLED_WHERE.format(unsettled=mariadb_module.MariaDbLedger.UNSETTLED)
    with Raw(mariadb_location) as conn:
        conn.execute("ANALYZE TABLE history")
        plan = conn.execute("EXPLAIN " + sql + " ORDER BY h.started_at DESC, h.id DESC", (0.0, T0, T0))
        assert conn.execute("SELECT count(*) FROM history WHERE unsettled_at IS NOT NULL") == [(1,)]
    assert any("history_unsettled" in str(row) for row in plan), plan


# -- keyed and later_operations -----------------------------------------------------------------------


def test_keyed_gives_the_earlier_operations_of_one_op_and_key(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        a = run(ledger, "7", Op.HOLD, T0, unknown(Op.HOLD, "7"), 1, key="k1")
        ledger.add_settlements([(a, Verdict.ABSENT, T0 + 20, PENDING, "")], T0 + 21, by="command")
        b = run(ledger, "7", Op.HOLD, T0 + 30, ok(Op.HOLD, "7"), 2, key="k1", retry_of=a)
        run(ledger, "7", Op.RELEASE, T0 + 40, ok(Op.RELEASE, "7"), 3, key="k1")  # another op
        run(ledger, "7", Op.HOLD, T0 + 50, ok(Op.HOLD, "7"), 4, key="k2")  # another key
        run(ledger, "7", Op.HOLD, T0 + 60, ok(Op.HOLD, "7"), 5)  # no key
        c = run(ledger, "8", Op.HOLD, T0 + 70, None, 6, key="k1")
        found = ledger.keyed(["7", "8", "9", "7"], Op.HOLD, "k1")
        assert {job: [e.id for e in entries] for job, entries in found.items()} == {"7": [a, b], "8": [c]}
        first = found["7"][0].settlement
        assert first is not None and first.verdict is Verdict.ABSENT and found["7"][1].retry_of == a
        assert ledger.keyed(["7"], Op.HOLD, "k3") == {} and ledger.keyed([], Op.HOLD, "k1") == {}
        with pytest.raises(InvalidInput, match="a key is 1-128 letters"):
            ledger.keyed(["7"], Op.HOLD, "")


@pytest.mark.parametrize("key", ["two words", "k" * 129, "naïve", "semi;colon", "tab\tkey", ""])
def test_the_ledger_refuses_a_key_the_command_line_would_refuse(ledger_location: str, key: str) -> None:
    """One rule for keys (core.keys.check_key): the store refuses what the CLI and the API refuse,
    with their words, and writes nothing."""
    with open_ledger(ledger_location) as ledger:
        with pytest.raises(InvalidInput, match="a key is 1-128 letters, digits and"):
            begin_operation(ledger, "7", Op.HOLD, nonce(1), T0, key=key)
        with pytest.raises(InvalidInput, match="a key is 1-128 letters, digits and"):
            ledger.begin_operations([("7", Op.HOLD, nonce(2)), ("8", Op.HOLD, nonce(3))], T0, key=key)
        with pytest.raises(InvalidInput, match="a key is 1-128 letters, digits and"):
            ledger.keyed(["7"], Op.HOLD, key)
        assert ledger.count_history() == 0 and ledger.get("7") is None and ledger.get("8") is None
        ok_key = "batch-2026/12:01+x=y@host.a_b"
        begin_operation(ledger, "7", Op.HOLD, nonce(4), T0, key=ok_key)
        assert [e.key for e in ledger.keyed(["7"], Op.HOLD, ok_key)["7"]] == [ok_key]


def test_operations_by_gives_one_actor_s_operations_of_one_op_since_a_time(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        a = run(ledger, "7", Op.HOLD, T0, unknown(Op.HOLD, "7"), 1, actor="me")
        run(ledger, "7", Op.HOLD, T0 - 10, ok(Op.HOLD, "7"), 2, actor="me")  # before since
        run(ledger, "7", Op.RELEASE, T0 + 1, ok(Op.RELEASE, "7"), 3, actor="me")  # another op
        run(ledger, "8", Op.HOLD, T0 + 2, ok(Op.HOLD, "8"), 4, actor="another")  # another actor
        b = run(ledger, "9", Op.HOLD, T0 + 3, None, 5, actor="me")
        c = run(ledger, "7", Op.HOLD, T0 + 4, unknown(Op.HOLD, "7"), 6, actor="me")
        ledger.add_settlements([(c, Verdict.PRESENT, T0 + 5, None, "")], T0 + 6, by="sweep")
        found = ledger.operations_by(["7", "8", "9", "7", "10"], Op.HOLD, "me", T0)
        assert {job: [e.id for e in entries] for job, entries in found.items()} == {"7": [a, c], "9": [b]}
        last = found["7"][-1].settlement
        assert last is not None and last.verdict is Verdict.PRESENT
        assert ledger.operations_by([], Op.HOLD, "me", T0) == {}
        with pytest.raises(InvalidInput):
            ledger.operations_by(["not a job"], Op.HOLD, "me", T0)


def test_operations_gives_the_rows_of_the_history_ids_asked_for(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        a = run(ledger, "7", Op.HOLD, T0, unknown(Op.HOLD, "7"), 1, actor="me")
        run(ledger, "8", Op.HOLD, T0 + 1, ok(Op.HOLD, "8"), 2)  # not asked for
        b = run(ledger, "9", Op.RELEASE, T0 + 2, None, 3, actor="another")
        ledger.add_settlements([(a, Verdict.PRESENT, T0 + 5, None, "")], T0 + 6, by="sweep")
        found = ledger.operations([b, a, b, a + b + 100])  # each once; one that is not there absent
        assert {i: (e.job_id, e.op, e.actor) for i, e in found.items()} == {
            a: ("7", Op.HOLD, "me"), b: ("9", Op.RELEASE, "another")}
        settled = found[a].settlement
        assert settled is not None and settled.verdict is Verdict.PRESENT and found[b].result is None
        assert ledger.operations([]) == {}
        with pytest.raises(InvalidInput):
            ledger.operations(["7"])  # type: ignore[list-item]


def test_later_operations_are_the_job_s_rows_after_each(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        a = run(ledger, "7", Op.HOLD, T0, unknown(Op.HOLD, "7"), 1)
        b = run(ledger, "8", Op.HOLD, T0 + 1, ok(Op.HOLD, "8"), 2)
        c = run(ledger, "7", Op.RELEASE, T0 + 2, unknown(Op.RELEASE, "7"), 3)
        ledger.add_settlements([(c, Verdict.PRESENT, T0 + 3, None, "")], T0 + 4, by="sweep")
        d = run(ledger, "7", Op.HOLD, T0 + 5, None, 4)
        found = ledger.later_operations([a, b, c, d, a, d + 50])
        assert {op_id: [e.id for e in entries] for op_id, entries in found.items()} == {a: [c, d], c: [d]}
        later = found[a][0]
        assert (later.op, later.result, later.stderr) == (Op.RELEASE, Result.UNKNOWN, b"")
        assert later.settlement is not None and later.settlement.verdict is Verdict.PRESENT
        assert ledger.later_operations([]) == {}
        for bad in (1.5, True, "1"):
            with pytest.raises(InvalidInput, match="an op_id must be a history id"):
                ledger.later_operations([bad])  # type: ignore[list-item]


# -- schema 2 -> 3 ------------------------------------------------------------------------------------


def test_a_schema_2_file_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    """A real schema-2 file, made by the migrations of the code before schema 3."""
    path = tmp_path / "ledger.sqlite3"
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    for migration in sqlite_module.MIGRATIONS[:2]:
        for statement in migration:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 2")
    conn.execute("INSERT INTO objects (job_id, bit, why, updated_at) VALUES ('8', 'may_be_set', 'requeue bb started',"
                 " ?)", (T0,))
    conn.execute("INSERT INTO history (job_id, op, nonce, started_at, prior_bit, finished_at, result, bit_after,"
                 " detail, exit_status, calls, stderr, stderr_len, actor) VALUES ('8', 'hold', 'aa', ?, 'clear', ?,"
                 " 'unknown', 'clear', '', 124, '[]', x'00', 1, 'uid 0')", (T0, T0 + 1))
    conn.execute("INSERT INTO history (job_id, op, nonce, started_at, prior_bit, actor) VALUES ('8', 'requeue', 'bb',"
                 " ?, 'clear', 'uid 0')", (T0 + 2,))
    conn.execute("COMMIT")
    conn.close()
    with pytest.raises(LedgerError, match="schema version 2, older than this slurm-dsl's"):
        open_ledger(str(path), migrate_schema=False)  # a read-only open: as before, refused
    with open_ledger(str(path)) as ledger:
        assert ledger.schema_version() == schema.CURRENT["sqlite"]
        hold, requeue = ledger.history("8")
        assert (hold.result, hold.actor, hold.baseline, hold.key, hold.retry_of, hold.ends_by, hold.settlement) == (
            Result.UNKNOWN, "uid 0", None, None, None, None, None)
        assert [e.id for e in ledger.unsettled(T0 + 10)] == [requeue.id, hold.id]
        assert ledger.add_settlements([(hold.id, Verdict.UNDECIDABLE, T0 + 20, None, "no baseline")], T0 + 20,
                                      by="sweep") == 1
        assert [e.id for e in ledger.unsettled(T0 + 30)] == [requeue.id]
    conn = sqlite3.connect(str(path))
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE history SET ends_by = 1")
    conn.close()


def test_mariadb_schema_1_is_migrated_to_2(mariadb_location: str) -> None:
    import slurm_dsl.ledger.mariadb as mariadb_module

    with Raw(mariadb_location) as conn:
        conn.execute(mariadb_module._VERSION_TABLE)
        for statement in mariadb_module.MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version (one, version) VALUES (1, 1)")
        conn.execute("INSERT INTO history (job_id, op, nonce, started_at, prior_bit) VALUES ('8', 'hold', 'aa', ?,"
                     " 'clear')", (T0,))
    assert is_mariadb(mariadb_location)
    with open_ledger(mariadb_location) as ledger:
        assert ledger.schema_version() == schema.CURRENT["mariadb"]
        (row,) = ledger.history("8")
        assert (row.baseline, row.key, row.ends_by, row.settlement) == (None, None, None, None)
        assert [e.id for e in ledger.unsettled(T0 + 10)] == [row.id]
        ledger.add_settlements([(row.id, Verdict.GONE, T0 + 11, None, "")], T0 + 11, by="sweep")
        assert ledger.unsettled(T0 + 20) == []
