"""How late slurmctld still applies a hold or requeue whose scontrol was killed (docs/settle-delay.md).

Not a test: it prints figures, against the lab (contrib/lab/up).  When unknown outcomes are
settled (issue 18), a verdict ``absent`` may only be read from a lookup made at least the
settle delay after the call's process was killed: a request that reached slurmctld just before
its client died may still be applied.  This measures how late that application comes.

For each op, again and again on jobs of its own (job names ``sdsl-settle-*``):

- ``hold``: ``scontrol hold ID`` on a pending, unheld job (``--begin=now+1hour``), SIGKILLed
  at a random moment in [0, T] ms after the process started, T = 1.5 x the bare call's median
  duration measured first;
- ``hold-wrapped``: the same hold through slurm-dsl's wrapped path
  (``slurm_dsl.run.calls.execute``) with a deadline a random [0, T] ms away: the runner TERMs
  the script's group at the deadline (KILL one second later); the Outcome's result is kept, to
  check it against the effect;
- ``requeue``: ``scontrol requeue ID`` on a running job with ``Requeue=1`` set first, killed
  the same way.

After each kill the job is looked at (``squeue -O``) at +0, +0.1, +1, +5 and +10 s: is the
effect there (hold: PriorityLong 0 or Reason JobHeldAdmin/JobHeldUser; requeue: RestartCnt
above the baseline read before the call)?  A look that finds it absent followed by one that
finds it present is a late application: what the settle delay has to cover.  Trials overlap
(the next one starts while earlier ones wait for their looks), each on its own job.

Conditions: ``idle`` (only this run's jobs) and ``busy`` (background loops each holding and
releasing 1,000 pending jobs of this run's own in one list call, back to back, for the whole
measurement; stopped as soon as it ends).

    python -m benchmarks.settle_delay [--kills 100] [--conditions idle,busy]
                                      [--ops hold,hold-wrapped,requeue] [--busy-loops 2]
                                      [--busy-jobs 1000] [--running 4] [--seed N] [--json FILE]

Cleans up by job name only: ``scancel --name`` of the names it used, never other jobs.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from slurm_dsl import Op, Result
from slurm_dsl.run.calls import execute
from tests.lab import JobState, LabError, job_state, lab_available, run_cmd

SCONTROL = "/usr/bin/scontrol"
LOOKS = (0.0, 0.1, 1.0, 5.0, 10.0)  # seconds after the kill
NAME_HOLD = "sdsl-settle-hold"
NAME_REQUEUE = "sdsl-settle-rq"
NAME_BUSY = "sdsl-settle-busy"
NAMES = (NAME_HOLD, NAME_REQUEUE, NAME_BUSY)
PENDING_ARGS = ("--begin=now+1hour", "--time=10", "--wrap", "sleep 1")
RUNNING_ARGS = ("--time=10", "--wrap", "sleep 600")
GAP = 0.15  # seconds between the starts of two hold trials: looks of earlier trials run between
START_WAIT = 600.0  # seconds a fresh running job may wait for a free slot
MAX_PENDING = 3000  # the brief's cap on this run's pending jobs


@dataclass
class Look:
    planned: float  # seconds after the kill
    started: float  # seconds after the kill when squeue started
    ended: float  # ... and when it returned
    present: Optional[bool]  # None: the job was gone or squeue failed
    fields: str


@dataclass
class Trial:
    op: str
    condition: str
    job: str
    delay_ms: float  # planned kill moment after the spawn (or the deadline, wrapped)
    baseline_restarts: int = 0
    exited_before_kill: Optional[int] = None  # scontrol's rc if it finished before the kill
    result: str = ""  # the wrapped path's Outcome result
    kill_ms: float = 0.0  # the real moment of the kill after the spawn began (wrapped: the return)
    killed_at: float = 0.0  # time.monotonic() when the process was reaped after the kill
    looks: List[Look] = field(default_factory=list)

    def late(self) -> Optional[Tuple[float, float]]:
        """(last absent look start, first later present look end), if the effect came late."""
        last_absent: Optional[float] = None
        for look in self.looks:
            if look.present is False:
                last_absent = look.started
            elif look.present and last_absent is not None:
                return last_absent, look.ended
        return None


def sbatch(name: str, args: Sequence[str]) -> str:
    argv = ["sbatch", "--parsable", "-o", "/dev/null", f"--job-name={name}", *args]
    done = run_cmd(argv, cwd="/tmp")
    if done.returncode != 0:
        raise LabError(f"sbatch failed: {done.stderr.strip()}")
    return done.stdout.strip().split(";")[0]


def sbatch_many(name: str, args: Sequence[str], count: int) -> List[str]:
    """``count`` jobs, eight sbatch processes at a time."""
    ids: List[str] = []
    argv = ["sbatch", "--parsable", "-o", "/dev/null", f"--job-name={name}", *args]
    while len(ids) < count:
        batch = [subprocess.Popen(argv, cwd="/tmp", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(min(8, count - len(ids)))]
        for proc in batch:
            out, err = proc.communicate(timeout=60)
            if proc.returncode != 0:
                raise LabError(f"sbatch failed: {err.strip()}")
            ids.append(out.strip().split(";")[0])
    return ids


def own_pending() -> int:
    done = run_cmd(["squeue", "-h", "-t", "PD", "-o", "%j"])
    return sum(1 for name in done.stdout.split() if name in NAMES)


def cleanup() -> None:
    for name in NAMES:
        run_cmd(["scancel", "-u", "root", f"--name={name}"])


def hold_present(js: JobState, _trial: Trial) -> bool:
    return js.priority == 0 or js.reason in ("JobHeldAdmin", "JobHeldUser")


def requeue_present(js: JobState, trial: Trial) -> bool:
    return js.restarts > trial.baseline_restarts


EFFECT: Dict[str, Callable[[JobState, Trial], bool]] = {
    "hold": hold_present,
    "hold-wrapped": hold_present,
    "requeue": requeue_present,
}


def look(trial: Trial, planned: float) -> None:
    started = time.monotonic() - trial.killed_at
    try:
        js = job_state(trial.job)
    except LabError as exc:
        js, text = None, f"squeue failed: {exc}"
    else:
        text = "gone" if js is None else f"{js.state}/{js.reason} prio={js.priority} restarts={js.restarts}"
    ended = time.monotonic() - trial.killed_at
    present = None if js is None else EFFECT[trial.op](js, trial)
    trial.looks.append(Look(planned, round(started, 4), round(ended, 4), present, text))


def bare_call(argv: List[str], delay_ms: float, trial: Trial) -> None:
    """Start ``argv``, SIGKILL it ``delay_ms`` after the spawn began, reap it.

    A sleep, not a busy wait: on the lab's two CPUs a spinning parent starves the scontrol it
    is about to kill.  Linux's sleep overshoots by ~0.1 ms; the real moment is recorded.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    left = start + delay_ms / 1000.0 - time.perf_counter()
    if left > 0:
        time.sleep(left)
    rc = proc.poll()
    trial.kill_ms = round((time.perf_counter() - start) * 1000.0, 3)
    if rc is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    else:
        trial.exited_before_kill = rc
    trial.killed_at = time.monotonic()


def wrapped_call(op: Op, delay_ms: float, trial: Trial) -> None:
    start = time.perf_counter()
    outcome = execute(op, trial.job, time.time() + delay_ms / 1000.0, scontrol=SCONTROL)
    trial.kill_ms = round((time.perf_counter() - start) * 1000.0, 3)  # here: when execute returned
    trial.killed_at = time.monotonic()
    trial.result = outcome.result.value
    # A call that answered before the deadline; expired and unknown ones count as killed.
    if outcome.result in (Result.OK, Result.REJECTED, Result.NOT_FOUND):
        trial.exited_before_kill = outcome.exit_status


def median_duration(argvs: List[List[str]]) -> float:
    """Median ms from spawn to exit of the bare calls (after two warm-ups)."""
    times: List[float] = []
    for argv in argvs:
        start = time.perf_counter()
        subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times[2:])


def median_wrapped(job: str, count: int) -> float:
    times: List[float] = []
    for _ in range(count):
        start = time.perf_counter()
        execute(Op.HOLD, job, time.time() + 30, scontrol=SCONTROL)
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times[2:])


class Looker:
    """The looks still due, soonest first; ``due`` runs those whose time has come."""

    def __init__(self) -> None:
        self.heap: List[Tuple[float, int, Trial]] = []
        self.count = 0

    def schedule(self, trial: Trial) -> None:
        look(trial, LOOKS[0])
        for planned in LOOKS[1:]:
            self.count += 1
            heapq.heappush(self.heap, (trial.killed_at + planned, self.count, trial))

    def due(self, until: float) -> None:
        """Run every look due before ``until`` (sleeping to the next one), then return."""
        while True:
            now = time.monotonic()
            if self.heap and self.heap[0][0] <= now:
                when, _, trial = heapq.heappop(self.heap)
                look(trial, round(when - trial.killed_at, 3))
                continue
            nxt = min(until, self.heap[0][0]) if self.heap else until
            if nxt <= now:
                return
            time.sleep(nxt - now)  # waiting for a clock time, not for a condition

    def drain(self) -> None:
        while self.heap:
            self.due(self.heap[0][0])


def run_holds(op: str, condition: str, kills: int, t_ms: float, rng: random.Random) -> List[Trial]:
    jobs = sbatch_many(NAME_HOLD, PENDING_ARGS, kills)
    trials: List[Trial] = []
    looker = Looker()
    for job in jobs:
        trial = Trial(op, condition, job, round(rng.uniform(0.0, t_ms), 3))
        if op == "hold":
            bare_call([SCONTROL, "hold", job], trial.delay_ms, trial)
        else:
            wrapped_call(Op.HOLD, trial.delay_ms, trial)
        looker.schedule(trial)
        trials.append(trial)
        looker.due(time.monotonic() + GAP)
    looker.drain()
    run_cmd(["scancel", *jobs])
    return trials


def state_now(job: str) -> Optional[JobState]:
    """The job's state, None if it is gone or squeue failed (slurmctld restarted by someone)."""
    try:
        return job_state(job)
    except LabError:
        return None


def start_running(count: int, looker: Optional[Looker] = None) -> List[str]:
    """``count`` fresh running jobs with Requeue=1 (polls until each one runs).

    Meanwhile the looks of ``looker`` still run on time.  Slots are shared with other users of
    the lab: this waits up to START_WAIT seconds for them.
    """
    jobs = [sbatch(NAME_REQUEUE, RUNNING_ARGS) for _ in range(count)]
    give_up = time.monotonic() + START_WAIT
    waiting = list(jobs)
    while waiting:
        waiting = [j for j in waiting if (js := state_now(j)) is None or js.state != "RUNNING"]
        if time.monotonic() > give_up:
            run_cmd(["scancel", *jobs])
            raise LabError(f"jobs {waiting} did not start within {START_WAIT:g} s (slots taken?)")
        if waiting and looker is not None:
            looker.due(time.monotonic() + 0.1)
        elif waiting:
            time.sleep(0.1)
    for job in jobs:
        done = run_cmd([SCONTROL, "update", f"JobId={job}", "Requeue=1"])
        if done.returncode != 0:
            raise LabError(f"update Requeue=1 on {job}: {done.stderr.strip()}")
    return jobs


def run_requeues(condition: str, kills: int, t_ms: float, running: int, rng: random.Random) -> List[Trial]:
    """Up to ``running`` jobs in flight; a job whose requeue took effect is replaced by a fresh one."""
    trials: List[Trial] = []
    looker = Looker()
    free = start_running(running)
    in_flight: List[Trial] = []
    while len(trials) < kills or in_flight:
        for trial in [t for t in in_flight if len(t.looks) == len(LOOKS)]:
            in_flight.remove(trial)
            if trial.looks[-1].present is False and (js := state_now(trial.job)) is not None \
                    and js.state == "RUNNING" and js.requeue == 1:
                free.append(trial.job)  # never requeued: use it again
            else:
                run_cmd(["scancel", trial.job])
                if len(trials) < kills:
                    free.extend(start_running(1, looker))
        if free and len(trials) < kills:
            job = free.pop()
            js = state_now(job)
            if js is None or js.state != "RUNNING":
                run_cmd(["scancel", job])
                free.extend(start_running(1, looker))
                continue
            trial = Trial("requeue", condition, job, round(rng.uniform(0.0, t_ms), 3), js.restarts)
            bare_call([SCONTROL, "requeue", job], trial.delay_ms, trial)
            looker.schedule(trial)
            trials.append(trial)
            in_flight.append(trial)
            looker.due(time.monotonic() + GAP)
        elif looker.heap:
            looker.due(looker.heap[0][0])
    for job in free:
        run_cmd(["scancel", job])
    return trials


def start_busy(loops: int, jobs_each: int) -> List[subprocess.Popen[bytes]]:
    if own_pending() + loops * jobs_each > MAX_PENDING:
        raise SystemExit(f"settle_delay: {loops} x {jobs_each} busy jobs would pass {MAX_PENDING} pending")
    procs: List[subprocess.Popen[bytes]] = []
    for _ in range(loops):
        ids = ",".join(sbatch_many(NAME_BUSY, PENDING_ARGS, jobs_each))
        script = 'while :; do "$1" hold "$2"; "$1" release "$2"; done'
        procs.append(subprocess.Popen(["sh", "-c", script, "busy", SCONTROL, ids], start_new_session=True,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    return procs


def stop_busy(procs: List[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the loop's own session, started above
        except ProcessLookupError:
            pass
        proc.wait()
    run_cmd(["scancel", "-u", "root", f"--name={NAME_BUSY}"])


def busy_rate(seconds: float = 5.0) -> str:
    """How long one ``scontrol hold`` of a fresh pending job takes meanwhile (slurmctld's lag)."""
    job = sbatch(NAME_HOLD, PENDING_ARGS)
    times = []
    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up:
        start = time.perf_counter()
        subprocess.run([SCONTROL, "hold", job], capture_output=True, check=False)
        times.append((time.perf_counter() - start) * 1000.0)
    run_cmd(["scancel", job])
    return f"{len(times)} holds, median {statistics.median(times):.1f} ms, max {max(times):.1f} ms"


def windows(ops: List[str]) -> Dict[str, float]:
    """T per op: 1.5 x the median duration of the bare call (or the wrapped one), measured now."""
    probe = sbatch(NAME_HOLD, PENDING_ARGS)
    hold_ms = median_duration([[SCONTROL, "hold", probe]] * 22)
    wrapped_ms = median_wrapped(probe, 12)
    run_cmd(["scancel", probe])
    t_ms = {"hold": 1.5 * hold_ms, "hold-wrapped": 1.5 * wrapped_ms}
    print(f"bare hold median {hold_ms:.2f} ms, wrapped hold median {wrapped_ms:.2f} ms", flush=True)
    if "requeue" in ops:
        # A refused requeue (Requeue=0) costs what a real one costs up to slurmctld's answer.
        job = start_running(1)[0]
        run_cmd([SCONTROL, "update", f"JobId={job}", "Requeue=0"])
        rq_ms = median_duration([[SCONTROL, "requeue", job]] * 12)
        run_cmd(["scancel", job])
        t_ms["requeue"] = 1.5 * rq_ms
        print(f"bare refused requeue median {rq_ms:.2f} ms", flush=True)
    return {op: t_ms[op] for op in ops}


def table(trials: List[Trial]) -> None:
    by: Dict[Tuple[str, str], List[Trial]] = {}
    for trial in trials:
        by.setdefault((trial.op, trial.condition), []).append(trial)
    print("\n| op | condition | kills | finished before kill | "
          + " | ".join(f"+{p:g} s present/absent/gone" for p in LOOKS)
          + " | killed, yet present | late applications | latest |")
    print("|---|---|---|---|" + "---|" * len(LOOKS) + "---|---|---|")
    for (op, condition), group in by.items():
        cells = []
        for i in range(len(LOOKS)):
            looks = [t.looks[i] for t in group if len(t.looks) > i]
            cells.append(f"{sum(1 for lk in looks if lk.present)}/{sum(1 for lk in looks if lk.present is False)}/"
                         f"{sum(1 for lk in looks if lk.present is None)}")
        lates = [lt for t in group if (lt := t.late()) is not None]
        latest = f"absent at {max(a for a, _ in lates):.3f} s, present by {max(b for _, b in lates):.3f} s" \
            if lates else "-"
        before = sum(1 for t in group if t.exited_before_kill is not None)
        killed_present = sum(1 for t in group if t.exited_before_kill is None and any(lk.present for lk in t.looks))
        print(f"| {op} | {condition} | {len(group)} | {before} | " + " | ".join(cells) +
              f" | {killed_present} | {len(lates)} | {latest} |")
    wrapped = [t for t in trials if t.op == "hold-wrapped"]
    if wrapped:
        print("\nhold-wrapped: Outcome result x effect at +10 s")
        counts: Dict[Tuple[str, str, str], int] = {}
        for t in wrapped:
            eff = {True: "present", False: "absent", None: "gone"}[t.looks[-1].present]
            key = (t.condition, t.result, eff)
            counts[key] = counts.get(key, 0) + 1
        for (condition, result, eff), n in sorted(counts.items()):
            print(f"  {condition:5} result={result:9} effect={eff:8} {n}")
    print("\nkill moments after the spawn began (all; those killed whose effect came anyway):")
    for (op, cond), g in by.items():
        applied = [t.kill_ms for t in g if t.exited_before_kill is None and any(lk.present for lk in t.looks)]
        also = f"; killed yet present {min(applied):.2f}-{max(applied):.2f} ms" if applied else ""
        print(f"  {op}/{cond}: {min(t.kill_ms for t in g):.2f}-{max(t.kill_ms for t in g):.2f} ms{also}")
    print("\nlooks, real seconds after the kill (median / max of each planned time):")
    for (op, cond), g in by.items():
        cells = []
        for i, planned in enumerate(LOOKS):
            starts = [t.looks[i].started for t in g if len(t.looks) > i]
            cells.append(f"+{planned:g}: {statistics.median(starts):.3f}/{max(starts):.3f}")
        print(f"  {op}/{cond}: " + ", ".join(cells))


def load(paths: List[str]) -> List[Trial]:
    """The trials of earlier runs' ``--json`` files."""
    trials: List[Trial] = []
    for path in paths:
        with open(path, encoding="utf-8") as src:
            for raw in json.load(src)["trials"]:
                looks = [Look(**lk) for lk in raw.pop("looks")]
                trials.append(Trial(**raw, looks=looks))
    return trials


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100, help="kills per op per condition (default 100)")
    parser.add_argument("--conditions", default="idle,busy", help="idle, busy or both (default idle,busy)")
    parser.add_argument("--ops", default="hold,hold-wrapped,requeue", help="default hold,hold-wrapped,requeue")
    parser.add_argument("--busy-loops", type=int, default=2, help="background hold/release loops (default 2)")
    parser.add_argument("--busy-jobs", type=int, default=1000, help="pending jobs per busy loop (default 1000)")
    parser.add_argument("--running", type=int, default=4, help="running jobs at a time for requeue (default 4)")
    parser.add_argument("--seed", type=int, default=None, help="seed for the kill moments")
    parser.add_argument("--json", default=None, help="also write every trial to this file")
    parser.add_argument("--report", nargs="+", metavar="JSON", default=None,
                        help="print the tables of earlier runs' --json files together; runs nothing")
    args = parser.parse_args(argv)
    if args.report:
        table(load(args.report))
        return 0
    ops = [o for o in args.ops.split(",") if o]
    conditions = [c for c in args.conditions.split(",") if c]
    if not set(ops) <= set(EFFECT) or not set(conditions) <= {"idle", "busy"} or args.kills < 1:
        parser.error("unknown op or condition, or --kills below 1")
    if not 1 <= args.running <= 4:
        parser.error("--running must be 1-4 (the lab's 8 slots are shared)")
    reason = lab_available()
    if reason is not None:
        raise SystemExit(f"settle_delay: the lab is not usable: {reason}")
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    version = run_cmd([SCONTROL, "--version"]).stdout.strip()
    print(f"{version}, seed {seed}, looks at {', '.join(f'+{p:g}' for p in LOOKS)} s", flush=True)

    trials: List[Trial] = []
    t_ms: Dict[str, float] = {}
    try:
        for asked in conditions:
            # The busy condition is named by its load, so that runs with other loads stay apart.
            condition = asked if asked == "idle" else f"busy {args.busy_loops}x{args.busy_jobs}"
            busy: List[subprocess.Popen[bytes]] = []
            try:
                if asked == "busy":
                    started = time.monotonic()
                    busy = start_busy(args.busy_loops, args.busy_jobs)
                    print(f"busy: {args.busy_loops} loops x {args.busy_jobs} jobs "
                          f"({time.monotonic() - started:.0f} s to submit); {busy_rate()}", flush=True)
                t_ms.update({f"{op}/{condition}": ms for op, ms in windows(ops).items()})
                for op in ops:
                    started = time.monotonic()
                    if op == "requeue":
                        got = run_requeues(condition, args.kills, t_ms[f"{op}/{condition}"], args.running, rng)
                    else:
                        got = run_holds(op, condition, args.kills, t_ms[f"{op}/{condition}"], rng)
                    trials.extend(got)
                    print(f"{op}/{condition}: {len(got)} kills in {time.monotonic() - started:.0f} s, "
                          f"T = {t_ms[f'{op}/{condition}']:.2f} ms", flush=True)
                if busy:
                    print(f"busy at the end: {busy_rate()}", flush=True)
            finally:
                stop_busy(busy)
    finally:
        cleanup()
        if args.json:
            with open(args.json, "w", encoding="utf-8") as out:
                json.dump({"version": version, "seed": seed, "t_ms": t_ms, "args": vars(args),
                           "trials": [asdict(t) for t in trials]}, out, indent=1)
        table(trials)
    return 0


if __name__ == "__main__":
    sys.exit(main())
