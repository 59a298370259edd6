"""Bulk operations (docs/contract.md §11): many jobs, one scontrol process per chunk and call,
each job still with its own strict result, recorded in the ledger.

Per chunk: leases and intents (with baselines) in one transaction, a ping unless the lookup is
fresh, the list calls read per id, the ok ids corroborated, then results and leases in one
transaction.  A chunk of one id runs the single script.  Outcomes come in input order, a chunk at a time.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from typing import AbstractSet, Callable, Dict, Iterator, List, Optional, Sequence, Union, overload

from ..core.bulk_reader import ListCall, combine_listed, plan_chunks, requeue_next_calls
from ..core.jobid import JobIds, distinct_ids
from ..core.jobinfo import JobInfo
from ..core.model import (
    Call,
    CallOutcome,
    InvalidInput,
    LedgerError,
    LookupFailed,
    NotRecorded,
    Op,
    Outcome,
    Reason,
    RequeueBit,
    Result,
)
from ..core.script import list_argv
from ..core.vouch import VOUCHING, min_job_age, vouched
from ..host import process, world
from ..host.binaries import find_scontrol, find_squeue
from ..ledger.base import STDERR_CAP, LedgerStore
from ..lookups.sight import trusted
from ..lookups.squeue import MAX_LISTED, SQUEUE_TIMEOUT, SqueueLookup
from .arrays import LookupAnswer
from .background import Background
from .calls import execute, new_nonce, run_list_call, run_open_list, unstarted
from .deadlines import check_deadline
from .pace import calls_of
from .tracked import (
    NO_LINK,
    Begun,
    Link,
    Taken,
    Tracker,
    after_calls,
    lease_owner,
    lease_ttl,
    record,
    start,
)

log = logging.getLogger("slurm_dsl")

# Seconds one id may cost in one list call: slurmctld answers ~1 ms per id on the lab
# (200 ids in 209 ms, docs/slurm-bulk.md §6); 10 ms leaves room for a busy controller.
PER_ID_SECONDS = 0.01
MAX_CHUNK = 1000  # ids per chunk at most, whatever the deadline
PING_TIMEOUT = 5.0  # seconds `scontrol ping` may take before the chunk counts the controller as down
# Seconds for which slurmctld answering the ids' lookup stands in for a chunk's ping.
ANSWER_FRESH = 1.0

Progress = Callable[[int, int], None]  # (ids done, ids in all)


def chunk_limit(op: Op, left: float) -> int:
    """How many ids (at least one) one chunk may hold so that its calls fit the ``left`` seconds to the deadline."""
    calls = 3 if Op(op).requeues else 1
    return max(1, min(MAX_CHUNK, int(left / (PER_ID_SECONDS * calls))))


@overload
def run_many(
    tracker: Tracker,
    op: Union[Op, str],
    job_ids: Sequence[Union[str, int]],
    timeout: Optional[float] = None,
    *,
    deadline: Optional[float] = None,
    progress: Optional[Progress] = None,
    link: None = None,
    looked_up: Optional[Callable[[], LookupAnswer]] = None,
    begun: Optional[Begun] = None,
) -> Iterator[Outcome]: ...


@overload
def run_many(
    tracker: Tracker,
    op: Union[Op, str],
    job_ids: Sequence[Union[str, int]],
    timeout: Optional[float] = None,
    *,
    deadline: Optional[float] = None,
    progress: Optional[Progress] = None,
    link: Link,
    looked_up: Optional[Callable[[], LookupAnswer]] = None,
    begun: Optional[Begun] = None,
) -> Iterator[Union[Outcome, Taken]]: ...


def run_many(
    tracker: Tracker,
    op: Union[Op, str],
    job_ids: Sequence[Union[str, int]],
    timeout: Optional[float] = None,
    *,
    deadline: Optional[float] = None,
    progress: Optional[Progress] = None,
    link: Optional[Link] = None,
    looked_up: Optional[Callable[[], LookupAnswer]] = None,
    begun: Optional[Begun] = None,
) -> Iterator[Union[Outcome, Taken]]:
    """One outcome per distinct id, in input order, as chunks finish; with a key (``link``), a ``Taken``
    where it says not to act.

    Exactly one of ``timeout`` (from now) and ``deadline`` (epoch seconds).  ``looked_up``: the array
    check's lookup of these ids, already started (``run.background.Background``).  Raises before anything
    ran: ``InvalidInput``, ``WholeArray``, ``LookupFailed``, ``LedgerError``; once a chunk ran,
    ``NotRecorded`` carrying that chunk's outcomes (earlier chunks' were yielded already).
    """
    link = NO_LINK if link is None else link
    op = Op(op)
    ids = distinct_ids(job_ids)  # checked here once: every chunk below is a part of them
    if (timeout is None) == (deadline is None):
        raise InvalidInput("give exactly one of timeout (seconds) and deadline (epoch seconds)")
    if deadline is None:  # counted from now, once: every chunk, call and lookup below keeps it
        assert timeout is not None
        deadline = tracker.clock() + timeout
    deadline = check_deadline(deadline, tracker.clock)
    # Its answers are the baselines committed with the intents.
    looked = tracker.look_up(op, ids, deadline) if looked_up is None else looked_up()
    infos = looked.infos
    answered_at = tracker.clock() if infos else None  # slurmctld answered the lookup just now
    # scontrol and squeue resolved once for the whole run (host.binaries), before anything is
    # written: a path refused then leaves no unfinished operation in the history (issue 16).
    # Restore is not corroborated: a gone job's flag is gone.
    scontrol = find_scontrol(tracker.scontrol)
    squeue = None if op is Op.RESTORE else find_squeue(tracker.squeue, tracker.scontrol)
    run = _Run(tracker, op, deadline, looked, answered_at, link, scontrol, squeue,
               _MinJobAge(tracker, deadline), begun)  # MinJobAge asked once, at the first chunk that can use it
    done = 0
    paced = tracker.pace.chunk(calls_of(op))  # a chunk's calls at most a burst's worth (§10.5)
    for unit in _units(ids, infos, lambda: min(chunk_limit(op, deadline - tracker.clock()), paced or MAX_CHUNK)):
        outcomes: List[Union[Outcome, Taken]]
        if tracker.clock() >= deadline:
            outcomes = [unstarted(op, j) for j in unit]
        elif len(unit) == 1 and _alone(unit[0], infos):
            outcomes = [tracker.run(op, unit[0], deadline, checked=True, looked=looked, link=link, begun=begun)]
        else:
            outcomes = _run_chunk(run, unit)
        yield from outcomes
        done += len(unit)
        if progress is not None:
            progress(done, len(ids))


def _alone(job_id: str, infos: Dict[str, Optional[JobInfo]]) -> bool:
    info = infos.get(job_id)
    return info is not None and info.array_job_id == job_id


def _units(ids: JobIds, infos: Dict[str, Optional[JobInfo]], limit: Callable[[], int]) -> Iterator[JobIds]:
    """Chunks of list-safe ids and single array ids, in input order, each cut at its turn to ``limit()`` ids."""
    start = 0  # where the run of list-safe ids not cut yet begins
    for at, job_id in enumerate(ids):
        if _alone(job_id, infos):
            yield from _cut(ids.part(start, at), limit)
            start = at + 1
            yield ids.part(at, at + 1)
    yield from _cut(ids.part(start, len(ids)), limit)


def _cut(ids: JobIds, limit: Callable[[], int]) -> Iterator[JobIds]:
    start = 0
    while start < len(ids):
        most = limit()
        size = len(next(iter(plan_chunks(ids.part(start, start + most), max_ids=most))))
        yield ids.part(start, start + size)
        start += size


@dataclass(frozen=True)
class _Run:
    """What every chunk of one bulk run shares, fixed when the run starts."""

    tracker: Tracker
    op: Op
    deadline: float
    looked: LookupAnswer
    answered_at: Optional[float]
    link: Link
    scontrol: str
    squeue: Optional[str]  # None: not corroborated (restore)
    age: _MinJobAge
    begun: Optional[Begun]  # each job's history id, as its intent is committed


def _run_chunk(run: _Run, chunk: JobIds) -> List[Union[Outcome, Taken]]:
    tracker, op, deadline, looked, link = run.tracker, run.op, run.deadline, run.looked, run.link
    ledger = tracker.ledger()
    owner = lease_owner("bulk")
    ttl = lease_ttl(deadline - tracker.clock(), tracker.lease_slack)  # every script of the chunk starts after this
    nonce = new_nonce()
    # What could refuse the chunk is checked before anything is written: a refusal then leaves
    # no unfinished operation in the history (issue 16).
    list_argv(Op.RELEASE if op is Op.OPEN else op, 1, chunk)
    # The leases and the intents: one transaction, committed before any script starts.  With a
    # key, each leased job's key is read again there: a job it now says not to act on gives its
    # lease back in the same transaction and is ``Taken`` (docs/contract.md §12).
    listed, op_ids, taken = start(ledger, op, chunk, owner=owner, ttl=ttl, nonce=nonce, looked=looked,
                                  now=tracker.clock(), deadline=deadline, actor=tracker.actor, link=link,
                                  begun=run.begun, admin_reason=tracker.admin_reason)
    results: Dict[str, Union[Outcome, Taken]] = {}
    results.update(_run_listed(run, listed, op_ids, nonce, owner))
    results.update((j, Taken(j, d.detail)) for j, d in taken.items())
    # Jobs another operation or sweep held: each on its own, waiting for its lease.  Should the
    # ledger fail there, the outcomes already in hand travel with the error, never lost.  Once
    # the deadline has passed, the rest start nothing and write nothing: expired.
    for job_id in chunk:
        if job_id in results:
            continue
        if tracker.clock() >= deadline:
            results[job_id] = unstarted(op, job_id)
            continue
        try:
            results[job_id] = tracker.run(op, job_id, deadline, checked=True, looked=looked, link=link,
                                                 begun=run.begun)
        except LedgerError as exc:
            ran = [r for j in chunk if isinstance(r := results.get(j), Outcome)]
            if isinstance(exc, NotRecorded):
                ran.append(exc.outcome)
            if not ran:
                raise
            raise NotRecorded(ran[0], exc, more=ran[1:]) from exc
    return [results[j] for j in chunk]


def _run_listed(run: _Run, ids: JobIds, op_ids: List[int], nonce: str, owner: str) -> Dict[str, Outcome]:
    """Run the chunk's list calls on the ids whose intents are committed (``op_ids``), then record the
    results and give the leases back, in one transaction."""
    if not ids:
        return {}
    tracker, op, deadline, scontrol, answered_at = run.tracker, run.op, run.deadline, run.scontrol, run.answered_at
    ledger = tracker.ledger()
    try:
        # slurmctld answering the ids' lookup a moment ago says as much as a ping would.
        fresh = answered_at is not None and tracker.clock() - answered_at <= ANSWER_FRESH
        shared: Dict[str, bytes] = {}
        # The chunk's slot, every call of it, before its first (§10.5): a requeue's calls 2 and 3
        # never wait for pacing once call 1 may have set a flag.  Past the deadline, no call starts.
        if not tracker.pace.take(len(ids) * calls_of(op), deadline):
            outcomes = {j: unstarted(op, j) for j in ids}
        elif not fresh and not controller_up(scontrol, min(PING_TIMEOUT, max(deadline - tracker.clock(), 0.0))):
            outcomes = {j: _not_run(op, j) for j in ids}
        elif len(ids) == 1:
            # One id is a single op (docs/contract.md §11): its own script, under the nonce its
            # intent was recorded with, read by the single reader; nothing to corroborate.
            outcomes = {ids[0]: execute(op, ids[0], deadline, scontrol=scontrol, nonce=nonce, clock=tracker.clock)}
        else:
            outcomes = _calls(run, ids, nonce, shared)
    except BaseException:
        _give_back(ledger, ids, owner)
        raise
    # Each id's own stderr; a call's text no id owns once, with the first id of that call.
    finishes = [(op_id, outcomes[j], b"".join(c.stderr for c in outcomes[j].calls) + shared.get(j, b""))
                for op_id, j in zip(op_ids, ids)]
    record(ledger, finishes, ids, owner, nonce, lambda: _give_back(ledger, ids, owner), tracker.place(),
           after_calls(op, list(outcomes.values()), scontrol, deadline, tracker.clock))
    return outcomes


def _give_back(ledger: LedgerStore, ids: Sequence[str], owner: str) -> None:
    """Release the leases if the ledger lets us, never in place of what is on its way."""
    try:
        ledger.release_leases(ids, owner)
    except LedgerError as exc:
        log.warning("could not give back %d lease(s) (they lapse by themselves): %s", len(ids), exc)


def _calls(run: _Run, ids: JobIds, nonce: str, shared: Dict[str, bytes]) -> Dict[str, Outcome]:
    """Run the op's list calls on ``ids``, combine each id's calls as a single op would, and corroborate
    the ok ids not vouched for (``core.vouch``).  ``shared``: filled by ``_unowned``."""
    tracker, op, deadline, scontrol, squeue = run.tracker, run.op, run.deadline, run.scontrol, run.squeue
    looked, age = run.looked, run.age
    candidates = {j for j in ids if (i := looked.infos.get(j)) is not None and i.state in VOUCHING}
    if squeue is not None and candidates:
        age.ask(scontrol)  # in the background, while the calls run
    if op is Op.OPEN:  # one direct scontrol release of the list, unwrapped as open always is
        first = run_open_list(ids, deadline, scontrol, clock=tracker.clock)
    else:
        first = run_list_call(op, 1, ids, deadline, scontrol, nonce=nonce, clock=tracker.clock)
    later: Dict[int, Dict[str, Call]] = {}
    early: Optional[Background[Found]] = None
    if op.requeues:
        second, third = requeue_next_calls(ids, first)
        second_ids, third_ids = ids.among(set(second)), ids.among(set(third))
        if second_ids:
            later[2] = run_list_call(op, 2, second_ids, deadline, scontrol, clock=tracker.clock)
            may_end_ok = second_ids.among({j for j in second_ids if later[2][j].outcome is CallOutcome.SUCCESS
                                           and not (j in candidates and age.known())})
            if squeue is not None and may_end_ok and third_ids:
                early = Background(lambda: _look_up(may_end_ok, squeue, deadline, tracker), "slurm-dsl lookup")
        if third_ids:
            later[3] = run_list_call(op, 3, third_ids, deadline, scontrol, clock=tracker.clock)
    outcomes = combine_listed(op, ids, {1: first, **later})
    outcomes = _unowned(op, {1: first, **later}, outcomes, shared)
    if squeue is None:
        return outcomes
    min_age = age.result() if candidates else None
    sure = vouched(candidates, looked.infos, looked.started, min_age, tracker.clock())
    return corroborate(outcomes, squeue, deadline, tracker, early=early.result() if early is not None else None,
                       vouched=sure, ids=ids, scontrol=scontrol)


# Bytes of a call's unowned text shown in its one diagnostic, and kept in the ledger (a third of
# a record's stderr cap: a requeue's three calls can all be there).
SHOWN_UNOWNED = 1000
UNOWNED_KEPT = STDERR_CAP // 3


def _unowned(
    op: Op, calls: Dict[int, Dict[str, Call]], outcomes: Dict[str, Outcome], shared: Dict[str, bytes]
) -> Dict[str, Outcome]:
    """Text a list call printed that no id owns, kept once (docs/contract.md §11, "Bounded output"): logged,
    put in ``shared`` for the call's first id's record, and noted on each id the call left unknown."""
    notes: Dict[str, List[str]] = {}
    for number in sorted(calls):
        read = calls[number]
        text = read.unowned if isinstance(read, ListCall) else b""
        if not text:
            continue
        carrier = next(iter(read))
        # Each call's head, so that the record's cap keeps some of every call's text.
        shared[carrier] = shared.get(carrier, b"") + text[:UNOWNED_KEPT]
        shown = text[:SHOWN_UNOWNED].decode("utf-8", "backslashreplace")
        log.warning("%s call %d on %d jobs printed %d bytes of stderr no job owns (kept with job %s): %s%s",
                    op.value, number, len(read), len(text), carrier, ascii(shown)[1:-1],
                    "..." if len(text) > SHOWN_UNOWNED else "")
        for job, call in read.items():
            if call.outcome is CallOutcome.UNKNOWN:
                notes.setdefault(job, []).append(
                    f"call {number} printed {len(text)} bytes of stderr no job owns (kept with job {carrier})")
    if not notes:
        return outcomes
    joined = {j: "; ".join(([outcomes[j].detail] if outcomes[j].detail else []) + n) for j, n in notes.items()}
    return {**outcomes, **{j: replace(outcomes[j], detail=d) for j, d in joined.items()}}


class _MinJobAge:
    """slurmctld's MinJobAge (``core.vouch.min_job_age``), asked once, in the background (None: unread)."""

    def __init__(self, tracker: Tracker, deadline: float) -> None:
        self._tracker = tracker
        self._deadline = deadline
        self._asking: Optional[threading.Thread] = None
        self._value: Optional[float] = None

    def ask(self, scontrol: str) -> None:
        if self._asking is not None:
            return

        def work() -> None:
            left = min(PING_TIMEOUT, max(self._deadline - self._tracker.clock(), 0.0))
            if left > 0:
                done = process.run_argv((scontrol, "show", "config"), timeout=left)
                if done.returncode == 0 and not done.pipes_held:
                    self._value = min_job_age(done.stdout)

        self._asking = threading.Thread(target=world.carry(work), name="slurm-dsl MinJobAge", daemon=True)
        self._asking.start()

    def known(self) -> bool:
        """Whether MinJobAge is known now (without waiting)."""
        return self._asking is not None and not self._asking.is_alive() and self._value is not None

    def result(self) -> Optional[float]:
        if self._asking is None:
            return None
        self._asking.join()
        return self._value


# A lookup's answer (``SqueueLookup.jobs``), or why it could not ask.
Found = Union[Dict[str, Optional[JobInfo]], LookupFailed]


# Seconds a corroborating lookup gets at least, even at or past the deadline: a lookup starts
# nothing, and without it a list call's SUCCESS could not be told from a never-existed id's.
# Part of the most a command may take past its deadline (driver.overrun_seconds).
LOOKUP_FLOOR = 1.0


def _look_up(ids: JobIds, squeue: str, deadline: float, tracker: Tracker) -> Found:
    left = max(deadline - tracker.clock(), LOOKUP_FLOOR)
    try:
        return SqueueLookup(squeue, timeout=min(SQUEUE_TIMEOUT, left), many=MAX_LISTED).jobs(ids)
    except LookupFailed as exc:
        return exc


def corroborate(
    outcomes: Dict[str, Outcome],
    squeue: str,
    deadline: float,
    tracker: Tracker,
    *,
    early: Optional[Found] = None,
    vouched: AbstractSet[str] = frozenset(),
    ids: Optional[JobIds] = None,
    scontrol: Optional[str] = None,
) -> Dict[str, Outcome]:
    """One lookup of the ids read as ok but not ``vouched`` for: an unknown one becomes ``not_found``
    (docs/contract.md §11).  ``early``: a lookup already made, used if it covers them all; ``ids``,
    ``scontrol``: checked or resolved already (else done here)."""
    checked = distinct_ids(outcomes) if ids is None else ids
    ok = checked.among({j for j, o in outcomes.items() if o.result is Result.OK and j not in vouched})
    if not ok:
        return outcomes
    found = early if early is not None and (isinstance(early, LookupFailed) or set(ok) <= early.keys()) else None
    if found is None:
        found = _look_up(ok, squeue, deadline, tracker)
    if isinstance(found, LookupFailed):
        return {**outcomes, **{j: replace(outcomes[j], detail=f"unverified: {found.reason}") for j in ok}}
    # A "gone" answered to an account that may not see every job is no answer (lookups.sight).
    found, blind = trusted(found, scontrol or tracker.scontrol or find_scontrol(None))
    if blind is not None:
        unseen = [j for j in ok if j not in found]
        outcomes = {**outcomes, **{j: replace(outcomes[j], detail=f"unverified: {blind.gone_note(1)}")
                                   for j in unseen}}
        ok = ok.among(found)
    gone = {
        j: replace(
            outcomes[j],
            result=Result.NOT_FOUND,
            requeue_bit=RequeueBit.CLEAR if outcomes[j].op.requeues else None,
            detail="slurmctld does not know the job, although its list call answered SUCCESS",
        )
        for j in ok
        if j in found and found[j] is None
    }
    return {**outcomes, **gone}


def controller_up(scontrol: str, timeout: float) -> bool:
    """Whether `scontrol ping` says slurmctld is UP (a probe that cannot tell counts as down)."""
    if timeout <= 0:
        return True  # past the deadline: the calls will expire unstarted anyway
    done = process.run_argv((scontrol, "ping"), timeout=timeout)
    return done.returncode == 0 and not done.pipes_held and b" is UP" in done.stdout


def _not_run(op: Op, job_id: str) -> Outcome:
    bit = RequeueBit.CLEAR if op.requeues else None
    return Outcome(op, job_id, Result.NOT_RUN, bit, Reason.CONTROLLER_DOWN, (), None,
                   "scontrol ping: slurmctld is not UP; the chunk was not started")
