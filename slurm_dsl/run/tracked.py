"""Operations recorded in the ledger: lease, intent first, run, record (docs/contract.md §9.2).

Contract: ``Tracker.run`` takes the job's lease (waiting for it until the
deadline; a job still leased then is ``expired``: nothing ran), commits the
operation's start (for a requeue: the object becomes ``may_be_set``) *before*
the script starts, runs it with ``calls.execute``, and records the outcome, which
sets the object's bit to what docs/contract.md §7 says (``combine.next_bit``).  A crash
anywhere in between leaves ``may_be_set`` and a lease that lapses, so the
sweeper finds the job.  The lease outlasts the script's deadline and the runner's KILL after it.  Once the
script started, its outcome is never lost: if the ledger then fails, ``run``
raises ``NotRecorded`` carrying it; a lease that cannot be given back lapses.

Arrays (docs/contract.md §9.4): given an array's own JobId, scontrol acts on every task of the
array, so one object could not cover what a requeue may leave set.  Before an
operation (restore aside: it only clears flags) ``Tracker.look_up`` looks the
ids up in one squeue call, bounded by the deadline, and raises ``WholeArray``
for any id that reaches other tasks: nothing runs.  A task addressed by its own
JobId, and an array's own JobId that holds its one last task, are single jobs.

The baseline (docs/contract.md §9.2, §12): that lookup's answer for each job is committed with
the operation's intent, in the same transaction, as its ``baseline``, with ``baseline_at``, the
ledger-clock time the lookup STARTED, and ``ends_by``, the ledger-clock time by which every
process of the operation is dead whatever happens (the deadline + KILL_GRACE + GUARD_MARGIN:
``lease_ttl``'s rule without the slack).  A requeue always looks its ids up before call 1: its
verdict, if its result is unknown, needs the RestartCnt it started from.  A job the lookup said
is gone, a restore, and a lookup skipped because the deadline had passed (the op then expires
without running) have no baseline.

A ledger connection is for one thread, so a ``Tracker`` opens one per thread
(``--parallel`` runs jobs on several).  ``clock`` is the deadlines' (this host's);
every time written to the ledger is the ledger's own (``LedgerStore.now``).
"""

from __future__ import annotations

import logging
import os
import pwd
import re
import threading
from types import MappingProxyType
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from ..core import life
from ..core.jobid import JobIds, checked_already, distinct_ids, validate_job_id
from ..core.jobinfo import JobInfo
from ..core.keys import Decision, Earlier, Step, check_key, decide, took_effect
from ..core.model import (
    CallOutcome,
    LedgerError,
    NotRecorded,
    Op,
    Outcome,
    RequeueBit,
    Result,
    Verdict,
    describe,
)
from ..core.script import KILL_GRACE
from ..host import world
from ..host.binaries import find_scontrol
from ..host.runs import ended, this_run
from ..ledger import base
from ..ledger.base import LedgerStore
from ..ledger.choose import open_ledger
from ..lookups import controller
from . import looks
from .arrays import NOT_LOOKED, LookupAnswer, look_up
from .calls import GUARD_MARGIN, execute, new_nonce
from .config import Configuration, configure
from .deadlines import Clock, check_deadline, steady
from .pace import Pace, calls_of

if TYPE_CHECKING:
    from ..ledger.records import HistoryEntry  # loaded by a keyed run only: one job's hold never needs it

log = logging.getLogger("slurm_dsl")

LEASE_SLACK = 30.0  # seconds a lease outlasts the runner's KILL after the deadline: the ledger writes around it
LEASE_POLL = 0.05


def lease_ttl(left: float, slack: float = LEASE_SLACK) -> float:
    """The ttl of a lease taken ``left`` seconds before the deadline of the runs it covers.

    The rule: a lease never lapses while a call of it may still run.  Every process of a run
    started before the deadline is gone by its backstop (``host.process.backstop``: at most the deadline
    + KILL_GRACE + GUARD_MARGIN, even if this process is frozen, and at once if it dies), so the
    lease lasts that long, and ``slack`` more for the ledger writes around the run."""
    return max(left, 0.0) + KILL_GRACE + GUARD_MARGIN + slack


def ends_after(left: float) -> float:
    """Seconds from now by which every process of an operation whose deadline is ``left``
    seconds away is dead, whatever happens: ``lease_ttl``'s rule without the slack (the ledger
    records it as ``ends_by``)."""
    return max(left, 0.0) + KILL_GRACE + GUARD_MARGIN


class Link(NamedTuple):
    """What ties an operation to others, recorded with its intent (docs/contract.md §12): the
    idempotency key it runs under (None: none) and, per job, the id of the first operation this
    one retries (a job absent from ``retry_of``: a first run).  Made by ``Link.of``, which checks
    the key (``core.keys.check_key``), or directly from a key checked already (``run.keyed``)."""

    key: Optional[str] = None
    retry_of: Mapping[str, int] = MappingProxyType({})

    @classmethod
    def of(cls, key: Optional[str] = None, retry_of: Optional[Mapping[str, int]] = None) -> Link:
        return cls(None if key is None else check_key(key), MappingProxyType(dict(retry_of or {})))


NO_LINK = Link()

# The history id of each job's operation a run began, filled in as it begins them, for a caller
# that reads those rows back (``run.keyed``): never looked for again by actor and time.
Begun = Dict[str, int]


class Taken(NamedTuple):
    """A keyed job that, read again under its lease, is not to be acted on after all (docs/contract.md
    §12, "A key is decided under the job's lease"): another process ran, or is settling, an
    operation of the same op and key since this one looked back.  Nothing ran and nothing was
    written for it; the caller looks back again (``run.keyed``).  ``detail``: ``decide``'s words."""

    job_id: str
    detail: str


def earlier(
    op: Op, entry: HistoryEntry, *, running: bool = False, verdict: Optional[Verdict] = None, settled: bool = False
) -> Earlier:
    """One earlier keyed operation as ``core.keys.decide`` reads it: its verdict is ``verdict`` if
    ``settled`` (a settling, or for an acknowledged one a reading again, just now), else the
    ledger's.  An acknowledged operation (its calls say it took effect) whose record no longer
    shows the effect (``absent``: acknowledged, then lost; ``gone``), or was read again too soon to
    say (``settled``, no verdict), counts as one whose effect is unknown (docs/contract.md §13.4):
    a keyed run then waits, or acts again exactly where it was lost."""
    calls = tuple(CallOutcome(c.outcome) for c in entry.calls)
    found = verdict if settled else (entry.settlement.verdict if entry.settlement else None)
    effect = took_effect(op, entry.result, calls)
    if effect is True and (found in (Verdict.ABSENT, Verdict.GONE) or (settled and found is None)):
        effect = None
    return Earlier(entry.id, entry.result, effect, found, running)


def not_to_act(ledger: LedgerStore, op: Op, job_ids: Sequence[str], key: Optional[str]) -> Dict[str, Decision]:
    """The jobs of ``job_ids`` whose key, read again now, says not to act, with why; to be called
    in the transaction that holds their leases and commits their intents (``LedgerStore.batch``: every
    write of another process under the ledger's write lock is visible there, on both dialects),
    so that two runs of one key never both act on a job (docs/contract.md §12).

    Under the job's lease no earlier operation of it still runs (it held the lease, or its lease
    lapsed after its backstop), so none is ``running``; one unfinished and unsettled still says
    ``wait``: the look-back settles it first."""
    if key is None or not job_ids:
        return {}
    out: Dict[str, Decision] = {}
    for job, rows in ledger.keyed(job_ids, op, key).items():
        decision = decide(op, [earlier(op, e) for e in rows])
        if decision.step is not Step.ACT:
            out[job] = decision
    return out


def start_fields(
    looked: LookupAnswer, ids: Sequence[str], ledger_now: float, now: float, deadline: float
) -> Tuple[Dict[str, JobInfo], Optional[float], float, Optional[str]]:
    """The baselines of ``ids`` (those the lookup found), their ``baseline_at`` and ``ends_by``,
    on the ledger's clock, for an operation beginning at ``ledger_now`` (the ledger's clock),
    which is ``now`` on the tracker's: the ledger's may be another host's (MariaDB), so each
    time is carried over as its distance from now.  And ``baseline_boot``, the lookup's start on
    this host's boot clock (``LookupAnswer.at_boot``), which settling compares with an earlier
    operation's end (``core.settle`` Rule 15)."""
    baselines = {j: info for j in ids if (info := looked.infos.get(j)) is not None}
    baseline_at = None if looked.started is None or not baselines else ledger_now - (now - looked.started)
    return baselines, baseline_at, ledger_now + ends_after(deadline - now), looked.at_boot if baselines else None


class Started(NamedTuple):
    """What ``start`` committed: the jobs leased and begun (``JobIds``, in their order) with
    their history ids, and the jobs whose key, read again under the lease, said not to act
    (their leases given back, nothing written for them)."""

    listed: JobIds
    op_ids: List[int]
    taken: Dict[str, Decision]


def start(
    ledger: LedgerStore, op: Op, ids: JobIds, *, owner: str, ttl: float, nonce: str, looked: LookupAnswer,
    now: float, deadline: float, actor: str, link: Link, begun: Optional[Begun] = None,
    admin_reason: Optional[str] = None,
) -> Started:
    """The leases and the intents of ``ids`` (docs/contract.md §9.2): ONE committed transaction,
    before any script starts; ``now`` is the tracker's clock then.  Each job ``owner`` could lease
    (for ``ttl`` seconds) begins ``op`` under ``nonce``, with its baseline from ``looked``, run by
    ``actor``, under ``link``'s key and as a retry of ``link.retry_of``'s operation; with a key,
    a leased job whose key now says not to act (``not_to_act``) gives its lease back in the same
    transaction.  A job another holds is in neither list (the caller waits for it, or runs it on
    its own).  ``begun`` gets each job's history id.  Shared by one job (``Tracker.run_linked``)
    and a bulk chunk (``run.bulk``)."""
    # run.settling (and the ledger's records with it) loads here, after the first Slurm call: the
    # array check's squeue starts without waiting for it (docs/benchmarks.md §7).
    from .settling import alive_before

    ledger.mark_run(str(this_run()))  # other hosts can tell this run alive while it is (§13.7)
    alive = alive_before(ledger, ids)  # outside the write lock: it may look through every process
    with ledger.batch():
        held = set(ledger.acquire_leases(ids, owner, ledger.now(), ttl, alive=alive))
        listed = ids.among(held)
        taken = not_to_act(ledger, op, listed, link.key)
        if taken:
            ledger.release_leases(list(taken), owner)
            listed = listed.without(taken)
        op_ids: List[int] = []
        if listed:
            began = ledger.now()
            baselines, baseline_at, ends_by, baseline_boot = start_fields(looked, listed, began, now, deadline)
            retries = {j: link.retry_of[j] for j in listed if j in link.retry_of}
            op_ids = ledger.begin_operations([(j, op, nonce) for j in listed], began, actor=actor,
                                             baselines=baselines, baseline_at=baseline_at, ends_by=ends_by,
                                             key=link.key, retry_of=retries, baseline_boot=baseline_boot,
                                             admin_reason=admin_reason, baseline_ctl=looked.controller)
    if begun is not None:
        begun.update(zip(listed, op_ids))
    return Started(listed, op_ids, taken)


def record(
    ledger: LedgerStore, finishes: Sequence[Tuple[int, Outcome, bytes]], ids: Sequence[str], owner: str,
    nonce: str, give_back: Callable[[], None], at: Optional[looks.Place] = None, in_charge: Optional[str] = None,
) -> None:
    """The results (``finishes``: history id, outcome, stderr) and the leases of ``ids`` given
    back: ONE transaction, with a look at slurmctld's saves taken first, now that their calls are
    over (``at``: where; none where no call can have changed anything: core.durable Rule 2), and
    which slurmctld was in charge then (``in_charge``: ``after_calls``).  If
    the ledger fails, each outcome is logged (it ran: never lost), the leases are given back if
    the ledger lets (``give_back``), and ``NotRecorded`` carries them all.  Shared by one job and
    a bulk chunk, as ``start`` is."""
    over = ended()  # the calls are over: where and when, on a clock that never steps (§13.7)
    seen = looks.look(at) if at is not None and any(o.result in CHANGED for _, o, _ in finishes) else None
    try:
        with ledger.batch():
            ledger.finish_operations(finishes, ledger.now(), look=None if seen is None else str(seen), ended=over,
                                     controller=in_charge)
            ledger.release_leases(ids, owner)
    except LedgerError as exc:
        # The objects keep their intents (may_be_set for a requeue): nothing is lost for the
        # sweeper.  The outcomes go to the log, and with the error to the caller.
        for _, outcome, _ in finishes:
            log.error("could not record %s (nonce %s) in %s", describe(outcome), nonce, ledger.path)
        give_back()
        first, *more = (outcome for _, outcome, _ in finishes)
        raise NotRecorded(first, exc, more=more) from exc


def after_calls(op: Op, outcomes: Sequence[Outcome], scontrol: str, deadline: float, clock: Clock) -> Optional[str]:
    """Which slurmctld is in charge once a requeue's calls are over (docs/contract.md §12 Rule 16:
    the same one as before its baseline says a crash between could not undo it), read within the
    deadline; None for another op, for calls that never started, or when it cannot be told."""
    if not op.requeues or not any(o.calls for o in outcomes):
        return None
    return controller.in_charge(scontrol, min(controller.TIMEOUT, deadline - clock()))


# The results of calls that may have changed a job: what a look after them is for (core.durable Rule 2).
CHANGED = life.MAY_HAVE_CHANGED


def current_actor() -> str:
    """Who runs this process, as the history records it: ``uid 0 (root) on ctl1, pid 4711``.

    Under sudo, ``, sudo from alice`` follows: sudo's ``SUDO_USER``, taken only when it looks like
    an account name (whoever can set it runs as the uid recorded before it anyway).
    """
    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid with no passwd entry (a container, a removed account)
        name = "?"
    here = this_run()
    actor = f"uid {uid} ({name}) on {here.host}, pid {here.pid}"
    sudo = os.environ.get("SUDO_USER", "")
    if re.fullmatch(r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,63}", sudo):
        actor += f", sudo from {sudo}"
    return actor


def lease_owner(tag: str = "op") -> str:
    """A lease owner unique to this thread of this process on this host, naming its run after
    ``@`` (``host.runs``: while that run is known alive, its leases hold, whatever the clocks)."""
    here = this_run()
    return f"{tag}:{here.host}:{here.pid}:{threading.get_ident()}:{new_nonce()[:8]}@{here}"



class Tracker:
    """Runs operations against one ledger, one connection per thread.

    The ledger, scontrol and squeue are ``path``, ``scontrol`` and ``squeue`` where given, else
    the configuration's (docs/contract.md §8): ``configuration`` if given (the command line
    passes the one it read), else read now as the command line reads it (``config.configure``,
    with these arguments as its flags), so that a library caller uses the ledger every
    ``slurm-dsl`` command and sweep on the host uses.  A bad config file is ``ConfigFileError``,
    an empty argument ``InvalidInput``, before anything is opened.
    ``busy_timeout`` is how long a ledger write waits for another writer before it fails
    (default: ``ledger.base.BUSY_TIMEOUT``, read when each connection opens).
    """

    def __init__(
        self,
        path: Optional[str] = None,
        *,
        scontrol: Optional[str] = None,
        squeue: Optional[str] = None,
        clock: Clock = steady,
        lease_slack: float = LEASE_SLACK,
        busy_timeout: Optional[float] = None,
        configuration: Optional[Configuration] = None,
    ) -> None:
        if configuration is None:
            configuration = configure({"ledger": path, "scontrol": scontrol, "squeue": squeue})
        self.configuration = configuration
        self.path = path if path is not None else configuration.ledger
        self.busy_timeout = busy_timeout
        self.scontrol = scontrol if scontrol is not None else configuration.scontrol
        self.squeue = squeue if squeue is not None else configuration.squeue
        self.clock = clock
        self.lease_slack = lease_slack
        self.actor = current_actor()  # recorded with every operation this tracker runs
        self.admin_reason: Optional[str] = None  # ``--reason``: recorded with every operation it begins (§10.4)
        self.pace = Pace(configuration.rate)  # every call of its operations keeps it (§10.5)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened: List[LedgerStore] = []
        self.ledger()  # open (and create, migrate) now: a bad ledger fails before anything runs

    def place(self) -> looks.Place:
        """Where this tracker's operations look at slurmctld's saves (read once, when first needed)."""
        found: Optional[looks.Place] = getattr(self, "_place", None)
        if found is None:
            found = self._place = looks.place()
        return found

    def audit(self, op: Op, ids: Sequence[str], key: Optional[str]) -> None:
        """The audit line of an operation given a reason (``admin_reason``, docs/contract.md §10.4),
        before any job is acted on: the system log's, and this process's log."""
        from ..host.journal import note

        shown = " ".join(ids[:20]) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
        keyed = f", key {key}" if key is not None else ""
        line = f"{op.value} of {len(ids)} job(s) ({shown}) by {self.actor}{keyed}: reason: {self.admin_reason}"
        log.info("%s", line)
        if not note(line):
            log.warning("the system log (/dev/log) did not take the audit line; the ledger keeps the reason")

    def ledger(self) -> LedgerStore:
        """This thread's connection to the ledger (opened on first use)."""
        ledger: Optional[LedgerStore] = getattr(self._local, "ledger", None)
        if ledger is None:
            busy = base.BUSY_TIMEOUT if self.busy_timeout is None else self.busy_timeout
            ledger = open_ledger(self.path, busy_timeout=busy, clock=world.current().wall)
            self._local.ledger = ledger
            with self._lock:
                self._opened.append(ledger)
        return ledger

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            opened, self._opened = self._opened, []
        for ledger in opened:
            ledger.close()
        self._local = threading.local()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def look_up(self, op: Union[Op, str], job_ids: Sequence[Union[str, int]], deadline: float) -> LookupAnswer:
        """The array check (``arrays.look_up``, with this tracker's squeue, scontrol and clock):
        ``WholeArray`` for an array's own JobId that reaches other tasks, ``LookupFailed`` if it
        could not ask; else what the lookup said of each id, and when it started (the baselines'
        time)."""
        return look_up(op, distinct_ids(job_ids), deadline, squeue=self.squeue, scontrol=self.scontrol,
                       clock=self.clock)

    def run(
        self,
        op: Union[Op, str],
        job_id: Union[str, int],
        deadline: float,
        *,
        owner: Optional[str] = None,
        checked: bool = False,
        actor: Optional[str] = None,
        looked: LookupAnswer = NOT_LOOKED,
        link: Link = NO_LINK,
    ) -> Outcome:
        """``run_linked``, whose ``Taken`` (only under a key) is an ``expired`` outcome saying why
        nothing ran."""
        done = self.run_linked(op, job_id, deadline, owner=owner, checked=checked, actor=actor, looked=looked,
                               link=link)
        if isinstance(done, Taken):
            bit = RequeueBit.CLEAR if Op(op).requeues else None
            return Outcome(Op(op), done.job_id, Result.EXPIRED, bit, None, (), None, f"nothing ran: {done.detail}")
        return done

    def run_linked(
        self,
        op: Union[Op, str],
        job_id: Union[str, int],
        deadline: float,
        *,
        owner: Optional[str] = None,
        checked: bool = False,
        actor: Optional[str] = None,
        looked: LookupAnswer = NOT_LOOKED,
        link: Link = NO_LINK,
        begun: Optional[Begun] = None,
    ) -> Union[Outcome, Taken]:
        """One op on one job, recorded; the lease is ``owner``'s if given (a sweeper's), and the
        history says ``actor`` ran it (default: ``self.actor``, this process), under ``link``'s key
        and as a retry of ``link.retry_of``'s operation for the job, if any.  With a key, the key
        is read again under the lease (``not_to_act``): ``Taken`` if it now says not to act,
        nothing run or written.  ``begun`` gets the job's history id once its intent is committed.

        Unless ``checked`` (the caller ran ``look_up`` for it and passes its answer as
        ``looked``, whose record of the job is committed as the baseline), the id is looked up
        first: ``WholeArray`` or ``LookupFailed`` mean nothing ran.  A deadline more
        than ``deadlines.MAX_TIMEOUT`` away is a ``ValueError``, before anything is recorded.

        A ``LedgerError`` before the script started means nothing ran; once it started, a
        ledger failure is ``NotRecorded``, which carries the outcome.
        """
        op = Op(op)
        job = validate_job_id(job_id)
        deadline = check_deadline(deadline, self.clock)
        if not checked:
            looked = self.look_up(op, checked_already([job]), deadline)  # checked just above
        # Refused here, a bad scontrol path writes nothing; refused by execute, it would leave the
        # intent below unfinished in the history for an operation that never ran.
        scontrol = find_scontrol(self.scontrol)
        ledger = self.ledger()
        owner = owner or lease_owner()
        ttl = lease_ttl(deadline - self.clock(), self.lease_slack)
        nonce = new_nonce()
        while True:
            # The lease and the intent in one transaction: committed before the script starts.  A
            # keyed job's key is read again there; if it now says not to act, the lease is given
            # back in the same transaction and nothing is written.
            started = start(ledger, op, checked_already([job]), owner=owner, ttl=ttl, nonce=nonce, looked=looked,
                            now=self.clock(), deadline=deadline, actor=actor or self.actor, link=link, begun=begun,
                            admin_reason=self.admin_reason)
            if job in started.taken:
                return Taken(job, started.taken[job].detail)
            if started.op_ids:
                op_id = started.op_ids[0]
                break
            if self.clock() >= deadline:
                bit = RequeueBit.CLEAR if op.requeues else None
                return Outcome(op, job, Result.EXPIRED, bit, None, (), None,
                               "another operation or sweeper held the job until the deadline")
            world.sleep(LEASE_POLL)
        try:
            self.pace.take(calls_of(op), deadline)  # past the deadline, the script starts no call: expired
            outcome = execute(op, job, deadline, scontrol=scontrol, nonce=nonce, clock=self.clock)
        except BaseException:
            self._give_back(ledger, job, owner)
            raise
        # The result and the lease given back in one transaction.
        record(ledger, [(op_id, outcome, b"".join(c.stderr for c in outcome.calls))], [job], owner, nonce,
               lambda: self._give_back(ledger, job, owner), self.place(),
               after_calls(op, [outcome], scontrol, deadline, self.clock))
        return outcome

    @staticmethod
    def _give_back(ledger: LedgerStore, job: str, owner: str) -> None:
        """Release the lease if the ledger lets us; never in place of the outcome or of the error
        already on its way: the lease lapses by itself (until then the job's next operation waits,
        or expires)."""
        try:
            ledger.release_lease(job, owner)
        except LedgerError as exc:
            log.warning("could not give back the lease on job %s (it lapses by itself): %s", job, exc)
