"""``slurm-dsl ledger migrate`` (docs/contract.md §9.1.2): one ledger copied into another, SQLite to
MariaDB and back, file to file, read back through ``LedgerStore`` and compared field by field.

Rule 1: everything the source holds (objects, history rows, the last sweep) is in the target, as it
was, the rows in their order; the source is never written.  Rule 2: a migration stopped anywhere
leaves no history row without its object and no not-clear object of the source missing or made
clearer; ``--merge`` finishes it.  Rule 3: merging twice is merging once, and a merge never makes
an object clearer.  The ends are real SQLite files and real MariaDB databases (the lab's server,
``mariadb_server``; those parameters skip without one, or fail under CI=true).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import slurm_dsl.ledger.sqlite as sqlite_module
from slurm_dsl.core import ledger_rules as rules
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import (
    Call,
    CallOutcome,
    LedgerError,
    Op,
    Outcome,
    Reason,
    RequeueBit,
    Result,
    UsageError,
    Verdict,
)
from slurm_dsl.ledger import migrate as ledger_migrate
from slurm_dsl.ledger import schema
from slurm_dsl.ledger.base import LedgerStore
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.records import HistoryEntry, ImportResult, JobObject
from tests.cli_run import cli
from tests.ledger_backends import Raw, is_mariadb, shown, store_class
from tests.ledger_ops import acquire_lease, begin_operation, finish_operation, set_bit

CLEAR, MAY, SET = RequeueBit.CLEAR, RequeueBit.MAY_BE_SET, RequeueBit.SET
BASE = JobInfo("5", "PENDING", True, 0, 4294901, "BeginTime")
DAY = 86400.0
NOW = 1_700_000_000.123456  # times with microseconds: a DOUBLE and a REAL keep them exactly
OLD = NOW - 200 * DAY

ENDS = ["sqlite->mariadb", "mariadb->sqlite", "sqlite->sqlite", "mariadb->mariadb"]


@pytest.fixture(params=ENDS)
def ends(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Tuple[str, str]]:
    """(source, target): an SQLite file that does not exist yet, or a fresh, empty MariaDB database."""
    kinds = str(request.param).split("->")
    with ExitStack() as stack:
        locations = []
        for name, kind in zip(("from", "to"), kinds):
            if kind == "sqlite":
                locations.append(str(tmp_path / name / "ledger.sqlite3"))
            else:
                server = request.getfixturevalue("mariadb_server")
                locations.append(stack.enter_context(server.database()))
        yield locations[0], locations[1]


def migrate(source: str, target: str, *more: str) -> Tuple[int, Any, str]:
    """``ledger migrate --json``: its exit status, its object (None if it printed nothing), stderr."""
    code, out, err = cli(["ledger", "migrate", "--from", source, "--to", target, "--json", *more])
    return code, json.loads(out) if out else None, err


# -- a ledger with a bit of everything --------------------------------------------------------------


def requeue_outcome(job: str, result: Result, bit: RequeueBit, reason: Optional[Reason] = None) -> Outcome:
    calls = (
        Call(1, 0, "0", b"", CallOutcome.SUCCESS, None, None),
        Call(2, 124, "124", b"", CallOutcome.UNKNOWN, None, Reason.TIMED_OUT),
        Call(3, 1, "1", b"", CallOutcome.REJECTED, "Job has already finished", None),
    )
    return Outcome(Op.REQUEUE, job, result, bit, reason, calls, 1, "the detail, with ünïcode")


def ok(op: Op, job: str) -> Outcome:
    return Outcome(op, job, Result.OK, CLEAR if op in (Op.REQUEUE, Op.REQUEUE_HOLD) else None, None,
                   (Call(1, 0, "0", b"", CallOutcome.SUCCESS, None, None),), 0)


def record(ledger: LedgerStore, job: str, op: Op, at: float, outcome: Optional[Outcome] = None,
           stderr: bytes = b"err\n") -> int:
    op_id = begin_operation(ledger, job, op, f"{int(at * 1000):032x}", at, actor=f"uid 0 (rööt) on ctl1, pid {job}")
    finish_operation(ledger, op_id, outcome or ok(op, job), stderr, at + 1.5)
    return op_id


def populate(location: str) -> None:
    """Objects in every bit state, unfinished rows, history pruned and then written again (ids with
    gaps), an object without history, lookup back-off, a lease, bytes that are no UTF-8, the last sweep."""
    with open_ledger(location) as ledger:
        # 1: clear, finished rows and an unfinished hold after them.
        record(ledger, "1", Op.HOLD, OLD)
        record(ledger, "1", Op.RELEASE, NOW - 10, stderr=b"\xff\x00 not utf-8 \x1e")
        begin_operation(ledger, "1", Op.HOLD, "1" * 32, NOW)
        # 2: may_be_set after an unknown requeue, then two failed lookups (back-off), and leased.
        record(ledger, "2", Op.REQUEUE, NOW, requeue_outcome("2", Result.UNKNOWN, MAY, Reason.CLEAR_FAILED))
        ledger.lookups_failed(["2"], "slurm_load_jobs error: Unable to contact slurm controller", NOW + 5)
        ledger.lookups_failed(["2"], "again", NOW + 70)
        assert acquire_lease(ledger, "2", "a sweeper elsewhere", NOW, 600)
        # 3: set by a requeue whose clear never ran.
        record(ledger, "3", Op.REQUEUE, NOW, requeue_outcome("3", Result.BIT_SET, SET, Reason.CLEAR_NOT_RUN))
        # 4: a requeue that never finished: may_be_set, its row unfinished (a crash's trace).
        begin_operation(ledger, "4", Op.REQUEUE, "4" * 32, NOW + 1, actor="a crashed process")
        # 5: old rows pruned (and job 1's first), then more: the ids have gaps.
        for i in range(4):
            record(ledger, "5", Op.HOLD, OLD + i)
        assert ledger.prune(rules.prune_before(NOW, 90), NOW).removed == 4
        record(ledger, "5", Op.RELEASE, NOW + 2)
        record(ledger, "5", Op.REQUEUE, NOW + 3, ok(Op.REQUEUE, "5"))
        # 5 again (schema 3): an unknown hold with a baseline and a key, settled, and its retry.
        first = begin_operation(ledger, "5", Op.HOLD, "5a" * 16, NOW + 20, actor="uid 0", baseline=BASE,
                                       baseline_at=NOW + 19.5, key="nightly-1", ends_by=NOW + 80.25)
        finish_operation(ledger, first, Outcome(Op.HOLD, "5", Result.UNKNOWN, None, Reason.TIMED_OUT,
                                               (Call(1, 124, "124", b"", CallOutcome.UNKNOWN, None, Reason.TIMED_OUT),),
                                               124), b"t", NOW + 21)
        assert ledger.add_settlements([(first, Verdict.ABSENT, NOW + 40, BASE, "PriorityLong 4294901 > 0")],
                                      NOW + 41, by="command uid 0") == 1
        retry = begin_operation(ledger, "5", Op.HOLD, "5b" * 16, NOW + 42, baseline=BASE, baseline_at=NOW + 41.5,
                                       key="nightly-1", retry_of=first, ends_by=NOW + 100)
        finish_operation(ledger, retry, ok(Op.HOLD, "5"), b"", NOW + 43)
        # 6: an object without any operation (as sweep --orphans --fix makes one), not clear.
        assert acquire_lease(ledger, "6", "orphans", NOW, 60)
        assert set_bit(ledger, "6", MAY, "sweep --orphans: finished at Requeue=1, not tracked; watched", NOW,
                              owner="orphans")
        assert ledger.release_lease("6", "orphans")
        # 7, 8, 9: more clear objects, for more than one batch of them.
        for job in "789":
            record(ledger, job, Op.RELEASE, NOW + int(job))
        ledger.record_sweep(NOW + 100, NOW + 101.5, {"counts": {"cleared": 2}, "settled": True, "orphans": 0})


JOBS = [str(j) for j in range(1, 12)]  # populate's and a few it never made


@dataclasses.dataclass
class Snapshot:
    """What a ledger holds, through the Protocol: the ids of the rows apart (a copy gets new ones)."""

    objects: Dict[str, Optional[JobObject]]
    history: Dict[str, List[HistoryEntry]]
    ids: Dict[str, List[int]]
    by_bit: Dict[RequeueBit, int]
    rows: int
    not_clear: List[JobObject]
    last_sweep: Any
    # Each row's retry_of as the (job, nonce) of the row it names (ids differ in a copy).
    retries: Dict[Tuple[str, str], Optional[Tuple[str, str]]]


def _without_ids(e: HistoryEntry) -> HistoryEntry:
    settled = None if e.settlement is None else dataclasses.replace(e.settlement, id=0, op_id=0)
    return dataclasses.replace(e, id=0, retry_of=None, settlement=settled)


def snapshot(location: str) -> Snapshot:
    with open_ledger(location, migrate_schema=False) as ledger:
        history = {job: ledger.history(job) for job in JOBS}
        by_id = {e.id: (e.job_id, e.nonce) for entries in history.values() for e in entries}
        for entries in history.values():
            for e in entries:
                assert e.settlement is None or e.settlement.op_id == e.id
        return Snapshot(
            retries={(e.job_id, e.nonce): None if e.retry_of is None else by_id[e.retry_of]
                     for entries in history.values() for e in entries},
            objects={job: ledger.get(job) for job in JOBS},
            history={job: [_without_ids(e) for e in entries] for job, entries in history.items()},
            ids={job: [e.id for e in entries] for job, entries in history.items()},
            by_bit=ledger.count_by_bit(),
            rows=ledger.count_history(),
            not_clear=ledger.objects_not_clear(),
            last_sweep=ledger.last_sweep(),
        )


def same_content(a: Snapshot, b: Snapshot) -> None:
    assert a.objects == b.objects
    assert a.history == b.history and a.retries == b.retries
    assert (a.by_bit, a.rows, a.not_clear, a.last_sweep) == (b.by_bit, b.rows, b.not_clear, b.last_sweep)


def all_rows(location: str) -> List[HistoryEntry]:
    with open_ledger(location, migrate_schema=False) as ledger:
        return ledger.export_history(0, 10**6)


# -- the rule --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("incoming", "kept", "replaces"),
    [(SET, MAY, True), (SET, CLEAR, True), (MAY, CLEAR, True),
     (CLEAR, MAY, False), (CLEAR, SET, False), (MAY, SET, False),
     (CLEAR, CLEAR, False), (MAY, MAY, False), (SET, SET, False)],
)
def test_a_merge_takes_only_a_less_clear_bit(incoming: RequeueBit, kept: RequeueBit, replaces: bool) -> None:
    assert rules.less_clear(incoming, kept) is replaces


# -- a copy ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [2, 500])
def test_migrate_copies_everything_as_it_was(
    ends: Tuple[str, str], batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, target = ends
    populate(source)
    before = snapshot(source)
    monkeypatch.setattr(ledger_migrate, "MIGRATE_BATCH", batch)
    code, report, err = migrate(source, target)
    assert (code, err) == (0, "")
    assert report == {
        "kind": "migrate", "from": shown(source), "to": shown(target), "merge": False,
        "objects": {"copied": 9, "merged": 0, "kept": 0}, "history": {"copied": before.rows, "skipped": 0},
        "last_sweep": "copied", "not_clear": 4, "leases_copied": False,
    }
    after = snapshot(target)
    same_content(after, before)
    same_content(snapshot(source), before)
    assert snapshot(source).ids == before.ids, "the source is not written"
    # The rows in their order: each job's, and all of them.
    copied = all_rows(target)
    assert [e.id for e in copied] == sorted(e.id for e in copied)
    assert [(e.job_id, e.nonce) for e in copied] == [(e.job_id, e.nonce) for e in all_rows(source)]
    unfinished = [(e.job_id, e.op) for e in copied if not e.finished]
    assert unfinished == [("1", Op.HOLD), ("4", Op.REQUEUE)]
    assert [e.op for e in after.history["1"]] == [Op.RELEASE, Op.HOLD], "the old hold was pruned"
    assert after.history["1"][0].stderr == b"\xff\x00 not utf-8 \x1e"
    assert after.history["2"][0].calls[2].message == "Job has already finished"
    obj = after.objects["2"]
    assert obj is not None and (obj.bit, obj.lookup_failures, obj.lookup_error) == (MAY, 2, "again")
    first, retry = after.history["5"][-2:]  # schema 3's columns and the settlement came too
    assert first.settlement is not None
    assert (first.settlement.verdict, first.settlement.record) == (Verdict.ABSENT, BASE)
    assert (first.baseline, first.baseline_at, first.key, first.ends_by) == (BASE, NOW + 19.5, "nightly-1", NOW + 80.25)
    assert after.retries["5", retry.nonce] == ("5", first.nonce) and retry.settlement is None
    with open_ledger(target) as ledger:
        # Leases are not copied: job 2 is free in the target, and due for its sweep.
        assert {o.job_id for o in ledger.due_objects(NOW + 10**6)} == {"2", "3", "4", "6"}
        assert acquire_lease(ledger, "2", "a sweeper here", NOW + 1, 60)
        # And the copy is a ledger like any other: operations go on where they left off.
        record(ledger, "4", Op.HOLD, NOW + 500)
        assert [e.op for e in ledger.history("4")] == [Op.REQUEUE, Op.HOLD]


def test_the_human_summary(tmp_path: Path) -> None:
    source, target = str(tmp_path / "a.sqlite3"), str(tmp_path / "b" / "ledger.sqlite3")
    populate(source)
    rows = snapshot(source).rows
    code, out, err = cli(["ledger", "migrate", "--from", f"sqlite:{source}", "--to", target])
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"migrate {source} -> {target}:",
        "  objects: 9 copied, 0 merged (took the less clear bit), 0 kept",
        f"  history rows: {rows} copied, 0 skipped (already there)",
        "  last sweep: copied; leases: not copied (each operation and sweep takes its own)",
        f"  4 object(s) not clear in {target} now: sweeps on that ledger settle them",
    ]
    assert oct(os.stat(target).st_mode & 0o777) == "0o600", "a new SQLite target is private like any ledger"


def test_an_empty_source_makes_an_empty_target(ends: Tuple[str, str]) -> None:
    source, target = ends
    open_ledger(source).close()
    code, report, _ = migrate(source, target)
    assert code == 0 and report["objects"] == {"copied": 0, "merged": 0, "kept": 0}
    assert (report["history"], report["last_sweep"], report["not_clear"]) == ({"copied": 0, "skipped": 0}, "none", 0)
    assert snapshot(target).rows == 0


# -- stopped part-way -------------------------------------------------------------------------------


@pytest.mark.parametrize("stop_at", [2, 3, 6])
def test_a_migration_stopped_part_way_leaves_no_row_without_its_object_and_merge_finishes_it(
    ends: Tuple[str, str], stop_at: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With batches of 2: calls 1-2 the four not-clear objects, 3-5 the five clear ones, 6 on the
    history.  The import that fails is rolled back; everything before it stays."""
    source, target = ends
    populate(source)
    before = snapshot(source)
    monkeypatch.setattr(ledger_migrate, "MIGRATE_BATCH", 2)
    cls = store_class(target)
    real = cls.import_records
    calls = []

    def failing(self: Any, objects: Any, history: Any, *, merge: bool) -> ImportResult:
        calls.append(len(objects))
        if len(calls) == stop_at:
            raise LedgerError(f"ledger {self.path}: import records: disk I/O error", path=self.path)
        result: ImportResult = real(self, objects, history, merge=merge)
        return result

    monkeypatch.setattr(cls, "import_records", failing)
    code, report, err = migrate(source, target)
    assert (code, report) == (1, None)
    assert "disk I/O error; the migration stopped part-way" in err and "run it again with --merge" in err
    assert calls[:2] == [2, 2], "the not-clear objects went first"

    with open_ledger(target) as ledger:
        rows = ledger.export_history(0, 10**6)
        for e in rows:  # no row without its object; no requeue started without a not-clear object
            obj = ledger.get(e.job_id)
            assert obj is not None
            if e.op in (Op.REQUEUE, Op.REQUEUE_HOLD) and not e.finished:
                assert obj.bit is not CLEAR
        not_clear = {o.job_id for o in ledger.objects_not_clear()}
    assert not_clear == ({"2", "3", "4", "6"} if stop_at > 2 else {"2", "3"}), "the not-clear ones first"
    assert bool(rows) is (stop_at > 6)

    monkeypatch.setattr(cls, "import_records", real)
    code, report, err = migrate(source, target)
    assert code == 1 and "--merge" in err, "a target holding part of it is not empty"
    code, report, err = migrate(source, target, "--merge")
    assert (code, err) == (0, "")
    same_content(snapshot(target), before)


# -- refusals -------------------------------------------------------------------------------------


def test_a_target_that_holds_records_is_refused_without_merge(
    ends: Tuple[str, str]
) -> None:
    source, target = ends
    populate(source)
    with open_ledger(target) as ledger:
        record(ledger, "10", Op.HOLD, NOW)
    mine = snapshot(target)
    code, report, err = migrate(source, target)
    assert (code, report) == (1, None)
    assert err == (f"slurm-dsl: ledger {shown(target)} already holds 1 object(s) and 1 history row(s): migrate copies"
                   " into an empty ledger only; --merge merges into it instead (an object in both keeps the less"
                   " clear bit, rows already there are skipped)\n")
    same_content(snapshot(target), mine)


def test_merge_twice_changes_nothing_the_second_time(ends: Tuple[str, str]) -> None:
    source, target = ends
    populate(source)
    before = snapshot(source)
    code, first, _ = migrate(source, target, "--merge")
    assert code == 0 and first["objects"]["copied"] == 9 and first["history"]["copied"] == before.rows
    once = snapshot(target)
    code, second, _ = migrate(source, target, "--merge")
    assert code == 0
    assert (second["objects"], second["history"], second["last_sweep"]) == (
        {"copied": 0, "merged": 0, "kept": 9}, {"copied": 0, "skipped": before.rows}, "kept")
    twice = snapshot(target)
    same_content(twice, once)
    assert twice.ids == once.ids, "not a row added, not a row renumbered"
    same_content(twice, before)


def set_objects(location: str, bits: Dict[str, Tuple[RequeueBit, str]], at: float) -> None:
    with open_ledger(location) as ledger:
        for job, (bit, why) in bits.items():
            assert acquire_lease(ledger, job, "test", at, 60)
            assert set_bit(ledger, job, bit, why, at, owner="test")
            assert ledger.release_lease(job, "test")


def test_merge_keeps_the_less_clear_bit_and_never_makes_an_object_clearer(
    ends: Tuple[str, str]
) -> None:
    source, target = ends
    set_objects(source, {"1": (SET, "source: set"), "2": (CLEAR, "source: clear"), "3": (MAY, "source: may"),
                         "4": (MAY, "source: may too"), "6": (MAY, "source only")}, NOW)
    set_objects(target, {"1": (CLEAR, "target: clear"), "2": (MAY, "target: may"), "3": (SET, "target: set"),
                         "4": (MAY, "target: may"), "5": (CLEAR, "target only")}, NOW + 50)
    with open_ledger(source) as ledger:
        record(ledger, "1", Op.REQUEUE, NOW + 1, requeue_outcome("1", Result.BIT_SET, SET, Reason.CLEAR_NOT_RUN))
        ledger.record_sweep(NOW, NOW + 1, {"from": "source"})
    with open_ledger(target) as ledger:
        target_row = record(ledger, "1", Op.HOLD, NOW + 60)
        ledger.record_sweep(NOW + 70, NOW + 71, {"from": "target"})
    code, report, err = migrate(source, target, "--merge")
    assert (code, err) == (0, "")
    assert (report["objects"], report["history"], report["last_sweep"], report["not_clear"]) == (
        {"copied": 1, "merged": 1, "kept": 3}, {"copied": 1, "skipped": 0}, "kept", 5)
    with open_ledger(target) as ledger:
        got = {job: ledger.get(job) for job in "123456"}
        assert {job: (o.bit, o.why) for job, o in got.items() if o is not None} == {
            "1": (SET, f"requeue {int((NOW + 1) * 1000):032x}: bit_set (clear_not_run)"),  # the source's, less clear
            "2": (MAY, "target: may"),  # never made clearer
            "3": (SET, "target: set"),
            "4": (MAY, "target: may"),  # a tie keeps what is there
            "5": (CLEAR, "target only"),
            "6": (MAY, "source only"),
        }
        assert [(e.id == target_row, e.op) for e in ledger.history("1")] == [(True, Op.HOLD), (False, Op.REQUEUE)]
        last = ledger.last_sweep()
        assert last is not None and last.summary == {"from": "target"}, "the later sweep"
    # The other way round the source's sweep is the later one.
    code, report, _ = migrate(target, source, "--merge")
    assert code == 0 and report["last_sweep"] == "copied"
    with open_ledger(source) as ledger:
        last = ledger.last_sweep()
        assert last is not None and last.summary == {"from": "target"}


def test_the_same_ledger_at_both_ends_is_a_usage_error(
    ledger_location: str
) -> None:
    populate(ledger_location)
    before = snapshot(ledger_location)
    if is_mariadb(ledger_location):
        # The same URL, another scheme, and another name for the same server (only the server knows).
        others = [ledger_location, ledger_location.replace("mariadb://", "mysql://"),
                  ledger_location.replace("mariadb://localhost/", "mariadb://127.0.0.1/")]
    else:
        # (A symlink or a hard link to it is refused before: the ledger's own checks.)
        path = Path(ledger_location)
        others = [ledger_location, f"sqlite:{path}", str(path.parent / "." / path.name),
                  str(path.parent / ".." / path.parent.name / path.name), os.path.relpath(path)]
    for other in others:
        code, out, err = cli(["ledger", "migrate", "--from", ledger_location, "--to", other, "--merge"])
        assert (code, out) == (2, ""), other
        assert "--from and --to name the same ledger" in err
    # Whatever the names, the stores know: two connections to one ledger.
    with open_ledger(ledger_location) as one, open_ledger(ledger_location) as two:
        with pytest.raises(UsageError, match="the same ledger"):
            ledger_migrate.migrate(one, two, merge=True)
    same_content(snapshot(ledger_location), before)
    assert snapshot(ledger_location).ids == before.ids


def test_two_ledgers_are_two_identities(ends: Tuple[str, str]) -> None:
    with open_ledger(ends[0]) as source, open_ledger(ends[1]) as target:
        assert source.identity() != target.identity()
        assert source.identity() == source.identity()


# -- a source that is not there ------------------------------------------------------------------


def test_a_missing_source_file_is_an_error_and_nothing_is_created(
    tmp_path: Path
) -> None:
    missing = tmp_path / "typo" / "ledger.sqlite3"
    target = tmp_path / "new" / "ledger.sqlite3"
    code, out, err = cli(["ledger", "migrate", "--from", str(missing), "--to", str(target)])
    assert (code, out) == (1, "") and f"no ledger at {missing}" in err
    assert not missing.parent.exists() and not target.parent.exists(), "neither end was created"


def test_a_missing_or_empty_source_database_is_an_error_and_nothing_is_created(
    tmp_path: Path, mariadb_location: str
) -> None:
    target = tmp_path / "ledger.sqlite3"
    missing = mariadb_location.replace("/slurm_dsl_t_", "/slurm_dsl_t_no_such_")
    code, out, err = cli(["ledger", "migrate", "--from", missing, "--to", str(target)])
    assert (code, out) == (1, "") and shown(missing) in err
    code, out, err = cli(["ledger", "migrate", "--from", mariadb_location, "--to", str(target)])
    assert (code, out) == (1, "")
    assert f"no ledger in {shown(mariadb_location)}: database" in err and "nothing was created" in err
    with Raw(mariadb_location) as conn:
        assert conn.execute("SHOW TABLES") == [], "the empty database is left empty"
    assert not target.exists()


def test_an_older_source_file_is_refused_not_migrated(tmp_path: Path) -> None:
    source = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(str(source), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    for statement in sqlite_module.MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("COMMIT")
    conn.close()
    code, out, err = cli(["ledger", "migrate", "--from", str(source), "--to", str(tmp_path / "new.sqlite3")])
    assert (code, out) == (1, "")
    assert f"ledger {source} has schema version 1, older than this slurm-dsl's ({schema.CURRENT['sqlite']})" in err
    assert f"'slurm-dsl ledger status --ledger {source}' migrates it" in err
    conn = sqlite3.connect(str(source))
    assert conn.execute("PRAGMA user_version").fetchone() == (1,), "the source is not written"
    conn.close()


def test_an_empty_source_file_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "empty.sqlite3"
    source.touch(mode=0o600)
    code, out, err = cli(["ledger", "migrate", "--from", str(source), "--to", str(tmp_path / "new.sqlite3")])
    assert (code, out) == (1, "") and f"no ledger in {source}" in err
    assert source.stat().st_size == 0


# -- the command line ----------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--to", "x"], ["--from", "x"], [], ["--from", "a", "--to", "b", "-x"]])
def test_migrate_needs_both_ends(tmp_path: Path, argv: List[str]) -> None:
    code, out, err = cli(["ledger", "migrate", *argv])
    assert (code, out) == (2, "") and err.startswith("slurm-dsl: ")


def test_migrate_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli(["ledger", "migrate", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for words in ("--from LOCATION", "--to LOCATION", "--merge", "--json", "Leases are not copied",
                  "2 usage error (--from and --to name the same ledger)"):
        assert words in " ".join(text.split()), words
