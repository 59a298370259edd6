"""One driver for many jobs (docs/contract.md §10.0, §11): the CLI's operations and ``api.run_ops``.

``drive`` runs one op on many jobs under ONE deadline, the bulk path or one script per job, and
streams events in input order: ``Ran`` per job, and at most one ``Stopped``, last, when the ledger
failed.  What refuses the whole run before anything ran is raised.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Generator, List, Optional, Sequence, Tuple, Union, overload

from ..core.jobid import JobIds, distinct_ids
from ..core.model import InvalidInput, LedgerError, NotRecorded, Op, Outcome
from ..core.script import KILL_GRACE
from ..host import process, world
from ..ledger import base
from .arrays import LookupAnswer
from .background import Background
from .calls import unstarted
from .deadlines import check_deadline
from .tracked import NO_LINK, Begun, Link, Taken, Tracker

if TYPE_CHECKING:
    from .bulk import Progress

# The bulk path (``bulk``, and with it ``core.bulk_reader``) and the thread pool are imported
# where they are used: one job on the command line, the common case, reaches its first Slurm
# call without paying for them (docs/benchmarks.md §7).


@dataclass(frozen=True)
class Ran:
    """A job's outcome; ``recorded`` False: its script ran but the ledger could not record it."""

    outcome: Outcome
    recorded: bool = True


@dataclass(frozen=True)
class Stopped:
    """The ledger failed: no further job started; ``not_started`` never ran (in input order)."""

    error: LedgerError
    not_started: Tuple[str, ...]


Event = Union[Ran, Stopped]
Events = Generator[Event, None, None]  # closing it stops the run as a ledger failure does
# ``drive``'s with a key: ``Taken`` too, only under a key: a job whose key, read again under its
# lease, said not to act (``tracked.not_to_act``); nothing ran for it, and ``run.keyed`` looks
# back again.
LinkedEvents = Generator[Union[Ran, Stopped, Taken], None, None]


# Seconds of this process's own work past the deadline, beyond the waits counted below: the
# expired scripts of a chunk or job that began just before it (each a shell that starts no
# call), reading and printing the outcomes.  Milliseconds on the lab; a second leaves room.
OWN_WORK = 1.0


def overrun_seconds(busy_timeout: Optional[float] = None) -> float:
    """The most a run can take past its deadline, in seconds, for a ledger whose every transaction ends
    within its busy timeout: the sum docs/contract.md §10.0 ("The bound") derives."""
    from .bulk import LOOKUP_FLOOR

    busy = base.BUSY_TIMEOUT if busy_timeout is None else busy_timeout
    stop_call = KILL_GRACE + 2 * process.DRAIN
    lookup = LOOKUP_FLOOR + KILL_GRACE + 2 * process.DRAIN
    return max(busy, stop_call + lookup) + 2 * busy + OWN_WORK


@overload
def drive(
    tracker: Tracker,
    op: Union[Op, str],
    job_ids: Sequence[Union[str, int]],
    deadline: float,
    *,
    one_by_one: bool = False,
    parallel: int = 1,
    progress: Optional[Progress] = None,
    link: None = None,
    begun: Optional[Begun] = None,
    looking: Optional[Callable[[], LookupAnswer]] = None,
) -> Events: ...


@overload
def drive(
    tracker: Tracker,
    op: Union[Op, str],
    job_ids: Sequence[Union[str, int]],
    deadline: float,
    *,
    one_by_one: bool = False,
    parallel: int = 1,
    progress: Optional[Progress] = None,
    link: Link,
    begun: Optional[Begun] = None,
    looking: Optional[Callable[[], LookupAnswer]] = None,
) -> LinkedEvents: ...


def drive(
    tracker: Tracker,
    op: Union[Op, str],
    job_ids: Sequence[Union[str, int]],
    deadline: float,
    *,
    one_by_one: bool = False,
    parallel: int = 1,
    progress: Optional[Progress] = None,
    link: Optional[Link] = None,
    begun: Optional[Begun] = None,
    looking: Optional[Callable[[], LookupAnswer]] = None,
) -> LinkedEvents:
    """Run ``op`` on each distinct id of ``job_ids`` before ``deadline`` (epoch seconds): the bulk path
    unless ``one_by_one`` or a single id.  ``progress``: (ids done, ids in all) as chunks finish;
    ``looking``: the array check of these ids, already started by the caller (a ``Background``'s
    ``result``).  With a key (``link``, recorded with every intent), a job it says not to act on is a
    ``Taken`` event; without one, nothing is (``tracked.not_to_act`` reads no key).  ``begun`` gets
    each job's history id."""
    link = NO_LINK if link is None else link
    op = Op(op)
    ids = distinct_ids(job_ids)
    if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
        raise InvalidInput(f"parallel must be a whole number, at least 1, got {parallel!r}")
    deadline = check_deadline(deadline, tracker.clock)
    if one_by_one or len(ids) == 1:
        return _one_by_one(tracker, op, ids, deadline, parallel, link, begun, looking)
    if looking is None:
        # The array check's lookup starts now, in a thread: its squeue runs while the bulk path is
        # imported and the caller gets going; its answer is waited for before the first intent
        # (which commits it as the baseline), and what it raises is raised there.
        looking = Background(lambda: tracker.look_up(op, ids, deadline), "slurm-dsl array check").result
    return _bulk(tracker, op, ids, deadline, progress, link, looking, begun)


def _bulk(
    tracker: Tracker, op: Op, ids: JobIds, deadline: float, progress: Optional[Progress], link: Link,
    looking: Callable[[], LookupAnswer], begun: Optional[Begun],
) -> LinkedEvents:
    from .bulk import run_many

    done: List[str] = []
    try:
        for outcome in run_many(tracker, op, ids, deadline=deadline, progress=progress, link=link,
                                looked_up=looking, begun=begun):
            done.append(outcome.job_id)
            yield outcome if isinstance(outcome, Taken) else Ran(outcome)
    except NotRecorded as exc:  # they ran: each is reported all the same, then nothing more starts
        for outcome in exc.outcomes:
            done.append(outcome.job_id)
            yield Ran(outcome, recorded=False)
        yield Stopped(exc, _left(ids, done))
    except LedgerError as exc:  # before a chunk's scripts started: that chunk and the rest never ran
        yield Stopped(exc, _left(ids, done))


def _left(ids: Sequence[str], done: List[str]) -> Tuple[str, ...]:
    seen = set(done)
    return tuple(j for j in ids if j not in seen)


def _one_by_one(
    tracker: Tracker, op: Op, ids: JobIds, deadline: float, parallel: int, link: Link, begun: Optional[Begun],
    looking: Optional[Callable[[], LookupAnswer]] = None,
) -> LinkedEvents:
    # One lookup for every id before anything runs (docs/contract.md §9.4): an array's own JobId
    # would make scontrol act on every task of the array.  WholeArray, LookupFailed: nothing ran.
    # Its answer for each job is committed with that job's intent (its baseline).
    looked = tracker.look_up(op, ids, deadline) if looking is None else looking()
    from concurrent.futures import ThreadPoolExecutor  # after the first call: see the imports

    # Set at the first ledger error (or if the consumer stops): from then on no new script
    # starts.  The ones running finish, and every outcome whose script started is reported,
    # recorded or not: automation must never take a job that ran for one that did not.
    stop = threading.Event()

    def one(job_id: str) -> Tuple[Union[Outcome, Taken, None], Optional[LedgerError]]:
        if stop.is_set():
            return None, None
        if tracker.clock() >= deadline:
            return unstarted(op, job_id), None
        try:
            return tracker.run(op, job_id, deadline, checked=True, looked=looked, link=link, begun=begun), None
        except NotRecorded as exc:  # it ran (the tracker logged it)
            stop.set()
            return exc.outcome, exc
        except LedgerError as exc:  # before its script started: nothing ran
            stop.set()
            return None, exc

    errors: List[LedgerError] = []
    not_started: List[str] = []
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        try:
            for job_id, (outcome, error) in zip(ids, pool.map(world.carry(one), ids)):
                if outcome is None:
                    not_started.append(job_id)
                elif isinstance(outcome, Taken):
                    yield outcome
                else:
                    yield Ran(outcome, recorded=not isinstance(error, NotRecorded))
                if error is not None:
                    errors.append(error)
        except BaseException:
            stop.set()  # EPIPE, Ctrl-C, the consumer closing: the pool waits for the running jobs
            raise
    if errors:
        yield Stopped(errors[0], tuple(not_started))
