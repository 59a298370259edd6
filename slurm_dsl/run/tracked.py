"""Operations recorded in the ledger: lease, intent first, run, record (docs/contract.md §9.2, §9.4, §12).

The lease and the intent (with the baseline) are committed *before* the script starts; once it
started, its outcome is never lost (``NotRecorded`` carries it).  A ledger connection is for one
thread, so a ``Tracker`` opens one per thread; every time written to the ledger is the ledger's own.
"""

from __future__ import annotations

import logging
import os
import pwd
import re
import threading
from types import MappingProxyType
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union, overload

from ..core import life
from ..core.jobid import JobIds, checked_already, distinct_ids, validate_job_id
from ..core.jobinfo import JobInfo
from ..core.keys import Decision, Earlier, Step, decide, took_effect
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
    """The ttl of a lease taken ``left`` seconds before its runs' deadline: it never lapses while a call
    may still run (``host.process.backstop``), and ``slack`` more for the ledger writes around them."""
    return max(left, 0.0) + KILL_GRACE + GUARD_MARGIN + slack


def ends_after(left: float) -> float:
    """Seconds from now by which every process of an operation ``left`` seconds from its deadline is dead."""
    return max(left, 0.0) + KILL_GRACE + GUARD_MARGIN


class Link(NamedTuple):
    """An operation's idempotency key (None: none) and, per job, the first operation it retries (a job not
    in ``retry_of``: a first run).  The key is checked already (``core.keys.check_key``, by ``run.keyed``)."""

    key: Optional[str] = None
    retry_of: Mapping[str, int] = MappingProxyType({})


NO_LINK = Link()

# The history id of each job's operation a run began, filled in as it begins them, for a caller
# that reads those rows back (``run.keyed``): never looked for again by actor and time.
Begun = Dict[str, int]


class Taken(NamedTuple):
    """A keyed job whose key, read again under its lease, says not to act (docs/contract.md §12): nothing
    ran or was written; the caller looks back again.  ``detail``: ``decide``'s words."""

    job_id: str
    detail: str


def earlier(
    op: Op, entry: HistoryEntry, *, running: bool = False, verdict: Optional[Verdict] = None, settled: bool = False
) -> Earlier:
    """One earlier keyed operation as ``core.keys.decide`` reads it: its verdict ``verdict`` if ``settled``
    just now, else the ledger's.  An acknowledged one since lost counts as unknown (docs/contract.md §13.4)."""
    calls = tuple(CallOutcome(c.outcome) for c in entry.calls)
    found = verdict if settled else (entry.settlement.verdict if entry.settlement else None)
    effect = took_effect(op, entry.result, calls)
    if effect is True and (found in (Verdict.ABSENT, Verdict.GONE) or (settled and found is None)):
        effect = None
    return Earlier(entry.id, entry.result, effect, found, running)


def not_to_act(ledger: LedgerStore, op: Op, job_ids: Sequence[str], key: Optional[str]) -> Dict[str, Decision]:
    """The jobs of ``job_ids`` whose key, read again now, says not to act, with why; call it in the
    transaction that holds their leases and commits their intents (docs/contract.md §12).  Under the
    lease no earlier operation still runs, so none is ``running``."""
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
    """The baselines of ``ids`` (those found), ``baseline_at`` and ``ends_by`` on the ledger's clock
    (``ledger_now`` is ``now`` on the tracker's: each time carried over as its distance from now), and
    ``baseline_boot``, the lookup's start on this host's boot clock."""
    baselines = {j: info for j in ids if (info := looked.infos.get(j)) is not None}
    baseline_at = None if looked.started is None or not baselines else ledger_now - (now - looked.started)
    return baselines, baseline_at, ledger_now + ends_after(deadline - now), looked.at_boot if baselines else None


class Started(NamedTuple):
    """What ``start`` committed: the jobs begun, in order, with their history ids, and those ``taken``
    (``not_to_act``: leases given back, nothing written)."""

    listed: JobIds
    op_ids: List[int]
    taken: Dict[str, Decision]


def start(
    ledger: LedgerStore, op: Op, ids: JobIds, *, owner: str, ttl: float, nonce: str, looked: LookupAnswer,
    now: float, deadline: float, actor: str, link: Link, begun: Optional[Begun] = None,
    admin_reason: Optional[str] = None,
) -> Started:
    """The leases and the intents of ``ids``: ONE committed transaction, before any script starts
    (docs/contract.md §9.2); ``now`` is the tracker's clock.  A job another holds is in neither list
    of the result.  ``begun`` gets each job's history id."""
    # run.settling (and the ledger's records with it) loads here, after the first Slurm call: the
    # array check's squeue starts without waiting for it (docs/benchmarks.md §7).
    from .settling import alive_before

    ledger.lock_run(str(this_run()))  # other hosts can tell this run alive while it is (§13.7)
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
    nonce: str, give_back: Callable[[], None], at: Optional[looks.Place] = None, in_control: Optional[str] = None,
) -> None:
    """The results (``finishes``: history id, outcome, stderr) and the leases of ``ids`` given back, in
    ONE transaction, after a look at the saves (``at``: where).  If the ledger fails, the outcomes
    are logged, ``give_back`` called, and ``NotRecorded`` raised carrying them all."""
    over = ended()  # the calls are over: where and when, on a clock that never steps (§13.7)
    seen = looks.look(at) if at is not None and any(o.result in CHANGED for _, o, _ in finishes) else None
    try:
        with ledger.batch():
            ledger.finish_operations(finishes, ledger.now(), look=None if seen is None else str(seen), ended=over,
                                     controller=in_control)
            ledger.release_leases(ids, owner)
    except LedgerError as exc:
        # The objects keep their intents (may_be_set for a requeue): nothing is lost for the
        # sweep.  The outcomes go to the log, and with the error to the caller.
        for _, outcome, _ in finishes:
            log.error("could not record %s (nonce %s) in %s", describe(outcome), nonce, ledger.path)
        give_back()
        first, *more = (outcome for _, outcome, _ in finishes)
        raise NotRecorded(first, exc, more=more) from exc


def after_calls(op: Op, outcomes: Sequence[Outcome], scontrol: str, deadline: float, clock: Clock) -> Optional[str]:
    """Which slurmctld is in control once a requeue's calls are over (Rule 16), read within the deadline;
    None for another op, for calls that never started, or when it cannot be told."""
    if not op.requeues or not any(o.calls for o in outcomes):
        return None
    return controller.in_control(scontrol, min(controller.TIMEOUT, deadline - clock()))


# The results of calls that may have changed a job: what a look after them is for (core.durable Rule 2).
CHANGED = life.MAY_HAVE_CHANGED


def current_actor() -> str:
    """Who runs this process, as the history records it: ``uid 0 (root) on ctl1, pid 4711``, then
    ``, sudo from alice`` if ``SUDO_USER`` looks like an account name (unchecked: the uid is what counts)."""
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
    """A lease owner unique to this thread, naming its run after ``@`` (``host.runs``)."""
    here = this_run()
    return f"{tag}:{here.host}:{here.pid}:{threading.get_ident()}:{new_nonce()[:8]}@{here}"



class Tracker:
    """Runs operations against one ledger, one connection per thread.

    ``path``, ``scontrol``, ``squeue`` default to ``configuration``'s, else to the config read now
    (``config.configure``: ``ConfigFileError``, ``InvalidInput``).  ``busy_timeout``: seconds a ledger
    write waits for another writer (default ``ledger.base.BUSY_TIMEOUT``)."""

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
        """Write the audit line of an operation given ``admin_reason`` (docs/contract.md §10.4)."""
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
        """The array check and the baselines' lookup (``arrays.look_up``): ``WholeArray``, ``LookupFailed``."""
        return look_up(op, distinct_ids(job_ids), deadline, squeue=self.squeue, scontrol=self.scontrol,
                       clock=self.clock)

    @overload
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
        link: None = None,
        begun: Optional[Begun] = None,
    ) -> Outcome: ...

    @overload
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
        link: Link,
        begun: Optional[Begun] = None,
    ) -> Union[Outcome, Taken]: ...

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
        link: Optional[Link] = None,
        begun: Optional[Begun] = None,
    ) -> Union[Outcome, Taken]:
        """One op on one job, recorded; with a key (``link``), ``Taken`` if it, read under the lease, says not to act.

        ``checked``: ``looked`` is the caller's ``look_up`` answer, else the id is looked up here
        (``WholeArray``, ``LookupFailed``: nothing ran).  A deadline past ``deadlines.MAX_TIMEOUT`` is a
        ``ValueError``; a ``LedgerError`` means nothing ran; once the script started, ``NotRecorded``."""
        op = Op(op)
        job = validate_job_id(job_id)
        deadline = check_deadline(deadline, self.clock)
        link = NO_LINK if link is None else link
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
                               "another operation or sweep held the job until the deadline")
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
        """Release the lease if the ledger lets us (a ``LedgerError`` is logged): else it lapses by itself."""
        try:
            ledger.release_lease(job, owner)
        except LedgerError as exc:
            log.warning("could not give back the lease on job %s (it lapses by itself): %s", job, exc)
