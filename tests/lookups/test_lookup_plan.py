"""How a lookup of k ids asks (issue 20 item 1; docs/lookups.md): lookups/plan.py's rule against a
naive reading of its words, and SqueueLookup down each way, with every failure of a single call.

squeue is a canned ``Completed`` (tests/lookups/test_squeue.py's ``FakeSqueue``) with the real
texts of docs/slurm-behaviour.md §4, §6, §9; sdiag the lab's own output.
"""

from __future__ import annotations

import logging
import threading
from typing import List, Optional, Tuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import LookupFailed
from slurm_dsl.host.process import Completed
from slurm_dsl.lookups import plan
from slurm_dsl.lookups.plan import Costs
from slurm_dsl.lookups.squeue import SqueueLookup

from .test_squeue import DOWN, GONE, KNOWN, NONCE, Answer, FakeSqueue, done, line, listing

# What `sdiag` printed on the lab (22.05.8), cut to the lines around the counts.
SDIAG = b"""*******************************************************
sdiag output at Tue Dec 01 15:49:44 2026 (1796140184)
Data since      Tue Dec 01 15:23:55 2026 (1796138635)
*******************************************************
Server thread count:  3
Agent queue size:     0

Jobs submitted: 56
Jobs started:   39
Jobs completed: 14
Jobs canceled:  45
Jobs failed:    0

Job states ts:  Tue Dec 01 15:49:25 2026 (1796140165)
Jobs pending:   %d
Jobs running:   %d

Main schedule statistics (microseconds):
\tLast cycle:   252
"""


def sdiag(pending: int, running: int = 0) -> Completed:
    return Completed(("/usr/bin/sdiag",), 0, SDIAG % (pending, running), b"", False, False)


# --- the rule -----------------------------------------------------------------------------------

COSTS = st.builds(
    Costs,
    batch=st.floats(min_value=0.001, max_value=0.1),
    parallel=st.integers(min_value=1, max_value=8),
    listing=st.floats(min_value=0.001, max_value=0.1),
    per_job=st.floats(min_value=1e-7, max_value=1e-4),
)


def naive_one_by_one(count: int, jobs: Optional[int], costs: Costs) -> Optional[bool]:
    """docs/lookups.md §1 word by word: one id alone; else the single calls, ``parallel`` at a time
    (each round as long as one batch), against one listing at the jobs held; not known: it depends,
    unless the single calls beat even a listing of no job."""
    if count <= 1:
        return True
    rounds, left = 0, count
    while left > 0:
        rounds += 1
        left -= costs.parallel
    alone = rounds * costs.batch
    if alone <= costs.listing:
        return True
    if jobs is None:
        return None
    return alone < costs.listing + jobs * costs.per_job


@given(count=st.integers(min_value=0, max_value=5000), jobs=st.one_of(st.none(), st.integers(0, 10**6)),
       costs=COSTS)
def test_the_rule_is_its_words(count: int, jobs: Optional[int], costs: Costs) -> None:
    assert plan.one_by_one(count, jobs, costs) == naive_one_by_one(count, jobs, costs)


@given(count=st.integers(min_value=2, max_value=5000), jobs=st.integers(0, 10**6), more=st.integers(0, 10**6),
       fewer=st.integers(0, 5000), costs=COSTS)
def test_more_jobs_held_or_fewer_ids_never_turn_one_by_one_into_a_listing(
    count: int, jobs: int, more: int, fewer: int, costs: Costs
) -> None:
    if plan.one_by_one(count, jobs, costs):
        assert plan.one_by_one(count, jobs + more, costs)
        assert plan.one_by_one(max(count - fewer, 0), jobs, costs)


@given(count=st.integers(min_value=0, max_value=5000), most=st.integers(0, 10**6), costs=COSTS)
def test_the_count_matters_only_where_the_choice_differs_between_no_job_and_the_most(
    count: int, most: int, costs: Costs
) -> None:
    """Asked of the naive rule at both ends: the choice can turn between 0 and ``most`` jobs held."""
    differs = naive_one_by_one(count, 0, costs) != naive_one_by_one(count, most, costs)
    assert plan.count_matters(count, costs, most) == differs


def test_from_about_120_ids_the_count_is_not_asked() -> None:
    """At the lab's costs a listing of 100k jobs (~0.76 s) beats 121 single lookups (31 rounds)."""
    costs = plan.SQUEUE_COSTS
    assert plan.count_matters(120, costs) and not plan.count_matters(121, costs)
    assert not plan.count_matters(1, costs) and not plan.count_matters(1000, costs)


def test_the_lab_crossover() -> None:
    """docs/lookups.md §2: at 3,075 jobs up to 4 ids one by one; at 100k (extrapolated) ~120."""
    costs = plan.SQUEUE_COSTS
    assert plan.one_by_one(4, 3075, costs) and not plan.one_by_one(5, 3075, costs)
    assert plan.one_by_one(2, 1075, costs) is False
    assert plan.one_by_one(100, 100_000, costs) and not plan.one_by_one(200, 100_000, costs)


# --- SqueueLookup down each way ----------------------------------------------------------------------


def test_few_ids_among_many_jobs_are_one_squeue_each() -> None:
    fake = FakeSqueue(listing(KNOWN), sdiag=sdiag(100_000, 20))
    answer = SqueueLookup("/usr/bin/squeue", 7.5, run=fake).jobs(["11", "10", "8"])
    assert answer == {
        "11": JobInfo("11", "RUNNING", True, 0, 4294901753, "None"),
        "10": JobInfo("10", "PENDING", False, 0, 0, "JobHeldUser"),
        "8": JobInfo("8", "COMPLETED", False, 0, 4294901755, "None"),
    }
    asked = sorted(argv[argv.index("-j") + 1] for argv, _ in fake.calls)
    assert asked == ["10", "11", "8"]
    assert all(kwargs["timeout"] <= 7.5 for _, kwargs in fake.calls)
    assert [argv for argv, _ in fake.sdiag_calls] == [("/usr/bin/sdiag",)]


def one_by_one_answer(gone: Tuple[str, ...] = (), fail: Optional[Tuple[str, Completed]] = None) -> Answer:
    """squeue -j <one id>: the known job's record, the real `Invalid job id` for a gone one, or
    ``fail`` for that id."""

    def answer(argv: Tuple[str, ...], nonce: str) -> Completed:
        job = argv[argv.index("-j") + 1]
        assert "," not in job
        if fail is not None and job == fail[0]:
            return fail[1]
        if job in gone:
            return done(argv, 1, b"", GONE)
        return done(argv, stdout=line(job, "PENDING", "0", "0", "0", "JobHeldUser", nonce=nonce))

    return answer


def test_a_gone_id_asked_alone_is_gone_beside_the_found() -> None:
    fake = FakeSqueue(one_by_one_answer(gone=("12",)), sdiag=sdiag(50_000))
    answer = SqueueLookup(run=fake).jobs(["11", "12", "13"])
    assert answer["12"] is None and answer["11"] is not None and answer["13"] is not None
    assert list(answer) == ["11", "12", "13"]


@pytest.mark.parametrize(
    ("failure", "why"),
    [
        (Completed((), 1, b"", DOWN, False, False), "unreachable"),
        (Completed((), 143, b"", b"", True, False), "within"),
        (Completed((), 0, b"", b"", False, False), "without the job's record"),  # rc 0, no record
        (Completed((), 0, b"11|11|N/A|PENDING|0|0|0|None|" + NONCE.encode() + b"\n", b"", False, True),
         "more than"),
        (Completed((), 1, b"", GONE + DOWN, False, False), "unreachable"),  # not exactly the gone text
        (Completed((), 1, b"11|11|N/A|PENDING|0|0|0|None|" + NONCE.encode() + b"\n", GONE, False, False),
         "exited 1"),
        (Completed((), 0, b"", b"", False, False, pipes_held=True), "held open"),
        (Completed((), 137, b"", b"", False, False, killed_by=9), "exited 137"),
    ],
)
def test_any_single_call_that_could_not_ask_fails_the_whole_lookup(failure: Completed, why: str) -> None:
    fake = FakeSqueue(one_by_one_answer(gone=("13",), fail=("12", failure)), sdiag=sdiag(50_000))
    with pytest.raises(LookupFailed, match=why):
        SqueueLookup(run=fake).jobs(["11", "12", "13"])


def test_the_single_calls_share_the_one_timeout() -> None:
    """Each call gets what is left of ``timeout``; none starts once it is spent."""
    now = [100.0]
    lock = threading.Lock()

    def slow(argv: Tuple[str, ...], nonce: str) -> Completed:
        with lock:
            now[0] += 6.0  # each call takes 6 s of the lookup's clock
        return one_by_one_answer()(argv, nonce)

    fake = FakeSqueue(slow, sdiag=sdiag(50_000))
    look = SqueueLookup(timeout=10.0, run=fake, parallel=1, clock=lambda: now[0])
    with pytest.raises(LookupFailed, match="3 single lookups within 10 s"):
        look.jobs(["11", "12", "13"])
    assert [kwargs["timeout"] for _, kwargs in fake.calls] == [10.0, 4.0]


def test_few_jobs_held_is_one_listing_as_before() -> None:
    fake = FakeSqueue(listing(KNOWN), sdiag=sdiag(40, 3))
    answer = SqueueLookup(run=fake).jobs(["11", "999999", "10"])
    assert answer["999999"] is None and answer["11"] is not None
    assert [argv[argv.index("-j") + 1] for argv, _ in fake.calls] == ["11,999999,10"]


@pytest.mark.parametrize(
    "told",
    [
        Completed(("/usr/bin/sdiag",), 1, b"", b"sdiag: error: slurm_get_statistics: Unable to contact slurm "
                  b"controller (connect failure)\n", False, False),
        Completed(("/usr/bin/sdiag",), 143, b"", b"", True, False),
        Completed(("/usr/bin/sdiag",), 0, b"Jobs pending: 7\n", b"", False, False),  # no running line
        Completed(("/usr/bin/sdiag",), 0, SDIAG.replace(b"%d", b"x"), b"", False, False),
        Completed(("/usr/bin/sdiag",), 0, (SDIAG % (9, 9)) * 2, b"", False, False),  # two of each
    ],
)
def test_a_count_sdiag_cannot_tell_is_one_listing_as_before(told: Completed) -> None:
    fake = FakeSqueue(listing(KNOWN), sdiag=told)
    look = SqueueLookup(run=fake)
    assert look.count_jobs() is None
    look.jobs(["11", "10"])
    assert len(fake.calls) == 1 and "11,10" in fake.calls[0][0]


def test_sdiag_counts_pending_and_running() -> None:
    assert SqueueLookup(run=FakeSqueue(listing(KNOWN), sdiag=sdiag(19, 5))).count_jobs() == 24


def test_a_listing_of_every_job_is_the_count_next_time() -> None:
    fake = FakeSqueue(listing({str(n): KNOWN["10"] for n in range(1, 4001)}), sdiag=sdiag(0))
    look = SqueueLookup(run=fake)
    look.all_jobs()
    assert look.jobs_held == 4000
    look.jobs(["1", "2"])  # 4,000 held: two single calls cost less than a listing
    assert fake.sdiag_calls == []
    assert sorted(argv[argv.index("-j") + 1] for argv, _ in fake.calls[1:]) == ["1", "2"]


@pytest.mark.parametrize("kwargs", [{"many": 0}, {"parallel": 0}])
def test_a_listing_asked_for_or_no_single_calls_is_never_one_by_one(kwargs: dict) -> None:  # type: ignore[type-arg]
    fake = FakeSqueue(listing(KNOWN), sdiag=sdiag(100_000))
    SqueueLookup(run=fake, **kwargs).jobs(["11", "10"])
    assert len(fake.calls) == 1 and fake.sdiag_calls == []


def test_ids_a_listing_serves_at_any_likely_count_are_listed_without_asking_sdiag() -> None:
    ids = [str(n) for n in range(1, 201)]
    fake = FakeSqueue(listing(KNOWN), sdiag=sdiag(10**6))
    answer = SqueueLookup(run=fake).jobs(ids)
    assert fake.sdiag_calls == [] and len(fake.calls) == 1 and "-j" not in fake.calls[0][0]
    assert answer["11"] == JobInfo("11", "RUNNING", True, 0, 4294901753, "None") and answer["200"] is None
    few = FakeSqueue(one_by_one_answer(), sdiag=sdiag(10**6))  # 120 ids: the count can still turn it
    SqueueLookup(run=few).jobs(ids[:120])
    assert len(few.sdiag_calls) == 1 and len(few.calls) == 120


def test_an_array_asked_alone_still_says_how_many_tasks_it_reaches() -> None:
    def answer(argv: Tuple[str, ...], nonce: str) -> Completed:
        job = argv[argv.index("-j") + 1]
        if job == "9":  # `-j 9`, an array's own id, lists every task (lab, 22.05.8)
            out = line("9", "RUNNING", "0", "0", "4", "None", array=("9", "2"), nonce=nonce) + line(
                "13", "RUNNING", "0", "0", "4", "None", array=("9", "1"), nonce=nonce)
        else:
            out = line("13", "RUNNING", "0", "0", "4", "None", array=("9", "1"), nonce=nonce)
        return done(argv, stdout=out)

    answer_ = SqueueLookup(run=FakeSqueue(answer, sdiag=sdiag(100_000))).jobs(["9", "13"])
    assert answer_["9"] == JobInfo("9", "RUNNING", False, 0, 4, "None", array_job_id="9", array_tasks=2)
    assert answer_["13"] == JobInfo("13", "RUNNING", False, 0, 4, "None", array_job_id="9")


def test_one_by_one_asks_at_most_parallel_at_once() -> None:
    running: List[int] = [0, 0]  # now, most
    lock = threading.Lock()
    release = threading.Event()

    def answer(argv: Tuple[str, ...], nonce: str) -> Completed:
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
            if running[1] >= 3:
                release.set()
        release.wait(5.0)
        with lock:
            running[0] -= 1
        return one_by_one_answer()(argv, nonce)

    ids = [str(n) for n in range(1, 13)]
    answer_ = SqueueLookup(run=FakeSqueue(answer, sdiag=sdiag(10**6)), parallel=3).jobs(ids)
    assert list(answer_) == ids and all(info is not None for info in answer_.values())
    assert running[1] == 3


def test_a_count_learned_serves_every_lookup_of_the_process_for_a_minute() -> None:
    """An operation's array check and corroboration are two lookups: one sdiag between them."""
    now = [1000.0]
    fake = FakeSqueue(one_by_one_answer(), sdiag=sdiag(50_000))
    for _ in range(2):
        SqueueLookup(run=fake, clock=lambda: now[0]).jobs(["11", "12"])
    assert len(fake.sdiag_calls) == 1 and len(fake.calls) == 4
    now[0] += 61.0
    SqueueLookup(run=fake, clock=lambda: now[0]).jobs(["11", "12"])
    assert len(fake.sdiag_calls) == 2
    other = FakeSqueue(listing(KNOWN))  # another runner: its own count (none: sdiag missing)
    SqueueLookup(run=other, clock=lambda: now[0]).jobs(["11", "10"])
    assert len(other.calls) == 1 and "11,10" in other.calls[0][0]


# --- what -v says of the choice ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "sdiag_says", "held_before", "said"),
    [
        (["11", "10", "8"], sdiag(100_000, 20), None,
         "squeue: 3 ids asked each alone, 3 at a time (jobs slurmctld holds: 100020)"),
        (["11", "10"], sdiag(40, 3), None, "squeue: 2 ids asked in one squeue -j list (jobs slurmctld holds: 43)"),
        (["11", "10"], Completed(("/usr/bin/sdiag",), 143, b"", b"", True, False), None,
         "squeue: 2 ids asked in one squeue -j list (jobs slurmctld holds: sdiag did not tell)"),
        ([str(n) for n in range(1, 201)], sdiag(10**6), None,
         "squeue: 200 ids asked in one listing of every job (jobs slurmctld holds: not needed)"),
        (["1", "2"], sdiag(0), 4000, "squeue: 2 ids asked each alone, 2 at a time (jobs slurmctld holds: 4000)"),
    ],
)
def test_the_choice_and_the_count_it_was_made_at_are_logged_at_info(
    caplog: pytest.LogCaptureFixture, ids: List[str], sdiag_says: Completed, held_before: Optional[int], said: str
) -> None:
    answer = one_by_one_answer() if "each alone" in said else listing(KNOWN)
    look = SqueueLookup(run=FakeSqueue(answer, sdiag=sdiag_says))
    look.jobs_held = held_before
    with caplog.at_level(logging.INFO, logger="slurm_dsl"):
        look.jobs(ids)
    assert [r.getMessage() for r in caplog.records] == [said]


def test_one_id_and_a_listing_asked_for_log_no_choice(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="slurm_dsl"):
        SqueueLookup(run=FakeSqueue(one_by_one_answer(), sdiag=sdiag(0))).jobs(["11"])
        SqueueLookup(run=FakeSqueue(listing(KNOWN), sdiag=sdiag(0)), many=0).jobs(["11", "10"])
    assert caplog.records == []
