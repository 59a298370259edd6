"""The ledger's reads and writes a sweep makes (docs/contract.md §9.5, docs/benchmarks.md §4):
``due_ids``, ``set_bits`` and ``lookups_failed`` of many jobs, on both backends.  Each must
answer as the one-job-at-a-time writes would, one change after the other (the expected answers
here are worked out from those words by a naive model, never from the store's helpers), and in a
number of statements that does not grow by two or three per object."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_dsl.core.model import LedgerError, Op, RequeueBit
from slurm_dsl.ledger.base import LedgerStore
from slurm_dsl.ledger.choose import open_ledger
from tests.examples import examples
from tests.ledger_backends import Raw

NONCE = "0123456789abcdef0123456789abcdef"
ME, OTHER = "sweep:ctl:1:1:aaaaaaaa", "op:ctl:2:1:bbbbbbbb"
CLEAR, MAY, SET = RequeueBit.CLEAR, RequeueBit.MAY_BE_SET, RequeueBit.SET


def objects(ledger: LedgerStore, jobs: List[str], now: float) -> None:
    """An object (may_be_set) for each job, as a requeue's start leaves it."""
    with ledger.batch():
        ledger.begin_operations([(job, Op.REQUEUE, NONCE) for job in jobs], now)


@pytest.fixture
def sqlite_statements(tmp_path: Path) -> Iterator[Tuple[LedgerStore, List[str]]]:
    """An SQLite ledger and the statements its connection runs (SQLite's trace callback)."""
    with open_ledger(str(tmp_path / "ledger.sqlite3")) as ledger:
        ran: List[str] = []
        conn: sqlite3.Connection = ledger._conn  # type: ignore[attr-defined]
        conn.set_trace_callback(ran.append)
        yield ledger, ran


def _many_objects(ledger: LedgerStore, ran: List[str], *, leased: bool) -> List[str]:
    """2,000 objects (leased by ME if asked), and the statements that made them forgotten."""
    jobs = [str(1000 + n) for n in range(2000)]
    objects(ledger, jobs, 1.0)
    if leased:
        assert ledger.acquire_leases(jobs, ME, 2.0, 60.0) == jobs
    ran.clear()
    return jobs


def test_set_bits_of_many_jobs_makes_a_few_statements_not_three_per_job(
    sqlite_statements: Tuple[LedgerStore, List[str]],
) -> None:
    ledger, ran = sqlite_statements
    jobs = _many_objects(ledger, ran, leased=True)
    assert ledger.set_bits([(job, CLEAR, "sweep: gone") for job in jobs], 3.0, owner=ME) == jobs
    # 2,000 changes: 4 lease reads and 64 upserts (125 rows of 4 values each) and BEGIN/COMMIT;
    # one at a time made 6,000.
    assert len(ran) <= 100, len(ran)
    assert ledger.count_not_clear() == 0


def test_lookups_failed_of_many_jobs_makes_a_few_statements_not_two_per_job(
    sqlite_statements: Tuple[LedgerStore, List[str]],
) -> None:
    ledger, ran = sqlite_statements
    jobs = _many_objects(ledger, ran, leased=False)
    assert ledger.lookups_failed(jobs, "squeue timed out", 10.0) == [10.0 + 60.0] * len(jobs)
    assert len(ran) <= 40, len(ran)  # one at a time made 4,000


def test_set_bits_across_pieces_answers_as_one_change_after_the_other(ledger_location: str) -> None:
    # More than one IN list of changes, a job named in two pieces (its last change stays), jobs
    # whose lease is another's, lapsed, or missing (not written), a job with no object (gets one).
    with open_ledger(ledger_location, backoff_base=10.0, backoff_cap=100.0) as ledger:
        jobs = [str(1000 + n) for n in range(1200)]
        objects(ledger, jobs, 1.0)
        ledger.lookups_failed(jobs, "down", 2.0)
        assert ledger.acquire_leases([*jobs[:1100], "77"], ME, 20.0, 60.0) == [*jobs[:1100], "77"]
        assert ledger.acquire_leases(jobs[1100:1150], OTHER, 20.0, 60.0) == jobs[1100:1150]
        assert ledger.acquire_leases(["1001"], ME, 20.0, 1.0)  # lapses at 21
        changes = [(job, CLEAR, "gone") for job in jobs] + [("77", SET, "new"), ("1000", SET, "again")]
        expected = [job for job, _, _ in changes if job not in jobs[1100:] and job != "1001"]
        assert ledger.set_bits(changes, 30.0, owner=ME) == expected
        for job in ("1000", "77"):
            obj = ledger.get(job)
            assert obj is not None and (obj.bit, obj.updated_at) == (SET, 30.0)
            assert (obj.lookup_failures, obj.next_lookup_at, obj.lookup_error) == (0, 0.0, "")
        for job in ("1001", jobs[1100], jobs[1199]):
            obj = ledger.get(job)
            assert obj is not None and (obj.bit, obj.lookup_failures, obj.lookup_error) == (MAY, 1, "down")
        obj = ledger.get(jobs[700])
        assert obj is not None and (obj.bit, obj.why, obj.lookup_failures) == (CLEAR, "gone", 0)
        with pytest.raises(ValueError):
            ledger.set_bits([("1002", CLEAR, "ok"), ("1003", "bogus", "x")], 31.0, owner=ME)  # type: ignore[list-item]
        obj = ledger.get("1002")
        assert obj is not None and obj.updated_at == 30.0  # the bad change wrote nothing


def test_lookups_failed_counts_a_job_named_twice_twice_and_writes_nothing_for_a_missing_object(
    ledger_location: str,
) -> None:
    with open_ledger(ledger_location, backoff_base=10.0, backoff_cap=100.0) as ledger:
        jobs = [str(1000 + n) for n in range(600)]
        objects(ledger, jobs, 1.0)
        ledger.lookup_failed("1000", "down", 5.0)
        times = ledger.lookups_failed([*jobs, "1000", "1599"], "timed out", 100.0)
        assert times[0] == 120.0 and times[1:600] == [110.0] * 599 and times[600] == 140.0
        assert times[601] == 120.0  # 1599 is jobs[599]: its second failure
        one = ledger.get("1000")
        assert one is not None
        assert (one.lookup_failures, one.next_lookup_at, one.lookup_error) == (3, 140.0, "timed out")
        with pytest.raises(LedgerError, match="no object for job 77"):
            ledger.lookups_failed(["1001", "77"], "again", 200.0)
        obj = ledger.get("1001")
        assert obj is not None and (obj.lookup_failures, obj.lookup_error) == (1, "timed out")  # rolled back


def test_pending_ids_are_pendings_job_ids_in_its_order(ledger_location: str) -> None:
    with open_ledger(ledger_location, backoff_base=10.0, backoff_cap=100.0) as ledger:
        objects(ledger, ["5", "3", "4"], 4.0)
        objects(ledger, ["6", "1"], 1.0)
        objects(ledger, ["2"], 0.5)
        ledger.acquire_leases(["2"], "setup", 1.0, 1.0)
        ledger.set_bits([("2", CLEAR, "gone")], 1.0, owner="setup")
        ledger.acquire_leases(["3"], "sweep:ctl:9:1:deadbeef", 10.0, 5.0)
        ledger.acquire_leases(["5"], OTHER, 10.0, 5.0)
        ledger.lookup_failed("6", "down", 10.0)
        for now in (10.0, 16.0, 30.0):
            for limit in (None, -1, 0, 1, 2, 10):
                for reclaim in (False, True):
                    full = [o.job_id for o in ledger.due_objects(now, limit, reclaim_sweeps=reclaim)]
                    assert ledger.due_ids(now, limit, reclaim_sweeps=reclaim) == full
        assert ledger.due_ids(10.0) == ["1", "4"]
        assert ledger.due_ids(10.0, reclaim_sweeps=True) == ["1", "3", "4"]


# The naive model of a change list, one change after the other: a change is written only while
# ``ME`` holds the job's unexpired lease; it sets the bit and why and resets the back-off.
LEASES = ("mine", "mine, lapsed", "another's", "none")


@settings(max_examples=examples(40), deadline=None)
@given(
    st.lists(st.sampled_from(LEASES), min_size=4, max_size=4),
    st.lists(st.booleans(), min_size=4, max_size=4),
    st.lists(st.tuples(st.sampled_from("1234"), st.sampled_from(list(RequeueBit)), st.sampled_from(["a", "b"])),
             max_size=12),
)
def test_set_bits_is_set_bit_one_after_the_other(
    tmp_path_factory: pytest.TempPathFactory,
    leases: List[str],
    there: List[bool],
    changes: List[Tuple[str, RequeueBit, str]],
) -> None:
    path = str(tmp_path_factory.mktemp("ledger") / "ledger.sqlite3")
    with open_ledger(path, backoff_base=10.0, backoff_cap=100.0) as ledger:
        model: Dict[str, Optional[Tuple[RequeueBit, str, float, int]]] = {}
        for n, job in enumerate("1234"):
            model[job] = None
            if there[n]:
                objects(ledger, [job], 1.0)
                ledger.lookup_failed(job, "down", 2.0)
                model[job] = (MAY, f"requeue {NONCE} started", 1.0, 1)
            if leases[n] != "none":
                owner = OTHER if leases[n] == "another's" else ME
                ledger.acquire_leases([job], owner, 10.0, 1.0 if leases[n] == "mine, lapsed" else 60.0)
        expected: List[str] = []
        for job, bit, why in changes:
            if leases["1234".index(job)] == "mine":
                expected.append(job)
                model[job] = (bit, why, 20.0, 0)
        assert ledger.set_bits(changes, 20.0, owner=ME) == expected
        for job, want in model.items():
            obj = ledger.get(job)
            got = None if obj is None else (obj.bit, obj.why, obj.updated_at, obj.lookup_failures)
            assert got == want
    with Raw(path) as raw:
        assert raw.execute("SELECT count(*) FROM objects WHERE lookup_failures = 0 AND lookup_error <> ''") == [(0,)]
