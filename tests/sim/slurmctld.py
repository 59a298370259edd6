"""A simulated slurmctld, written from the measured ground truth and apart from slurm-dsl's code.

What it follows (docs/slurm-behaviour.md, docs/slurm-24.11-26.05.md, docs/durability.md and the
source lines they cite): job records (state, reason, priority, Requeue flag, RestartCnt, arrays by
their tasks' own JobIds and the array's own id); the exit status and stderr scontrol prints for
hold, release, uhold, update Requeue=, requeue and requeuehold, for root and for other accounts;
replies before saves; a save thread that begins a save only when asked and when ``difftime`` of
its own wall clock's whole seconds since the last save is at least 5, packs the jobs as they are
when it begins and links the file a little later; the periodic checkpoint; purges of finished jobs
after MinJobAge, saved late like any change; a SIGKILL back to the last linked file, a SIGTERM that
saves first; a primary/backup pair sharing one StateSaveLocation, the backup taking over a few
seconds after the primary dies, and a 24.11 hand-back during which requests wait on the restarted
primary's socket, their clients fail after MessageTimeout, and they are applied when it takes
control.  Its own tests (tests/sim/test_slurmctld.py) pin each to the ground truth.

Sans-IO and deterministic: every call takes the simulated time ``t`` (seconds, never going back);
a controller's own wall clock is ``t`` plus its offset, which a test may step.  Nothing here reads
a real clock, a file or a process.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

SAVE_MAX_WAIT = 5  # state_save.c: at most one save per 5 s of whole-second wall time
PERIODIC_CHECKPOINT = 300.0  # slurmctld.h: every 300 s all state is scheduled for saving
PURGE_INTERVAL = 60.0  # how often finished jobs older than MinJobAge are purged
CONTROL_TIMEOUT = 30.0  # slurmctld.h: how long a hand-back may hold requests
WAKE = 0.0002  # the save thread wakes this long after a cold schedule_job_save (docs/durability.md: < 1 ms)
# A control call's client takes CALL seconds; its request is applied REPLY before it exits (the
# process's start is most of it), so a cold save can link just after the client's exit (d=0: lost 3 of 5).
CALL, REPLY = 0.003, 0.0005
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY")
ROOT = 0

INVALID = "Invalid job id specified"
FINISHED_TEXT = "Job has already finished"
DISABLED = "Requested operation is presently disabled"
PENDING_EXECUTION = "Job is pending execution"
INVALID_USER = "Invalid user id"
DENIED = "Access/permission denied"
UNEXPECTED = "Unexpected message received"
NO_CONTACT = "Unable to contact slurm controller (connect failure)"
TIMED_OUT = "Socket timed out on send/recv operation"
NO_ERROR = "No error"


@dataclass
class Job:
    """One job record as slurmctld holds it."""

    job_id: str
    user: int = ROOT
    state: str = "PENDING"
    reason: str = "None"
    priority: int = 1
    requeue: int = 0
    restarts: int = 0
    ended_wall: Optional[float] = None  # the controller's wall clock when it finished (MinJobAge counts from it)
    array: Optional[Tuple[str, int]] = None  # (ArrayJobId, TaskId) of an array task
    requeue_by: str = "submit"  # who last changed the Requeue flag (not slurmctld's: the checker's)
    requeued_by: Tuple[str, ...] = ()  # whose requeues this record holds, in order (the checker's too)
    eligible_at: Optional[float] = None  # a requeued job starts again then (EligibleTime: +120 s, §5)

    def copy(self) -> Job:
        return dataclasses.replace(self)


@dataclass(frozen=True)
class StateFile:
    """One save of the jobs as linked at <StateSaveLocation>/job_state: what a stat shows, the
    header's time (the saver's wall clock when it began, whole seconds) and the jobs it holds."""

    inode: int
    mtime: float  # the saver's wall clock when it was linked
    size: int
    began: int
    jobs: Tuple[Job, ...]


@dataclass
class Disk:
    """A StateSaveLocation: the linked job_state and heartbeat, shared by a pair."""

    job_state: Optional[StateFile] = None
    heartbeat: Optional[Tuple[int, int]] = None  # (writer's wall clock, its index among SlurmctldHost)
    heartbeat_inode: int = 0
    inodes: int = 100

    def new_inode(self) -> int:
        self.inodes += 1
        return self.inodes


@dataclass(frozen=True)
class Reply:
    """What one scontrol call does: its exit status and stderr (stdout is always empty for the
    control calls), when its client gets them, and when its request was applied (None: never;
    later than ``ends``: a request applied after its client gave up)."""

    rc: int
    stderr: str
    ends: float
    applied: Optional[float]


@dataclass
class Controller:
    """One slurmctld: its jobs in memory, its save thread and its clock."""

    name: str
    disk: Disk
    index: int = 0
    major: str = "22.05"
    pack: float = 0.0005  # seconds from a save's begin to its link (a few jobs)
    offset: float = 0.0  # its wall clock minus the simulated time
    up: bool = False
    in_control: bool = False
    jobs: Dict[str, Job] = field(default_factory=dict)
    save_count: int = 0
    last_save: Optional[int] = None  # whole seconds of its wall clock when the last save began
    packing: Optional[Tuple[float, StateFile]] = None  # (link time, the file) of a save under way
    wake_at: Optional[float] = None  # when the save thread looks next after a cold schedule
    next_checkpoint: float = math.inf
    next_purge: float = math.inf
    next_beat: float = math.inf
    beat_every: float = 1.25  # MIN(SlurmctldTimeout/4, 30) with the pair's SlurmctldTimeout=5
    min_job_age: float = 300.0
    now: float = 0.0
    booted: int = 0  # whole seconds of its wall clock when its process started: ``show config``'s BOOT_TIME

    def wall(self, t: float) -> float:
        return t + self.offset

    # -- the save thread ----------------------------------------------------------------------

    def _due(self, t: float) -> Optional[float]:
        """When the save thread begins its next save, looking from ``t``: at a wake after a
        ``schedule_job_save``, or at a whole second of its wall clock, the first of them where it
        has changes to save and 5 whole seconds have passed since the last save began."""
        if not self.save_count or self.packing is not None:
            return None
        tick = math.ceil(self.wall(t) - 1e-9)
        if self.last_save is not None:
            tick = max(tick, self.last_save + SAVE_MAX_WAIT)
        due = tick - self.offset
        wake = self.wake_at
        if wake is not None and wake >= t and (self.last_save is None or
                                               self.wall(wake) >= self.last_save + SAVE_MAX_WAIT - 1e-9):
            due = min(due, wake)
        return due

    def advance(self, t: float) -> None:
        """Everything the controller does by itself up to ``t``: links, saves, checkpoints, purges."""
        t = max(t, self.now)  # a caller's "now" that another call already passed is that call's end
        while self.up and self.in_control:
            events = [e for e in (self._link_at(), self._due(self.now), self.next_checkpoint, self.next_purge,
                                  self.next_beat, self._next_start()) if e is not None and e <= t]
            if not events:
                break
            at = max(min(events), self.now)
            self.now = at
            if self.packing is not None and self.packing[0] <= at:
                self._link()
            elif self.next_checkpoint <= at:
                self.next_checkpoint = at + PERIODIC_CHECKPOINT
                self.schedule_save(at)
            elif self.next_purge <= at:
                self.next_purge = at + PURGE_INTERVAL
                self._purge(at)
            elif self.next_beat <= at:
                self.beat(at)
            elif (self._next_start() or math.inf) <= at:
                self._start_jobs(at)
            else:
                self._begin_save(at)
        self.now = t

    def _next_start(self) -> Optional[float]:
        """When the scheduler next starts a requeued job (its EligibleTime), if any waits."""
        times = [j.eligible_at for j in self.jobs.values()
                 if j.eligible_at is not None and j.state == "PENDING" and j.priority > 0]
        return min(times) if times else None

    def _start_jobs(self, t: float) -> None:
        for job in self.jobs.values():
            if job.eligible_at is not None and job.eligible_at <= t and job.state == "PENDING" and job.priority > 0:
                job.state, job.reason, job.eligible_at = "RUNNING", "None", None
        self.schedule_save(t)

    def _link_at(self) -> Optional[float]:
        return None if self.packing is None else self.packing[0]

    def schedule_save(self, t: float) -> None:
        """``schedule_job_save()``: count the change and wake the thread."""
        self.save_count += 1
        if self.wake_at is None or self.wake_at < t:
            self.wake_at = t + WAKE

    def _begin_save(self, t: float) -> None:
        self.save_count, self.wake_at = 0, None
        self.last_save = math.floor(self.wall(t) + 1e-9)
        jobs = tuple(j.copy() for j in self.jobs.values())
        self.packing = (t + self.pack, StateFile(0, 0.0, 64 + 32 * len(jobs), self.last_save, jobs))

    def _link(self) -> None:
        assert self.packing is not None
        at, made = self.packing
        self.packing = None
        self.disk.job_state = dataclasses.replace(made, inode=self.disk.new_inode(), mtime=self.wall(at))

    def save_now(self, t: float) -> None:
        """A graceful stop's ``save_all_state``: whatever is in memory is linked before it exits."""
        self.last_save = math.floor(self.wall(t))
        jobs = tuple(j.copy() for j in self.jobs.values())
        made = StateFile(self.disk.new_inode(), self.wall(t), 64 + 32 * len(jobs), self.last_save, jobs)
        self.disk.job_state, self.packing, self.save_count, self.wake_at = made, None, 0, None

    def _purge(self, t: float) -> None:
        wall, gone = self.wall(t), []
        for job_id, job in self.jobs.items():
            if job.state in FINISHED and job.ended_wall is not None and wall - job.ended_wall >= self.min_job_age:
                gone.append(job_id)
        for job_id in gone:
            del self.jobs[job_id]
        if gone:
            self.schedule_save(t)

    # -- life ---------------------------------------------------------------------------------

    def start(self, t: float) -> None:
        """Start (standing by): nothing in memory survives a kill."""
        self.now = max(self.now, t)
        self.booted = math.floor(self.wall(t) + 1e-9)
        self.up, self.in_control, self.jobs = True, False, {}
        self.save_count, self.last_save, self.packing, self.wake_at = 0, None, None, None

    def take_control(self, t: float) -> None:
        """Take control: read every job from the last linked job_state, write the heartbeat."""
        self.now = max(self.now, t)
        saved = self.disk.job_state
        self.jobs = {} if saved is None else {j.job_id: j.copy() for j in saved.jobs}
        self.in_control = True
        self.next_checkpoint, self.next_purge = t + PERIODIC_CHECKPOINT, t + PURGE_INTERVAL
        self.beat(t)

    def beat(self, t: float) -> None:
        """Write <StateSaveLocation>/heartbeat: its wall clock and its index, a new file."""
        self.disk.heartbeat = (math.floor(self.wall(t) + 1e-9), self.index)
        self.disk.heartbeat_inode = self.disk.new_inode()
        self.next_beat = t + self.beat_every

    def kill(self, t: float) -> None:
        """SIGKILL: what was not linked is gone."""
        self.advance(t)
        self.up = self.in_control = False
        self.packing, self.wake_at = None, None

    def terminate(self, t: float) -> None:
        """SIGTERM: saves all state, then exits."""
        self.advance(t)
        self.save_now(self.now)
        self.up = self.in_control = False


def _ranges(tasks: Sequence[int], brackets: bool) -> str:
    """Task ids folded as scontrol prints them: ``1-3,5`` (26.05: ``[1-3,5]``)."""
    runs: List[List[int]] = []
    for task in sorted(tasks):
        if runs and task == runs[-1][1] + 1:
            runs[-1][1] = task
        else:
            runs.append([task, task])
    text = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return f"[{text}]" if brackets else text


class Cluster:
    """One controller, or a primary/backup pair, and the scontrol calls clients make to it.

    ``call(t, argv, uid)`` answers as scontrol would: ``argv`` is scontrol's arguments (``["hold",
    "12"]``, ``["update", "JobId=12", "Requeue=0"]``, ``["requeue", "12"]``).  ``jobs(t, ids)`` is a
    load (squeue, scontrol show job): the records, or None when no controller answers.
    """

    def __init__(self, *, pair: bool = False, major: str = "22.05", message_timeout: float = 10.0,
                 slurmctld_timeout: float = 5.0, takeover: float = 7.5, hand_back: Optional[float] = None,
                 min_job_age: float = 300.0) -> None:
        self.disk = Disk()
        self.major, self.message_timeout, self.slurmctld_timeout = major, message_timeout, slurmctld_timeout
        self.controllers = [Controller("ctl-a", self.disk, 0, major, min_job_age=min_job_age)]
        if pair:
            self.controllers.append(Controller("ctl-b", self.disk, 1, major, min_job_age=min_job_age))
        self.takeover = takeover  # seconds from the primary's death to the backup in control
        # 24.11: a restarted primary takes control ~28.5 s after it starts; 22.05 at once.
        self.hand_back = (28.5 if major != "22.05" else 0.12) if hand_back is None else hand_back
        self.pending: List[Tuple[float, str]] = []  # (when, what): takeovers and hand-backs to come
        self.held: List[Tuple[float, List[str], int, str]] = []  # requests waiting on a restarted primary's socket
        # A request's handler waits this long for the job write lock on a busy controller (the
        # bulk loops of settle-delay.md §2: 50 ms), while lookups are answered meanwhile.
        self.lock_wait = 0.0
        self.late: Dict[int, Tuple[List[str], int, str]] = {}  # sent, its client dead: applied when due
        self.sent = 0
        self._who = "admin"  # who sends the request being applied
        # Each request on each record, as applied: (when, who, verb, job, Requeue value, answer: None done).
        self.effects: List[Tuple[float, str, str, str, Optional[str], Optional[str]]] = []
        self.next_id = 1000
        self.t = 0.0
        self.applied: List[Tuple[float, str, Tuple[str, ...], int]] = []  # (when, by whom, argv, uid)

    # -- the daemons ----------------------------------------------------------------------------

    @property
    def primary(self) -> Controller:
        return self.controllers[0]

    def in_control(self) -> Optional[Controller]:
        return next((c for c in self.controllers if c.up and c.in_control), None)

    def advance(self, t: float) -> None:
        t = max(t, self.t)
        while True:
            due = sorted(p for p in self.pending if p[0] <= t)
            if not due:
                break
            at, what = due[0]
            self.pending.remove(due[0])
            for c in self.controllers:
                c.advance(at)
            self._happen(at, what)
        for c in self.controllers:
            c.advance(t)
        self.t = t

    def _happen(self, at: float, what: str) -> None:
        backup = self.controllers[-1]
        if what.startswith("late:"):
            argv, uid, who = self.late.pop(int(what.partition(":")[2]))
            c = self.in_control()
            if c is not None:  # (a controller killed meanwhile never got it)
                self._apply(c, at, argv, uid, who)
        elif what.startswith("restart:"):
            which = int(what.partition(":")[2])
            if not self.controllers[which].up:
                self._start(at, which)
        elif what == "takeover" and backup.up and not self.primary.in_control:
            backup.take_control(at)  # it re-reads all state from StateSaveLocation
        elif what == "hand_back" and self.primary.up and not self.primary.in_control:
            if backup.in_control:
                backup.terminate(at)  # it relinquishes: saves all, then stands by
                backup.start(at)
            self.primary.take_control(at)
            held, self.held = self.held, []
            for _, argv, uid, who in held:  # what waited on its socket, in order
                self._apply(self.primary, at, argv, uid, who)

    def start(self, t: float, which: int = 0) -> None:
        """Start controller ``which``: a lone one, or a primary, takes control at once; a backup
        stands by; a primary restarted while the backup is in control takes control back
        ``hand_back`` seconds later, holding the requests sent to it meanwhile."""
        self.advance(t)
        self._start(self.t, which)

    def restart_at(self, t: float, which: int = 0) -> None:
        """Start controller ``which`` again at ``t`` (systemd's ``Restart=``, an admin), as ``start``."""
        self.pending.append((t, f"restart:{which}"))

    def _start(self, t: float, which: int) -> None:
        c = self.controllers[which]
        c.start(t)
        if which == 0 and len(self.controllers) > 1 and self.controllers[1].in_control:
            self.pending.append((t + self.hand_back, "hand_back"))
        elif which == 0 or not self.primary.up:
            c.take_control(t)

    def kill(self, t: float, which: int = 0) -> None:
        self.advance(t)
        t = self.t
        c = self.controllers[which]
        was = c.in_control
        c.kill(t)
        if was and len(self.controllers) > 1 and which == 0 and self.controllers[1].up:
            self.pending.append((t + self.takeover, "takeover"))

    def terminate(self, t: float, which: int = 0) -> None:
        self.advance(t)
        t = self.t
        self.controllers[which].terminate(t)

    def step_clock(self, t: float, seconds: float, which: int = 0) -> None:
        """Step a controller's wall clock (an NTP step, ``date -s``) by ``seconds``."""
        self.advance(t)
        t = self.t
        self.controllers[which].offset += seconds

    # -- jobs the world makes -------------------------------------------------------------------

    def submit(self, t: float, *, user: int = ROOT, state: str = "RUNNING", requeue: int = 0, held: bool = False,
               tasks: int = 0) -> str:
        """A new job (or array of ``tasks`` tasks), as sbatch would leave it; returns its id."""
        self.advance(t)
        t = self.t
        c = self._must_control()
        job_id = str(self.next_id)
        self.next_id += 1 + tasks
        requeue = 1 if requeue else 0
        made = [Job(job_id, user, state, requeue=requeue)]
        if tasks:  # the tasks' own JobIds follow the array's, whose first task carries it
            made = [Job(str(int(job_id) + i), user, state, requeue=requeue, array=(job_id, i + 1))
                    for i in range(tasks)]
        for job in made:
            if held:
                job.state, job.reason, job.priority = "PENDING", "JobHeldUser", 0
            c.jobs[job.job_id] = job
        c.schedule_save(t)
        return job_id

    def finish(self, t: float, job_id: str, state: str = "COMPLETED") -> None:
        """The job ends by itself (its script exits, or it is cancelled)."""
        self.advance(t)
        t = self.t
        c = self._must_control()
        job = c.jobs[job_id]
        job.state, job.reason, job.ended_wall = state, "None" if state == "COMPLETED" else "NonZeroExitCode", c.wall(t)
        c.schedule_save(t)

    def _must_control(self) -> Controller:
        c = self.in_control()
        if c is None:
            raise RuntimeError("no controller is in control")
        return c

    # -- clients ----------------------------------------------------------------------------------

    def jobs(self, t: float, ids: Optional[Iterable[str]] = None) -> Optional[Dict[str, Job]]:
        """A load (squeue, show job): copies of the records asked for that slurmctld knows (all
        without ``ids``); None when no controller answers."""
        self.advance(t)
        t = self.t
        c = self.in_control()
        if c is None:
            return None
        wanted = c.jobs.keys() if ids is None else [i for i in ids if i in c.jobs]
        return {i: c.jobs[i].copy() for i in wanted}

    def load_fails(self) -> Tuple[float, str]:
        """How long a load takes to fail with no controller, and what it prints (§6, D4)."""
        mt = self.message_timeout
        took = 2 * mt if self.major == "26.05" else 2 * (mt - 1)
        return took, f"slurm_load_jobs error: {NO_CONTACT}\n"

    def call(self, t: float, argv: Sequence[str], uid: int = ROOT, who: str = "admin",
             gives_up: Optional[float] = None) -> Reply:
        """One scontrol control call made at ``t`` (or when the last call ended, if later), by
        ``who`` (kept with the flag it changes, for the checker).  ``gives_up``: when its client is
        TERMed; a request still waiting for the lock then is applied later all the same."""
        self.advance(t)
        t = self.t
        mt = self.message_timeout
        fail_after = mt if self.major == "26.05" else mt - 1
        bad = self._client_error(argv)
        if bad is not None:
            return Reply(1, bad, t + 0.001, applied=None)
        if self.primary.up and not self.primary.in_control:  # a hand-back: it listens, and holds the request
            self.held.append((t, list(argv), uid, who))
            return Reply(1, self._format_down(argv), t + fail_after, applied=None)
        c = self.in_control()
        if c is not None:
            at = t + self.lock_wait + CALL - REPLY
            if gives_up is not None and at > gives_up:
                self.send_and_die(t, argv, uid, who)
                return Reply(1, "", at + REPLY, applied=at)
            self.advance(at)
            return Reply(*self._apply(c, at, list(argv), uid, who), ends=at + REPLY, applied=at)
        coming = sorted(p for p in self.pending if (p[1] == "takeover" and p[0] <= t + 1.5 * self.slurmctld_timeout)
                        or (p[1].startswith("restart:") and p[0] < t + fail_after))
        if coming:
            # the client retries the standby backup until it takes over, a restarting controller
            # until it listens (within its own time: it fails after MessageTimeout)
            at = coming[0][0]
            self.advance(at)
            c = self.in_control()
            if c is not None:  # (a backup killed meanwhile never takes over: the client fails)
                return Reply(*self._apply(c, at, list(argv), uid, who), ends=at + REPLY, applied=at)
        return Reply(1, self._format_down(argv), t + fail_after, applied=None)

    def send_and_die(self, t: float, argv: Sequence[str], uid: int = ROOT, who: str = "admin") -> None:
        """A call whose client dies at ``t``, its request already on its way: slurmctld still
        applies it once its handler gets the job lock (settle-delay.md §2: "killed, yet present"),
        after the client's death, a lookup meanwhile seeing the record unchanged."""
        self.advance(t)
        if self._client_error(argv) is not None or self.in_control() is None:
            return
        number = self.sent = self.sent + 1
        self.late[number] = (list(argv), uid, who)
        self.pending.append((t + self.lock_wait + CALL - REPLY, f"late:{number}"))

    @staticmethod
    def _client_error(argv: Sequence[str]) -> Optional[str]:
        """What scontrol refuses before any RPC (docs/slurm-behaviour.md §2 notes)."""
        if len(argv) < 2:
            return f"too few arguments for keyword:{argv[0] if argv else ''}\n"
        for arg in argv[1:]:
            key, _, value = arg.partition("=")
            if key.lower() == "requeue" and not (value.isdigit() and value):
                return f"scontrol: error: Invalid Requeue value: {value}\n"
        return None

    def _format_down(self, argv: Sequence[str]) -> str:
        job = self._target(argv)
        if argv[0] in ("hold", "release", "uhold"):
            return self._suspend(UNEXPECTED, job)
        return f"{UNEXPECTED} for job {job}\n"

    @staticmethod
    def _target(argv: Sequence[str]) -> str:
        if argv[0] == "update":
            return next(a.split("=", 1)[1] for a in argv[1:] if a.lower().startswith("jobid="))
        return argv[1]

    def _suspend(self, text: str, job: str) -> str:
        sep = "" if self.major == "26.05" else " "
        return f"{text} for job {job}\nslurm_suspend error:{sep}{text}\n"

    def _apply(self, c: Controller, t: float, argv: List[str], uid: int, who: str = "admin") -> Tuple[int, str]:
        """Apply one request on controller ``c`` at ``t``: (exit status, stderr).  Replies first,
        then schedules the save (the changes are in memory at once).  A list of ids is one
        request per id, in order, each failing one printing its own lines (docs/slurm-bulk.md)."""
        self.applied.append((t, c.name, tuple(argv), uid))
        self._who = who
        verb = argv[0]
        value = next((a.split("=", 1)[1] for a in argv[1:] if a.lower().startswith("requeue=")), None)
        answers = [self._apply_one(c, t, verb, value, uid, i) for i in self._target(argv).split(",") if i]
        return max(rc for rc, _ in answers), "".join(text for _, text in answers)

    def _apply_one(self, c: Controller, t: float, verb: str, value: Optional[str], uid: int,
                   target: str) -> Tuple[int, str]:
        if "_" in target:  # an array task addressed as A_T: the array format
            base, _, task = target.partition("_")
            members = [j for j in c.jobs.values() if j.array is not None and j.array[0] == base
                       and j.array[1] == int(task)]
            return self._array(c, t, verb, value, uid, base, members, [int(task)])
        members = [j for j in c.jobs.values() if j.array is not None and j.array[0] == target]
        if members:  # the array's own JobId reaches every task
            return self._array(c, t, verb, value, uid, target, members, [m.array[1] for m in members if m.array])
        job = c.jobs.get(target)
        if job is None:  # kept too: a call that found its job gone (a requeue's call 3 then cleared)
            self.effects.append((t, self._who, verb, target, value, INVALID))
        text = INVALID if job is None else self._one(c, t, verb, value, uid, job)
        if text is None:
            return 0, ""
        if verb in ("hold", "release", "uhold"):
            return 1, self._suspend(text, target)
        return 1, f"{text} for job {target}\n"

    def _array(self, c: Controller, t: float, verb: str, value: Optional[str], uid: int, base: str,
               members: List[Job], asked: List[int]) -> Tuple[int, str]:
        brackets = self.major == "26.05"
        if not members:
            return 1, f"{base}_{_ranges(asked, brackets)}: {INVALID}\n"
        groups: Dict[str, List[int]] = {}
        for job in members:
            assert job.array is not None
            groups.setdefault(self._one(c, t, verb, value, uid, job) or NO_ERROR, []).append(job.array[1])
        if set(groups) == {NO_ERROR}:
            return 0, ""
        lines = sorted((min(tasks), f"{base}_{_ranges(tasks, brackets)}: {text}\n") for text, tasks in groups.items())
        return 1, "".join(line for _, line in lines)

    def _one(self, c: Controller, t: float, verb: str, value: Optional[str], uid: int, job: Job) -> Optional[str]:
        """One record's answer (None: done), changing it as slurmctld does; kept in ``effects``."""
        answer = self._answer(c, t, verb, value, uid, job)
        self.effects.append((t, self._who, verb, job.job_id, value, answer))
        return answer

    def _answer(self, c: Controller, t: float, verb: str, value: Optional[str], uid: int, job: Job) -> Optional[str]:
        owner = uid in (ROOT, job.user)
        finished = job.state in FINISHED
        if verb in ("hold", "release", "uhold", "update"):
            if not owner:
                return INVALID_USER
            if finished:
                return FINISHED_TEXT
            if verb == "update":
                job.requeue = 0 if value is None or int(value) == 0 else 1
                job.requeue_by = self._who
            elif verb == "release":
                if job.reason == "JobHeldAdmin" and uid != ROOT:
                    return DENIED
                if job.priority == 0:
                    job.priority, job.reason = 1, "None"  # the scheduler may start it later
            else:
                admin = verb == "hold" and uid == ROOT
                if verb == "uhold" and job.reason == "JobHeldAdmin" and uid != ROOT:
                    return None  # a user's uhold of a job root held: accepted, no change
                job.priority, job.reason = 0, "JobHeldAdmin" if admin else "JobHeldUser"
            c.schedule_save(t)
            return None
        # requeue, requeuehold: the flag is checked before the state
        if not owner:
            return DENIED
        if not job.requeue:
            return DISABLED
        if job.state == "PENDING":
            return PENDING_EXECUTION
        job.restarts += 1
        job.requeued_by += (self._who,)
        job.state, job.ended_wall = "PENDING", None
        if verb == "requeuehold":
            job.reason, job.priority = "job_requeued_in_held_state", 0
        else:
            job.reason = "BeginTime"
        job.eligible_at = t + 120.0  # the scheduler starts it again then (docs/slurm-behaviour.md §5)
        c.schedule_save(t)
        return None


def saved_jobs(disk: Disk) -> Mapping[str, Job]:
    """The records of the last linked job_state (what a restart would read)."""
    return {} if disk.job_state is None else {j.job_id: j for j in disk.job_state.jobs}


