"""Seeded schedules of slurm-dsl's own commands in the simulated world, and the checker that reads
them (issue 42 items 3-4; docs/testing.md §7).

A schedule is a list of steps drawn from one seed: slurm-dsl's operations (one job, a bulk run,
a keyed run with settling), sweeps, other admins acting on the same jobs, jobs finishing and
arriving, time passing, and faults (slurmctld SIGKILLed and restarted, stopped gracefully, its
wall clock stepped either way, this host's wall clock stepped).  ``play`` runs one step after the
other, each command a new process of the simulated host, with a real SQLite ledger; the same
seed replays the same schedule exactly.

The checker, written from contract §9 and §13 apart from slurm-dsl's code, looks after every step
at what slurmctld holds in memory and at what its last save holds (what a crash now would bring
back): a job whose Requeue flag slurm-dsl's own call set to 1 there, while the ledger holds its
object clear, is a lost flag (no operation is in flight between two steps).  A command that ends
in anything but a result or a ``DSLError`` is a violation too.
"""

from __future__ import annotations

import random
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from slurm_dsl.core.model import DSLError, Op, Outcome, RequeueBit, Result, Verdict
from slurm_dsl.host import runs, world
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.run import deadlines
from slurm_dsl.run.tracked import Tracker
from tests.sim.slurmctld import FINISHED, INVALID, Cluster, Job, saved_jobs
from tests.sim.world import SCONTROL, SQUEUE, Host, Simulation

# How often each kind of step is drawn.
WEIGHTS: Dict[str, int] = {
    "op": 26, "bulk": 6, "keyed": 6, "sweep": 12, "wait": 16, "kill": 4, "start": 4, "term": 2, "step": 3,
    "hostwall": 2, "finish": 5, "submit": 4, "admin": 8, "freeze": 5, "durable": 4, "cmdkill": 4,
    "purge": 3, "onehost": 2, "midkill": 5,
    "elsewhere": 3, "cutoff": 3,
}
# Seconds a save takes from its begin to its link: a few jobs' (well under a millisecond), or a
# large cluster's, whose save already running at an ack does not carry the change (the ground
# truth, slurm-durability.md §2); one schedule in four runs on a large cluster.
PACKS = (0.0005, 0.0005, 0.0005, 0.4)
# Seconds a request waits for the job write lock: an idle controller's, or a busy one's (bulk
# loops holding it, settle-delay.md §2: 50 ms); one schedule in three runs busy.
LOCK_WAITS = (0.0, 0.0, 0.05)
OPS = (Op.HOLD, Op.RELEASE, Op.REQUEUE, Op.RESTORE)
# The steps whose commands may write a verdict (sweeps, keyed runs settling): the others' cannot
# (one op, a bulk run and --durable's wait record none), so the checker reads verdicts after these.
SETTLING = ("sweep", "keyed", "freeze", "cmdkill", "purge", "midkill", "elsewhere", "cutoff")
TIMEOUT = 30.0
SETTLE_DELAY = 2.0


@dataclass(frozen=True)
class Step:
    kind: str
    value: Tuple[object, ...] = ()


@dataclass
class Played:
    seed: int
    steps: List[Step]
    violations: List[str] = field(default_factory=list)
    known: List[str] = field(default_factory=list)  # a known open gap of the product (KNOWN), not a violation
    commands: int = 0
    faults: int = 0

    def replay(self, pair: bool = False) -> str:
        return f"python -m tests.sim --seed {self.seed} --steps {len(self.steps)}" + (" --pair" if pair else "")


def schedule(seed: int, steps: int) -> List[Step]:
    """The steps of ``seed``: kinds by ``WEIGHTS``, their values drawn from the same generator."""
    rng = random.Random(seed)
    kinds = list(WEIGHTS)
    out = []
    for _ in range(steps):
        kind = rng.choices(kinds, [WEIGHTS[k] for k in kinds])[0]
        pick = rng.random()
        if kind in ("op", "keyed", "durable"):
            out.append(Step(kind, (rng.choice(OPS), pick)))
        elif kind == "bulk":
            out.append(Step(kind, (rng.choice(OPS), pick, rng.randint(2, 5))))
        elif kind == "midkill":
            out.append(Step(kind, (rng.choice(("op", "keyed")), rng.choice(OPS), pick, rng.randint(0, 3),
                                   rng.choice((None, 0.5, 5.0, 12.0, 12.0)), rng.choice((TIMEOUT, 90.0, 90.0)))))
        elif kind == "cutoff":
            out.append(Step(kind, (rng.choice((Op.HOLD, Op.REQUEUE)), pick, rng.choice((0.03, 0.04, 0.05)))))
        elif kind == "elsewhere":
            out.append(Step(kind, (rng.choice(("op", "sweep")), rng.choice((Op.REQUEUE, Op.RESTORE)), pick,
                                   rng.randint(1, 3), rng.choice((40.0, 200.0)))))
        elif kind == "cmdkill":
            out.append(Step(kind, (rng.choice(("op", "keyed")), rng.choice(OPS), pick, 1, rng.randint(0, 2),
                                   rng.random() < 0.5)))
        elif kind == "freeze":
            out.append(Step(kind, (rng.choice((Op.REQUEUE, Op.HOLD)), pick, rng.randint(1, 4),
                                   rng.choice((0.5, 5.0, 40.0, 200.0)), rng.choice((0.0, 0.0, 300.0)))))
        elif kind == "kill":
            out.append(Step(kind, (rng.choice((0.0, 0.05, 0.5, 2.0)), rng.uniform(0.5, 8.0))))
        elif kind == "step":
            out.append(Step(kind, (rng.choice((-90.0, -6.0, 6.0, 90.0)),)))
        elif kind == "hostwall":
            out.append(Step(kind, (rng.choice((-120.0, -20.0, 20.0, 120.0)),)))
        elif kind == "onehost":
            out.append(Step(kind, (rng.choice((-90.0, -20.0, -3.0)),)))
        elif kind == "admin":
            out.append(Step(kind, (rng.choice(("hold", "release", "set", "clear", "requeue")), pick)))
        elif kind == "wait":
            out.append(Step(kind, (rng.choice((0.1, 1.0, 3.0, 6.0, 12.0, 40.0)),)))
        else:
            out.append(Step(kind, (pick,)))
    return out


class Killed(BaseException):
    """Ends, once its schedule is over, the thread of a command the schedule SIGKILLed."""


class Player:
    """Plays one schedule in one simulation."""

    def __init__(self, directory: Path, seed: int, *, pair: bool = False) -> None:
        # MinJobAge 30 s (the lab's 300): finished jobs are purged within a schedule.
        cluster = Cluster(pair=pair, major="24.11" if pair else "22.05", message_timeout=3.0 if pair else 10.0,
                          min_job_age=30.0)
        for controller in cluster.controllers:
            controller.pack = random.Random(f"pack-{seed}").choice(PACKS)
        cluster.lock_wait = random.Random(f"lock-{seed}").choice(LOCK_WAITS)
        # Half the schedules sweep with --redo-lost (contract §13.4), drawn apart from the steps.
        self.redo = random.Random(f"redo-{seed}").random() >= 0.5
        self.sim = Simulation(cluster)
        self.pair = pair
        self.ledger = str(directory / f"ledger-{seed}.sqlite3")
        self.sim.cluster.start(0.0)
        if pair:
            self.sim.cluster.start(0.0, which=1)
        self.jobs: List[str] = [self.sim.cluster.submit(0.0, requeue=i % 3 == 0) for i in range(6)]
        self.sim.advance(1.0)
        self.played = Played(seed, [])
        self.checker = self.sim.spawn()  # the checker's own process, to read the ledger
        self.over = threading.Event()  # set when the schedule is over: killed commands' threads end
        self.keys: Dict[str, Tuple[str, str]] = {}  # a keyed command's tag -> its (op, job)
        self.losses: List[float] = []  # when a controller was killed (what it had not saved may be lost)
        self.absent: Dict[str, Tuple[float, str, str]] = {}  # nonce -> (when its absent was seen, job, op)
        self.effects_read = 0  # the effects ``absent_kept`` has read
        self.sim.before_script = self.leased

    def job(self, pick: float) -> str:
        return self.jobs[int(pick * len(self.jobs)) % len(self.jobs)]

    def command(self, work: str, *args: object, freeze: Optional[Tuple[int, Callable[[], None]]] = None,
                kill: Optional[Tuple[int, int, Callable[[], None]]] = None,
                between: Optional[Tuple[int, Callable[[int, float], None]]] = None, timeout: float = TIMEOUT,
                host: Optional[Host] = None, in_flight: bool = False) -> None:
        """One slurm-dsl command: a new process, its tracker, its end; then its rows checked.
        ``freeze``: at which of its process starts or sleeps to call what (``frozen``); ``kill``:
        at which script, after how many calls, it dies (``killed``); ``between``: at which script
        what happens after each call (``midkill``); ``timeout``: its ``--timeout``; ``host``: where
        it runs (the first host by default); ``in_flight``: killed as its next call's request is on
        its way."""
        pid = self.sim.spawn(host)
        began, refused = self.sim.t, False
        self.played.commands += 1
        tag = self.sim.tags[pid] = f"dsl:{self.played.commands}"
        if freeze is not None:
            self.sim.freeze_at[pid] = freeze
            if host is self.sim.other:
                self.sim.unfrozen_at_script.add(pid)
        if kill is not None:
            self.sim.kill_at[pid] = kill
            if in_flight:
                self.sim.in_flight.add(pid)
        if between is not None:
            self.sim.between[pid] = between
        rows: List[Outcome] = []
        try:
            with world.bound(self.sim.world(pid)), Tracker(self.ledger, scontrol=SCONTROL, squeue=SQUEUE) as tracker:
                deadline = deadlines.steady() + timeout
                getattr(self, "_" + work)(tracker, deadline, rows, *args)
        except DSLError:
            refused = True  # a refusal, a lookup that could not ask, a ledger error: the command said so
        except Killed:
            return  # SIGKILLed: nothing of it is left to check
        except Exception as exc:  # anything else is a crash of the command
            self.played.violations.append(f"crash: {work} {args}: {type(exc).__name__}: {exc}")
        finally:
            self.sim.exit(pid)
        for row in rows:
            wrong = untrue(row, [e for e in self.sim.cluster.effects if whose(e) == tag])
            if wrong:
                self.played.violations.append(f"false-result: {work} {args}: {wrong}")
        if work in ("op", "bulk"):
            self.as_recorded(pid, work, rows)
        if work == "keyed":
            self.keyed_once(str(args[0]), self.job(float(args[1])))  # type: ignore[arg-type]
            if not refused:
                self.retried(pid, self.job(float(args[1])), began + timeout)  # type: ignore[arg-type]

    def midkill(self, work: str, op: Op, pick: float, after: int, restart: Optional[float], timeout: float) -> None:
        """slurmctld SIGKILLed right after call ``after`` of a command's first script (its reply
        given, what it changed not yet saved; 0: as the script starts): the later calls wait for
        it, or fail;
        ``restart``: started again that many seconds after the kill (None: at a start step); the
        command's ``--timeout``: a call no controller answered is settled only 32 s after its end
        (Rule 13), so only a longer one than the schedule's usual 30 s settles it and retries."""
        cluster = self.sim.cluster

        def crash(number: int, now: float) -> None:
            live = cluster.in_control()
            if number == after and live is not None:
                which = cluster.controllers.index(live)
                cluster.kill(now, which)
                self.losses.append(now)
                if restart is not None:
                    cluster.restart_at(now + restart, which)

        self.command(work, op, pick, between=(1, crash), timeout=timeout)

    def retried(self, pid: int, job: str, deadline: float) -> None:
        """``--retry`` retries (contract §12 step 4): a keyed command (one retry) whose own
        operation on its job was settled ``absent`` while its calls' deadline (the command's less
        the settle delay and 2 s) had not passed runs the job again, a second operation of its own,
        unless the retry could not start (a ``DSLError``, not checked here)."""
        if self.sim.t >= deadline - SETTLE_DELAY - 2.0:
            return  # it ended past the calls' deadline: the verdict may have come too late to act on
        with world.bound(self.sim.world(self.checker)), open_ledger(self.ledger) as ledger:
            mine = [e for e in ledger.history(job) if re.search(rf", pid {pid}(?:,|$)", e.actor or "")]
        if len(mine) == 1 and mine[0].settlement is not None and mine[0].settlement.verdict is Verdict.ABSENT:
            self.played.violations.append(
                f"retry-not-run: job {job}'s keyed {mine[0].op.value} (pid {pid}) settled absent, its command ended"
                f" at t={self.sim.t:.2f} within its calls' deadline, and ran it once")

    def frozen(self, op: Op, pick: float, at: int, gap: float, wall: float = 0.0) -> None:
        """A keyed command stopped (SIGSTOP) at its ``at``-th process start or sleep; meanwhile
        ``gap`` seconds pass, this host's wall clock steps ``wall`` seconds forward (the ledger's
        clock: leases and ends_by look lapsed), and the same command (op, job, key) runs whole;
        then the first goes on."""
        stopped, go = threading.Event(), threading.Event()

        def stop() -> None:
            stopped.set()
            go.wait()

        first = threading.Thread(target=self.command, args=("keyed", op, pick), kwargs={"freeze": (at, stop)},
                                 daemon=True)
        first.start()
        while first.is_alive() and not stopped.wait(0.001):
            pass
        if stopped.is_set():
            self.sim.sleep(gap)
            self.sim.host.offset += wall
            self.command("keyed", op, pick)
            go.set()
        first.join()

    def cutoff(self, op: Op, pick: float, timeout: float) -> None:
        """An op with a short ``--timeout`` on a busy controller (its request waits 90 ms for the
        job lock; settle-delay.md §2 measured 50 ms, and nothing applied after 0.1 s): the script
        is TERMed with its call's request on its way, the operation ends unknown, slurmctld applies
        the request after the end; the sweeper's timer fires at that moment (contract §12:
        ``absent`` only once a late request can no longer be applied)."""
        cluster = self.sim.cluster
        wait, cluster.lock_wait = cluster.lock_wait, 0.09
        try:
            self.command("op", op, pick, timeout=timeout)
        finally:
            cluster.lock_wait = wait
        self.command("sweep")

    def elsewhere(self, work: str, op: Op, pick: float, at: int, gap: float) -> None:
        """A command (``op``: one op of the job; ``sweep``) on the second host stopped (SIGSTOP)
        at its ``at``-th lookup or sleep (``world.Simulation.edge``), its liveness not to be told here;
        meanwhile ``gap`` seconds pass (its lease lapses) and a requeue of the job here is
        SIGKILLed after its call 1 (the flag set, the object ``may_be_set``); then the first goes
        on, and finishes late (Rule L7: its finish never makes the bit clearer)."""
        stopped, go = threading.Event(), threading.Event()

        def stop() -> None:
            stopped.set()
            go.wait()

        args = () if work == "sweep" else (op, pick)
        first = threading.Thread(target=self.command, args=(work, *args),
                                 kwargs={"freeze": (at, stop), "host": self.sim.other}, daemon=True)
        first.start()
        while first.is_alive() and not stopped.wait(0.001):
            pass
        if stopped.is_set():
            self.sim.sleep(gap)
            self.killed("op", Op.REQUEUE, pick, 1, 1)
            go.set()
        first.join()

    def killed(self, work: str, op: Op, pick: float, script: int, calls: int, in_flight: bool = False) -> None:
        """A command SIGKILLed (with its script, as its lifeline takes it) once its ``script``-th
        script has made ``calls`` calls: nothing after that runs, no lease is given back.
        ``in_flight``: as its next call's request is on its way, which slurmctld applies after the
        death (on a busy controller, tens of ms later); the sweeper's timer fires at that moment."""
        dead = threading.Event()

        def die() -> None:
            dead.set()
            self.over.wait()  # gone: nothing of it runs again while the schedule is played
            raise Killed()

        victim = threading.Thread(target=self.command, args=(work, op, pick),
                                  kwargs={"kill": (script, calls, die), "in_flight": in_flight}, daemon=True)
        victim.start()
        while victim.is_alive() and not dead.wait(0.001):
            pass
        if in_flight and dead.is_set():
            self.command("sweep")

    def purged(self, pick: float) -> None:
        """A finished job purged as a sweep looks it up, and slurmctld SIGKILLed before that purge
        is saved (the durability issue's finding 3).  A requeue of the job SIGKILLed after its call
        1 (the flag set, the object may_be_set); its lease lapses; the job ends; sweeps while other
        changes are saved, so that the object's quiet moment is known saved
        (Rule D2) and only the job's purge is left to prove; MinJobAge passes; then a sweep, and as its lookup reaches
        slurmctld a user's change is saved and the purge timer fires (its 60 s phase is slurmctld's
        start's: any moment), so the purge waits for the next save window (contract §13.8: "gone"
        is saved late like any change); slurmctld is killed as the sweep ends."""
        sim, cluster = self.sim, self.sim.cluster
        job = self.job(pick)
        self.killed("op", Op.REQUEUE, pick, 1, 1)
        sim.sleep(TIMEOUT + 60.0)  # its lease lapses (no sweep has looked meanwhile)
        controller = cluster.in_control()
        if controller is None or job not in controller.jobs:
            return
        if controller.jobs[job].state not in FINISHED:
            cluster.finish(sim.t, job)
        ended = sim.t
        self.command("sweep")  # it takes the lapsed lease, anchors the object's quiet moment, keeps it watched
        for _ in range(2):  # two saves seen after that look: the quiet moment is saved, the purge is not yet
            sim.sleep(6.0)
            if cluster.in_control() is None:
                return
            cluster.submit(sim.t)
            self.command("sweep")
        sim.advance(ended + controller.min_job_age + 1.0)

        def purge_now() -> None:
            live = cluster.in_control()
            if live is None:
                return
            cluster.submit(sim.t)  # a user's job: saved at once (the thread cold) or in its window
            sim.advance(sim.t + 0.01)
            live.next_purge = sim.t
            sim.advance(sim.t)

        sim.before_lookup = purge_now
        self.command("sweep")
        sim.before_lookup = None
        live = cluster.in_control()
        if live is not None:
            cluster.kill(sim.t, cluster.controllers.index(live))
            self.losses.append(sim.t)

    def keyed_once(self, op: str, job: str) -> None:
        """A key acts at most once (contract §12): no run of a key makes a call on its job after
        another run of the key had its requeue applied, unless a crash or takeover came between
        (what slurmctld lost may be done again)."""
        if op != Op.REQUEUE.value:
            return
        tags = {t for t, k in self.keys.items() if k == (op, job)}
        mine = [e for e in self.sim.cluster.effects if whose(e) in tags and e[3] == job]
        done = [(e[0], whose(e)) for e in mine if e[2] == "requeue" and e[5] is None]
        for tag in tags:
            first = next((e[0] for e in mine if whose(e) == tag), None)
            for at, by in done:
                if first is not None and by != tag and at < first and not any(at < k <= first for k in self.losses):
                    self.played.violations.append(
                        f"key-acted-twice: job {job}: a run of its requeue key made its first call at t={first:.2f},"
                        f" after another run's requeue applied at t={at:.2f}, no crash between")
                    return

    def as_recorded(self, pid: int, work: str, rows: List[Outcome]) -> None:
        """Each row a command printed is what the ledger recorded of its operation (contract §9.2)."""
        with world.bound(self.sim.world(self.checker)), open_ledger(self.ledger) as ledger:
            for row in rows:
                mine = [e for e in ledger.history(row.job_id) if re.search(rf", pid {pid}(?:,|$)", e.actor or "")]
                if row.result is Result.EXPIRED and not mine:
                    continue  # its turn came after the deadline: nothing was recorded (contract §10.0)
                if not mine or (mine[-1].result, mine[-1].requeue_bit) != (row.result, row.requeue_bit):
                    recorded = (mine[-1].result, mine[-1].requeue_bit) if mine else None
                    self.played.violations.append(
                        f"row-not-recorded: {work}: job {row.job_id} printed {row.result.value}/{row.requeue_bit},"
                        f" the ledger holds {recorded}")

    def _op(self, tracker: Tracker, deadline: float, rows: List[Outcome], op: Op, pick: float) -> None:
        rows.append(tracker.run(op, self.job(pick), deadline))

    def _durable(self, tracker: Tracker, deadline: float, rows: List[Outcome], op: Op, pick: float) -> None:
        """``--durable``: the row once slurmctld's save of its change is confirmed; one said saved
        must be on slurmctld's last save as the command ends (contract §13.5)."""
        from slurm_dsl.run.durable import confirm_saved

        job = self.job(pick)
        baseline = (self.sim.cluster.jobs(self.sim.t, [job]) or {}).get(job)
        tag = self.sim.tags[runs.this_run().pid]
        row = confirm_saved(tracker, [tracker.run(op, job, deadline)], deadline)[0]
        rows.append(row)
        if row.saved:
            saved = saved_jobs(self.sim.cluster.disk).get(job)
            # A requeue's own: the save holds this command's requeue.  RestartCnt against the record
            # before it would be fooled where a crash undid another requeue in that record (contract
            # §12 Rule 16), this one then raising the count back to it.
            ours = op.requeues and saved is not None and tag in {w.partition("#")[0] for w in saved.requeued_by}
            if saved is None or not (ours or (not op.requeues and shows(op, saved, baseline))):
                self.played.violations.append(
                    f"durable-not-saved: {op.value} {job} said saved at t={self.sim.t:.2f}; slurmctld's last save"
                    f" holds {saved}")

    def _bulk(self, tracker: Tracker, deadline: float, rows: List[Outcome], op: Op, pick: float, n: int) -> None:
        from slurm_dsl.run.driver import drive

        start = int(pick * len(self.jobs))
        ids = [self.jobs[(start + i) % len(self.jobs)] for i in range(n)]
        for event in drive(tracker, op, ids, deadline):
            outcome = getattr(event, "outcome", None)
            if isinstance(outcome, Outcome):
                rows.append(outcome)

    def _keyed(self, tracker: Tracker, deadline: float, rows: List[Outcome], op: Op, pick: float) -> None:
        from slurm_dsl.run.keyed import run_settled

        job = self.job(pick)
        self.keys[self.sim.tags[runs.this_run().pid]] = (op.value, job)
        for event in run_settled(tracker, op, [job], deadline, key=f"k-{op.value}-{job}", settle=True, retry=1,
                                 settle_delay=SETTLE_DELAY, one_by_one=True, parallel=1):
            outcome = getattr(event, "outcome", None)
            if isinstance(outcome, Outcome) and outcome.calls:  # not an earlier run's row
                rows.append(outcome)

    def _sweep(self, tracker: Tracker, deadline: float, rows: List[Outcome]) -> None:
        from slurm_dsl.lookups.squeue import SqueueLookup
        from slurm_dsl.run.sweep import redo_lost, sweep

        with tracker.ledger().sweep_lock():
            report = sweep(tracker, SqueueLookup(SQUEUE), settle_delay=SETTLE_DELAY)
            # --redo-lost: each keyed operation it found lost, its key run again (contract §13.4);
            # the checker holds the key to at most one effect all the same.
            if self.redo:
                rows += [r.outcome for r in redo_lost(tracker, report.lost, TIMEOUT, SETTLE_DELAY) if r.outcome]

    def step(self, step: Step) -> None:
        sim, cluster, v = self.sim, self.sim.cluster, step.value
        self.played.steps.append(step)
        commands = self.played.commands
        if step.kind in ("op", "bulk", "keyed", "durable"):
            self.command(step.kind, *v)
        elif step.kind == "cmdkill":
            self.played.faults += 1
            self.killed(*v)  # type: ignore[arg-type]
        elif step.kind == "cutoff" and cluster.in_control() is not None:
            self.played.faults += 1
            self.cutoff(*v)  # type: ignore[arg-type]
        elif step.kind == "elsewhere":
            self.played.faults += 1
            self.elsewhere(*v)  # type: ignore[arg-type]
        elif step.kind == "midkill":
            self.played.faults += 1
            self.midkill(*v)  # type: ignore[arg-type]
        elif step.kind == "freeze":
            self.played.faults += 1
            self.frozen(*v)  # type: ignore[arg-type]
        elif step.kind == "sweep":
            self.command("sweep")
        elif step.kind == "wait":
            sim.sleep(float(v[0]))  # type: ignore[arg-type]
        elif step.kind == "kill" and cluster.in_control() is not None:  # down until a start step
            self.played.faults += 1
            which = cluster.controllers.index(cluster.in_control())  # type: ignore[arg-type]
            cluster.kill(sim.t + float(v[0]), which)  # type: ignore[arg-type]
            self.losses.append(sim.t + float(v[0]))  # type: ignore[arg-type]
            sim.advance(sim.t + float(v[0]))  # type: ignore[arg-type]
        elif step.kind == "start":
            down = [i for i, c in enumerate(cluster.controllers) if not c.up]
            if down:  # a restarted primary takes control back from the backup later (a hand-back)
                cluster.start(sim.t, down[0])
        elif step.kind == "term" and cluster.in_control() is cluster.primary and not self.pair:
            self.played.faults += 1
            cluster.terminate(sim.t)
            sim.advance(sim.t + 1.0)
            cluster.start(sim.t)
        elif step.kind == "step":
            self.played.faults += 1
            cluster.step_clock(sim.t, float(v[0]))  # type: ignore[arg-type]
        elif step.kind == "hostwall":
            self.played.faults += 1
            sim.host.offset += float(v[0])  # type: ignore[arg-type]
        elif step.kind == "onehost" and not self.pair:
            # slurmctld on this host (the lab's layout): one step of the one clock both read,
            # back (chrony, ``date -s``, a VM restored): its saves before it carry later times.
            self.played.faults += 1
            cluster.step_clock(sim.t, float(v[0]))  # type: ignore[arg-type]
            sim.host.offset += float(v[0])  # type: ignore[arg-type]
        elif step.kind == "purge" and cluster.in_control() is not None:
            self.played.faults += 1
            self.purged(float(v[0]))  # type: ignore[arg-type]
        elif step.kind == "finish" and cluster.in_control() is not None:
            live = [j for j in self.jobs if (cluster.jobs(sim.t, [j]) or {}).get(j, Job(j, state="X")).state
                    in ("RUNNING", "PENDING")]
            if live:
                cluster.finish(sim.t, live[int(float(v[0]) * len(live)) % len(live)])  # type: ignore[arg-type]
        elif step.kind == "submit" and cluster.in_control() is not None:
            self.jobs.append(cluster.submit(sim.t, requeue=int(float(v[0]) * 2)))  # type: ignore[arg-type]
        elif step.kind == "admin" and cluster.in_control() is not None:
            what, job = str(v[0]), self.job(float(v[1]))  # type: ignore[arg-type]
            argv = {"hold": ("hold", job), "release": ("release", job), "requeue": ("requeue", job),
                    "set": ("update", f"JobId={job}", "Requeue=1"), "clear": ("update", f"JobId={job}", "Requeue=0")}
            sim.advance(cluster.call(sim.t, argv[what]).ends)
        self.check(str(step), verdicts=self.played.commands != commands and step.kind in SETTLING)

    def absent_kept(self, after: str) -> None:
        """An operation settled ``absent`` did nothing and will do nothing: its job is run again on
        that verdict (``--retry``, contract §12: "absent" only once a request that reached slurmctld
        late could no longer be applied, §13.6: nor while a controller may hold it back).  So none
        of its calls is applied after the lookup the verdict was read from (no later than its
        settler's last lookup)."""
        for e in self.sim.cluster.effects[self.effects_read:]:
            nonce = e[1].partition("#")[2]
            seen = self.absent.get(nonce)
            if seen is not None and e[5] is None and e[0] > seen[0]:
                self.played.violations.append(
                    f"false-verdict: job {seen[1]}'s {seen[2]} (nonce {nonce}) settled absent by t={seen[0]:.2f},"
                    f" then its {e[2]} applied at t={e[0]:.2f} (after step {len(self.played.steps)}: {after})")
        self.effects_read = len(self.sim.cluster.effects)

    def leased(self, pid: int, calls: List[Tuple[str, ...]]) -> None:
        """Every scontrol call slurm-dsl makes on a job belongs to an operation under the job's
        lease, held by the calling run (contract §9.2): read in the ledger as the script starts."""
        jobs = sorted({j for argv in calls for a in argv[1:] for j in a.removeprefix("JobId=").split(",")
                       if j.isdigit()})
        run = self.sim.run_of(pid)
        with world.bound(self.sim.world(self.checker)), open_ledger(self.ledger) as ledger:
            holders = ledger.lease_holders(jobs)
        for job in jobs:
            if holders.get(job, "").rpartition("@")[2] != run:
                self.played.violations.append(
                    f"unleased-call: {calls} on job {job} by run {run}, the lease held by {holders.get(job)!r}"
                    f" (t={self.sim.t:.2f}, step {len(self.played.steps)})")

    def check(self, after: str, verdicts: bool = True) -> None:
        """The lost-flag invariant, on what slurmctld holds and on what its last save holds; and
        no call of an operation settled ``absent`` applied after that verdict (``absent_kept``).
        ``verdicts``: a command that may write verdicts ran in the step (``SETTLING``): read them."""
        cluster = self.sim.cluster
        with world.bound(self.sim.world(self.checker)), open_ledger(self.ledger) as ledger:
            clear = {j for j in self.jobs if (o := ledger.get(j)) is None or RequeueBit(o.bit) is RequeueBit.CLEAR}
            for each in self.jobs if verdicts else ():
                for entry in ledger.history(each):
                    if entry.settlement is not None and entry.settlement.verdict is Verdict.ABSENT:
                        # read from its settler's lookup: no later than that process's last one
                        by = re.search(r", pid (\d+)", entry.settlement.by or "")
                        at = self.sim.looked.get(int(by.group(1)), self.sim.t) if by else self.sim.t
                        self.absent.setdefault(entry.nonce, (at, each, entry.op.value))
        self.absent_kept(after)
        held: Dict[str, Dict[str, Job]] = {"on its last save": dict(saved_jobs(cluster.disk))}
        live = cluster.in_control()
        if live is not None:
            held["in slurmctld's memory"] = live.jobs
        for where, jobs in held.items():
            for job_id, job in jobs.items():
                if job.requeue == 1 and job.requeue_by.startswith("dsl") and job_id in clear:
                    self.played.violations.append(
                        f"lost-flag: job {job_id} at Requeue=1 {where}, set by slurm-dsl, its object clear"
                        f" (t={self.sim.t:.2f}, after step {len(self.played.steps)}: {after})")


# The product's known open gaps the checker recognises: reported, counted, not violations (each
# written down in the contract; remove its entry, and its exemption, once the product closes it).
KNOWN: Dict[str, str] = {}  # none open (the last, "baseline-undone", closed by contract §12 Rule 16)

# The call whose effect a result speaks of (contract §1, §7): the op's own, on its job.
EFFECT_CALL = {Op.HOLD: ("hold", None), Op.RELEASE: ("release", None), Op.REQUEUE: ("requeue", None),
               Op.RESTORE: ("update", "0"), Op.OPEN: ("release", None)}
Effect = Tuple[float, str, str, str, Optional[str], Optional[str]]


def whose(effect: Effect) -> str:
    """The command whose call an effect is (``dsl:N``; ``admin``), without its operation's nonce."""
    return effect[1].partition("#")[0]


def shows(op: Op, job: Job, before: Optional[Job]) -> bool:
    """Whether ``job``'s record shows ``op``'s effect (contract §12's table): a hold priority 0, a
    release or open above 0, a restore Requeue=0, a requeue RestartCnt above the record before."""
    if op is Op.HOLD:
        return job.priority == 0
    if op in (Op.RELEASE, Op.OPEN):
        return job.priority > 0
    if op is Op.RESTORE:
        return job.requeue == 0
    return before is not None and job.restarts > before.restarts


def untrue(row: Outcome, effects: Sequence[Effect]) -> Optional[str]:
    """What is wrong with a row's result, against what its own command's calls did to its job in
    slurmctld (None: nothing).  ``ok``: its effect call was applied; a refusal, not found, expired
    or not run: it was not (a restore of a job slurmctld no longer knows is ok: the flag went with
    it); ``bit_set``: a requeue's call 1 was applied and its call 3 was not; ``unknown``: anything."""
    verb, value = EFFECT_CALL[row.op]
    mine = [e for e in effects if e[3] == row.job_id]
    done = any(e[2] == verb and e[4] == value and e[5] is None for e in mine)
    result = row.result
    gone = not mine or any(e[2] == verb and e[4] == value and e[5] == INVALID for e in mine)
    if result is Result.OK and not done and not (row.op is Op.RESTORE and gone):  # (no record: gone)
        return f"job {row.job_id} {row.op.value} said ok, but its {verb} was not applied"
    if result in (Result.REJECTED, Result.NOT_FOUND, Result.EXPIRED, Result.NOT_RUN) and done:
        return f"job {row.job_id} {row.op.value} said {result.value}, but its {verb} was applied"
    set_ = [e[0] for e in mine if e[2] == "update" and e[4] == "1" and e[5] is None]
    if result is Result.BIT_SET:
        cleared = any(e[2] == "update" and e[4] == "0" for e in mine)
        if not set_ or cleared:
            return f"job {row.job_id} requeue said bit_set, but its calls 1 and 3 did not leave the flag set"
    if row.op is Op.REQUEUE and row.requeue_bit is RequeueBit.CLEAR and set_ and not any(
            e[2] == "update" and e[4] == "0" and e[5] in (None, INVALID) and e[0] > set_[-1] for e in mine):
        # §7: a requeue's bit is clear only if call 1 did not set the flag, or call 3 cleared it
        # (or found the job gone)
        return f"job {row.job_id} requeue said its bit clear, but its call 1 set the flag and no call 3 cleared it"
    return None


def play(directory: Path, seed: int, steps: int, *, stop_at_first: bool = True, pair: bool = False) -> Played:
    """Play ``seed``'s schedule of ``steps`` steps, then sweep until quiet; the violations found.
    ``pair``: a 24.11 primary/backup pair, takeovers and hand-backs (docs/durability.md §3)."""
    player = Player(directory, seed, pair=pair)
    try:
        for step in schedule(seed, steps):
            player.step(step)
            if stop_at_first and player.played.violations:
                return player.played
        for which, controller in enumerate(player.sim.cluster.controllers):
            if not controller.up:
                player.sim.cluster.start(player.sim.t, which)
        for _ in range(13):  # the timer's sweeps, slurmctld up: an idle one saves at its 300 s checkpoints
            player.step(Step("sweep"))
            player.step(Step("wait", (60.0,)))
        return player.played
    finally:
        player.over.set()


def first_violation(directory: Path, seeds: range, steps: int) -> Optional[Played]:
    for seed in seeds:
        played = play(directory, seed, steps)
        if played.violations:
            return played
    return None
