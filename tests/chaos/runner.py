"""Playing a chaos schedule on the real lab, and writing its history (docs/testing.md §6).

Contract: ``Runner(schedule, directory).run()`` plays ``schedule`` (tests/chaos/schedule.py) against
the lab this process can reach (``contrib/lab/up``'s: a chroot's, or in CI the host's), writes the
history to ``directory/history.jsonl`` (tests/chaos/history.py) and returns its path.  It never
judges: the checker reads the history.

What it writes, as it happens:
- ``run``: the options, the seed, the settle delay, the start-up tolerance, Slurm's version;
- ``job``: each job the run made, its slot and kind (``schedule.SLOTS``);
- ``invoke`` / ``end``: every command and library call (op, job ids, key, retry, settle, timeout,
  argv, host; then exit status, its JSON rows, its stderr, a library call's exact deadline);
- ``call``: every scontrol call any of them made, from the run's scontrol wrapper (argv, start,
  end, exit, stderr), written at the end;
- ``fault`` / ``fault_end``: every fault (kind, target command, pid, when it began and ended), and
  the ones skipped, with why;
- ``observe``: the jobs' records (squeue -O: state, reason, Requeue, RestartCnt, PriorityLong),
  about once a second and after every command, with when the squeue ran;
- ``env``: what the lab's "users" did (a requeued job made to run again, a job cancelled or
  replaced);
- ``phase``, then the final sweeps (``invoke``/``end`` with phase ``final``), the final records
  (``observe`` with source ``final``) and the ledger as ``slurm-dsl history --json`` shows it
  (``ledger_dump``, ``ledger_object``, ``ledger_operation``).

Every scontrol call goes through a wrapper of its own per command (``--scontrol``; squeue beside
it), so a call is known by the command that made it, and the command's wrapper fault (a hung,
slow, dying or half-done call) hits its first call of one verb.  Commands run as ctl-a and ctl-b
(UTS namespaces) when the ledger is MariaDB: two controller hosts sharing one ledger.

SIGKILL of slurmctld restarts it with ``contrib/lab/up``; SIGKILL of MariaDB with
``contrib/lab/mariadb start``.  A takeover needs a primary/backup pair: with none up (``scontrol
ping`` names no backup) it is skipped with a note; with one, ``$SLURM_DSL_CHAOS_TAKEOVER`` (a
shell command) makes it, else ``scontrol takeover``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from tests import faketime, lab
from tests.chaos import schedule as sched
from tests.chaos.history import History

REPO = lab.REPO_ROOT
REAL_SCONTROL = shutil.which("scontrol") or "/usr/bin/scontrol"
REAL_SQUEUE = shutil.which("squeue") or "/usr/bin/squeue"
FIELDS = "JobID:|,ArrayJobID:|,ArrayTaskID:|,State:|,Requeue:|,RestartCnt:|,PriorityLong:|,Reason:|"
POLL = 1.0  # seconds between two looks at every job
MAX_LIVE = 5  # operation commands at once (a 2-core lab)
STARTUP_TOLERANCE = 2.0  # seconds a command may take to start before its deadline is computed
ARMED = 5.0  # seconds a fault on a script or an scontrol call waits for one to run
SAVED = 6.0  # seconds after which slurmctld has saved a change (SAVE_MAX_WAIT, 5 s, and a tick)
CLI = (sys.executable, "-m", "slurm_dsl")
CALLER = (sys.executable, "-m", "tests.chaos.caller")
# A lease outlasts its operation's deadline by the runner's kill grace, the guard margin and the
# slack (docs/contract.md §9.2); past that every lease of the run has lapsed.
LEASES_LAPSE = 1.0 + 1.5 + 30.0 + 3.0
HANDED_BACK = 35.0  # docs/testing.md §6.4: absent only once the controller in control has been so this long
UNANSWERED_WAIT = 30.0 + 10.0  # §13.6: CONTROL_TIMEOUT plus MessageTimeout, before an unanswered call's absent
SLEEP_JOB = ("--no-requeue", "--time=10", "--wrap", "sleep 600")
MAX_OFFSET = 300.0  # seconds a stepped clock is kept within, either way
SKEWED_FOR = 30.0  # seconds the ledger server runs on a clock off by a mariadb-skew fault
PURGE_WATCH = 75.0  # seconds a kill-after-purge fault looks for a purge (slurmctld purges once a minute)
FINISHED = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                      "BOOT_FAIL", "DEADLINE"})
# What another admin does to a job between slurm-dsl's calls (other-admin), through the run's
# wrapper so that the checker sees the call: the scontrol argv after the job is filled in.
ADMIN_CALLS = (("hold", "{job}"), ("release", "{job}"), ("requeue", "{job}"),
               ("update", "JobId={job}", "Requeue=1"), ("update", "JobId={job}", "Requeue=0"))

WRAPPER = r"""#!/bin/sh
# The chaos run's scontrol (tests/chaos/runner.py): each call is logged (S: its start and argv,
# E: its end and exit; its stderr kept in err/) for the checker, then made with the real scontrol;
# the first call of the command's fault verb gets its fault.  Its times are the real clock's,
# whatever clock the command that called it is on (a clock-step fault).
unset LD_PRELOAD
d=$CHAOS_DIR
id="$CHAOS_INV.$$"
real=@REAL@
verb=
case $1 in
  hold|release|requeue|requeuehold) verb=$1 ;;
  update) case " $* " in *" Requeue=1 "*) verb=update-1 ;; *" Requeue=0 "*) verb=update-0 ;; esac ;;
esac
action=
if [ -n "$verb" ] && [ "${CHAOS_FAULT%%:*}" = "$verb" ] && mkdir "$d/once/$CHAOS_INV" 2>/dev/null; then
  action=${CHAOS_FAULT#*:}
fi
if [ "$action" = half ]; then
  arg=$2 prefix=
  case $arg in JobId=*) prefix=JobId=; arg=${arg#JobId=} ;; esac
  case $arg in
    *,*)
      n=0; for i in $(printf '%s' "$arg" | tr ',' ' '); do n=$((n + 1)); done
      k=0 first=
      for i in $(printf '%s' "$arg" | tr ',' ' '); do
        k=$((k + 1)); if [ "$k" -le $((n / 2)) ]; then first="$first${first:+,}$i"; fi
      done
      v=$1; shift 2; set -- "$v" "$prefix$first" "$@" ;;
    *) action= ;;
  esac
fi
# A kill aimed at this wrapper may hit the subshell reading the time (it is this script too):
# read it again, so that no call goes unlogged.
t=$(date +%s.%N) || t=$(date +%s.%N)
printf 'S %s %s %s\n' "$id" "$t" "$*" >> "$d/calls.log"
case $action in
  hang) exec sleep 3600 ;;
  die-before) kill -KILL $$ ;;
  slow:*) sleep "${action#slow:}" ;;
esac
"$real" "$@" 2>"$d/err/$id"
rc=$?
t=$(date +%s.%N) || t=$(date +%s.%N)
printf 'E %s %s %s\n' "$id" "$t" "$rc" >> "$d/calls.log"
if [ "$action" = mark ]; then printf '%s\n' "$rc" > "$d/mark.$CHAOS_INV"; fi
case $action in
  die-after) kill -KILL $$ ;;
  hang-after|half) exec sleep 3600 ;;
esac
cat "$d/err/$id" >&2
exit "$rc"
"""
LOOKUP_WRAPPER = """#!/bin/sh
# The chaos run's squeue (or slurm-dsl-jobinfo): logged (L: when the command started it: its
# deadline was set before), then the real one, after the command's delay (a slow lookup).
unset LD_PRELOAD
printf 'L %s %s\\n' "$CHAOS_INV.$$" "$(date +%s.%N)" >> "$CHAOS_DIR/calls.log"
if [ -n "$CHAOS_SQUEUE_SLOW" ]; then sleep "$CHAOS_SQUEUE_SLOW"; fi
exec @REAL@ "$@"
"""
SHIM = """#!/bin/sh
export CHAOS_DIR={dir} CHAOS_INV={inv} CHAOS_FAULT={fault} CHAOS_SQUEUE_SLOW={slow}
exec {target} "$@"
"""


def quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


@dataclass
class Live:
    id: str
    kind: str  # cli, library, sweep
    op: str
    proc: subprocess.Popen[str]
    start: float
    timeout: float
    jobs: Tuple[str, ...]
    number: Optional[int] = None
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class Record:
    state: str
    reason: str
    requeue: int
    restarts: int
    priority: int
    array_job: str
    array_task: str


class Controller:
    """The lab's slurmctld: killed (or stopped) and started again by the faults; ``environ``, what
    it is started with (a faked clock: clock-step)."""

    name = "single"

    def __init__(self) -> None:
        self.environ: Dict[str, str] = {}

    def setup(self) -> None:
        """Nothing: contrib/lab/up brought it up."""

    def kill(self, sig: int) -> Dict[str, Any]:
        """Bring the controller in control down with ``sig`` (SIGKILL, or SIGTERM: a graceful stop
        that saves); what was done, for the history."""
        pid = lab.slurmctld_pid()
        if sig == signal.SIGTERM:
            lab.stop_slurmctld()
        else:
            os.kill(pid, sig)
        return {"pid": pid, "signal": signal.Signals(sig).name}

    def start(self) -> None:
        """Every controller running again (contrib/lab/up starts only what is dead)."""
        lab.start_slurmctld(timeout=60, environ=self.environ)

    def state_save_location(self) -> str:
        return "/var/spool/slurmctld"

    def takeover(self) -> Optional[List[str]]:
        """The argv that makes the backup take over, or None: no pair here."""
        ping = lab.run_cmd([REAL_SCONTROL, "ping"], timeout=15).stdout
        if "(backup)" not in ping or ping.count(" is UP") < 2:
            return None
        command = os.environ.get("SLURM_DSL_CHAOS_TAKEOVER", "")
        return ["sh", "-c", command] if command else [REAL_SCONTROL, "takeover"]


class Pair(Controller):
    """The primary/backup pair of contrib/lab/pair (its SLURM_CONF for this process and every
    command): ctl-a, the primary, is the one killed, stopped or taken over from, and started again
    by the same fault (a hand-back once ctl-b is in control), so ctl-a is in control between faults."""

    name = "pair"
    SCRIPT = REPO / "contrib" / "lab" / "pair"
    CONF = "/etc/slurm-pair/slurm.conf"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(self.SCRIPT), *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=240, check=False)
        if done.returncode != 0:
            raise lab.LabError(f"{self.SCRIPT} {' '.join(args)} exited {done.returncode}: {done.stderr[-1000:]}")
        return done

    def setup(self) -> None:
        if not self.SCRIPT.exists():
            raise lab.LabError(f"--pair: no {self.SCRIPT} in this checkout")
        self.run("up")
        os.environ["SLURM_CONF"] = self.CONF  # lab.run_cmd, sbatch, squeue and every command from now on

    def kill(self, sig: int) -> Dict[str, Any]:
        self.run("kill", "ctl-a", signal.Signals(sig).name.removeprefix("SIG"))
        return {"controller": "ctl-a", "signal": signal.Signals(sig).name}

    def start(self) -> None:
        """Both controllers running (a hand-back takes ~28.5 s on 24.11), and the pair usable."""
        for name in ("ctl-a", "ctl-b"):
            self.run("start", name)
        deadline = time.time() + 90
        while (lab.lab_available() is not None or "is DOWN" in lab.run_cmd([REAL_SCONTROL, "ping"]).stdout) \
                and time.time() < deadline:
            time.sleep(0.5)

    def takeover(self) -> Optional[List[str]]:
        command = os.environ.get("SLURM_DSL_CHAOS_TAKEOVER", "")
        return ["sh", "-c", command] if command else [REAL_SCONTROL, "takeover"]

    def state_save_location(self) -> str:
        return "/var/spool/slurm-pair/state"


class Runner:
    def __init__(self, schedule: sched.Schedule, directory: Path, *, settle_delay: float = 2.0,
                 keep: bool = False, pair: bool = False, log: Callable[[str], None] = print) -> None:
        self.schedule = schedule
        self.options = schedule.options
        self.dir = directory
        self.settle_delay = settle_delay
        self.keep = keep
        self.controller = Pair() if pair else Controller()
        self.log = log
        self.history = History(directory / "history.jsonl")
        self.rng = random.Random(self.options.seed ^ 0x5EED)  # only for choices the schedule left open
        self.lock = threading.Lock()
        self.daemons = threading.Lock()  # one slurmctld or MariaDB fault at a time
        self.gate = threading.Event()  # closed: nothing new starts (a quiet window for slurmctld-kill-after-ack)
        self.gate.set()
        self.stopping = threading.Event()
        self.live: Dict[str, Live] = {}
        self.by_number: Dict[int, Live] = {}
        self.fault_threads: List[threading.Thread] = []
        self.started: List[Live] = []  # every operation command or call started
        self.stopped: Dict[str, int] = {}  # fault id -> pid, stopped and not yet continued
        self.slots: Dict[int, str] = {}  # slot -> its job now
        self.known: Dict[str, float] = {}  # job -> when sbatch returned
        self.names: Dict[str, str] = {}  # job -> its name, its own (not an array's)
        self.latest: Dict[str, Record] = {}
        self.kicked: set[Tuple[str, int]] = set()
        self.counter = 0
        self.ledger = ""
        self.database: Optional[str] = None
        self.mariadb: Any = None
        self.jobinfo = ""
        self.last_controller_event = 0.0
        self.t0 = 0.0
        self.preload = ""  # LD_PRELOAD of a process on a stepped clock ("": no clock-step faults)
        self.clocks: Dict[str, Path] = {}  # clock -> its libfaketime control file: slurmctld, or a host
        self.offsets: Dict[str, float] = {}
        # How far ahead of the real clock the ledger's clock ever stood (clock-step on a SQLite
        # ledger's command clocks, mariadb-skew on the server): the times it wrote then (an
        # operation's ends_by, a lease's expiry) lie that far ahead, and the quiet end waits it out.
        self.ledger_ahead = 0.0
        self.saves: Optional[Path] = None  # the StateSaveLocation as the commands see it (saves-stall)
        self.saves_server: Optional[subprocess.Popen[bytes]] = None

    # -- the whole run ---------------------------------------------------------------------------

    def run(self) -> Path:
        try:
            self.setup()
            self.play()
            self.quiet()
        finally:
            self.stopping.set()
            self.continue_all()
            self.collect_calls()
            self.history.close()
            self.cleanup()
        return self.history.path

    def setup(self) -> None:
        self.controller.setup()
        reason = lab.lab_available()
        if reason is not None:
            raise lab.LabError(f"the lab is not usable: {reason} (contrib/lab/up)")
        for sub in ("bin", "inv", "err", "once", "ledger"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir / "ledger", 0o700)
        (self.dir / "calls.log").touch()
        self.set_up_clocks()
        self.set_up_saves()
        self.write_tool("chaos-scontrol", WRAPPER.replace("@REAL@", quote(REAL_SCONTROL)))
        self.write_tool("chaos-squeue", LOOKUP_WRAPPER.replace("@REAL@", quote(REAL_SQUEUE)))
        if self.options.ledger == "mariadb":
            from tests.ledger_backends import MariaDbServer

            server, why = MariaDbServer.find()
            if server is None:
                raise lab.LabError(f"a MariaDB ledger was asked for: {why}")
            self.mariadb = server
            self.database = server.create()
            self.ledger = server.url(self.database)
        else:
            self.ledger = str(self.dir / "ledger" / "ledger.sqlite3")
        helper, why = lab.jobinfo_helper()
        if helper:
            self.write_tool("chaos-jobinfo", LOOKUP_WRAPPER.replace("@REAL@", quote(helper)))
        self.jobinfo = helper or ""
        version = lab.run_cmd([REAL_SCONTROL, "-V"]).stdout.strip()
        try:  # the commit the run tried, where git is there to say (a chroot's root has none)
            commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, check=False).stdout.strip() or None
        except OSError:
            commit = None
        o = self.options
        self.t0 = time.time()
        self.history.write(
            "run", t=self.t0, seed=o.seed, minutes=o.minutes, ledger=o.ledger, without=sorted(o.without),
            only_slots=sorted(o.only_slots) if o.only_slots is not None else None,
            only_faults=sorted(o.only_faults) if o.only_faults is not None else None,
            settle_delay=self.settle_delay, startup_tolerance=STARTUP_TOLERANCE, slurm=version, commit=commit,
            controller=self.controller.name,
            jobinfo=self.jobinfo or f"none: {why}", ledger_location=self.ledger.split("?")[0],
            events=len(self.schedule.events), clocks=sorted(self.clocks),
            saves=str(self.saves) if self.saves is not None else None)
        self.make_jobs()

    def set_up_clocks(self) -> None:
        """For clock-step and mariadb-skew: libfaketime and its fix (tests/faketime_monotonic.c),
        compiled here; for clock-step, a control file per clock (slurmctld, unless on the pair,
        and each host the commands run as), slurmctld restarted on its own."""
        wanted = {"clock-step", "mariadb-skew"} - self.options.without
        if not wanted:
            return
        fix = self.dir / "bin" / "faketime_monotonic.so"
        done = subprocess.run(["cc", "-std=c11", "-O2", "-shared", "-fPIC", "-o", str(fix), str(faketime.FIX), "-ldl"],
                              capture_output=True, text=True, check=False)
        if not os.path.exists(faketime.LIBRARY) or done.returncode != 0:
            self.history.write("note", t=time.time(), text=f"no stepped clocks: {faketime.LIBRARY} missing or the"
                               f" fix did not build ({done.stderr.strip()[:300]})")
            return
        self.preload = f"{fix} {faketime.LIBRARY}"
        if "clock-step" not in wanted:
            return
        hosts = ("ctl-a", "ctl-b") if self.options.ledger == "mariadb" else ("host",)
        names = (*hosts, *(("slurmctld",) if self.controller.name == "single" else ()))
        for name in names:
            self.clocks[name] = self.dir / f"clock.{name}"
            self.offsets[name] = 0.0
            self.step_to(name, 0.0)
        if "slurmctld" in self.clocks:
            self.controller.environ = self.stepped("slurmctld")
            lab.stop_slurmctld()
            self.controller.start()

    def stepped(self, clock: str) -> Dict[str, str]:
        """The environment of a process on ``clock`` (its monotonic clocks left alone, as a real
        step leaves them); none without clock-step faults."""
        if clock not in self.clocks:
            return {}
        env = faketime.on_file(self.preload, self.clocks[clock])
        del env["FAKETIME_NO_CACHE"]  # read again once a second, not at every clock read (slurmctld reads often)
        return {**env, "FAKETIME_CACHE_DURATION": "1"}

    def step_to(self, clock: str, offset: float) -> None:
        """``clock`` at ``offset`` seconds from the real one, its control file replaced whole."""
        path = self.clocks[clock]
        tmp = path.with_suffix(".new")
        tmp.write_text(f"{offset:+.0f}\n")
        os.replace(tmp, path)
        self.offsets[clock] = offset

    def set_up_saves(self) -> None:
        """For saves-stall: the StateSaveLocation seen by the commands through bindfs, whose
        server the fault stops (every read below it then waits, as on a file server that stopped
        answering)."""
        if "saves-stall" in self.options.without or shutil.which("bindfs") is None:
            if "saves-stall" not in self.options.without:
                self.history.write("note", t=time.time(), text="no stalled StateSaveLocation: no bindfs")
            return
        view = Path(tempfile.mkdtemp(prefix="slurm-dsl-chaos-saves-"))
        server = subprocess.Popen(["bindfs", "-f", "--no-allow-other", self.controller.state_save_location(),
                                   str(view)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while not os.path.ismount(view):
            if time.time() > deadline or server.poll() is not None:
                server.kill()
                self.history.write("note", t=time.time(), text="no stalled StateSaveLocation: bindfs did not mount")
                return
            time.sleep(0.05)
        self.saves, self.saves_server = view, server

    def write_tool(self, name: str, text: str) -> Path:
        path = self.dir / "bin" / name
        path.write_text(text)
        path.chmod(0o755)
        return path

    # -- jobs ------------------------------------------------------------------------------------

    def submit(self, kind: str, slot: Optional[int]) -> List[str]:
        """Submit a job of ``kind`` (an array: three tasks); the ids sbatch gave."""
        args: Tuple[str, ...]
        if kind in ("running", "array-task"):
            args = SLEEP_JOB
        elif kind == "array":
            args = ("--array=1-3", *SLEEP_JOB)
        elif kind in ("held_user", "held_admin", "cancelled"):
            args = ("--hold", *SLEEP_JOB)
        elif kind == "pending_begin":
            args = ("--begin=now+3600", *SLEEP_JOB)
        elif kind == "pending_dep":
            blocker = self.slots.get(0) or self.submit("running", None)[0]
            args = (f"--dependency=afterok:{blocker}", *SLEEP_JOB)
        elif kind == "completed":
            args = ("--no-requeue", "--wrap", "true")
        else:
            raise ValueError(kind)
        # Each job a name of its own (an array's tasks share the array's): what a selector names.
        name = f"chaos-{self.schedule.options.seed}-{len(self.known) + 1}"
        argv = ["sbatch", "--parsable", "-o", "/dev/null", f"--job-name={name}", *args]
        done = lab.run_cmd(argv, cwd=tempfile.gettempdir())
        if done.returncode != 0:
            raise lab.LabError(f"{' '.join(argv)}: {done.stderr.strip()}")
        job = done.stdout.strip().split(";")[0]
        if job in self.known:
            # slurmctld lost jobs in a crash (docs/testing.md §6.4) and gives their ids again: from
            # here on the id names another job.
            self.history.write("env", t=time.time(), kind="reused", job=job)
        if kind not in ("array", "array-task"):
            self.names[job] = name
        if kind == "held_admin":
            lab.run_cmd([REAL_SCONTROL, "hold", job])
        elif kind == "cancelled":
            lab.run_cmd(["scancel", job])
        self.known[job] = time.time()
        if kind != "array":
            self.history.write("job", t=time.time(), job=job, slot=slot, kind=kind)
        return [job]

    def make_jobs(self) -> None:
        """A job in every slot, in the state its kind says (waited for, up to a minute)."""
        for slot, kind in enumerate(sched.SLOTS):
            if kind in ("array-task", "array-master"):
                continue
            self.slots[slot] = self.submit(kind, slot)[0]
        (array,) = self.submit("array", None)
        tasks = [i for i, kind in enumerate(sched.SLOTS) if kind == "array-task"]
        deadline = time.time() + 60
        while time.time() < deadline:
            records = self.squeue()[1] or {}
            members = {j: r for j, rs in records.items() for r in rs if r.array_job == array}
            if len(members) == 3 and all(r.state == "RUNNING" for r in members.values()):
                break
            time.sleep(0.5)
        else:
            raise lab.LabError(f"array {array}: its three tasks did not all run within 60 s: {members}")
        others = sorted(j for j in members if j != array)
        for slot, job in zip(tasks, others):
            self.slots[slot] = job
            self.known[job] = time.time()
            self.history.write("job", t=time.time(), job=job, slot=slot, kind="array-task", array_job=array)
        self.slots[sched.MASTER] = array
        self.history.write("job", t=time.time(), job=array, slot=sched.MASTER, kind="array-master", array_job=array)
        want = {"running": "RUNNING", "held_user": "JobHeldUser", "held_admin": "JobHeldAdmin",
                "pending_begin": "BeginTime", "pending_dep": "Dependency", "completed": "COMPLETED",
                "cancelled": "CANCELLED"}
        deadline = time.time() + 60
        while time.time() < deadline:
            records = self.squeue()[1] or {}
            missing = [(s, j) for s, j in self.slots.items() if sched.SLOTS[s] in want
                       and not any(want[sched.SLOTS[s]] in (r.state, r.reason) for r in records.get(j, []))]
            if not missing:
                break
            time.sleep(0.5)
        else:
            self.history.write("note", t=time.time(), text=f"jobs not yet in their states after 60 s: {missing}")
        self.look("setup")
        # slurmctld saves at most once per 5 s (docs/testing.md §6.4): the jobs are on its disk
        # before the first crash can come.
        time.sleep(SAVED)

    # -- looking at the jobs ---------------------------------------------------------------------

    def squeue(self) -> Tuple[Optional[str], Optional[Dict[str, List[Record]]]]:
        """Every job's record (squeue -O, one line per task: docs/slurm-behaviour.md §9): (None,
        records) or (why, None)."""
        argv = [REAL_SQUEUE, "-h", "-a", "-t", "all", "-r", "-O", FIELDS]
        try:
            done = lab.run_cmd(argv, timeout=15)
        except lab.LabError as exc:
            return str(exc), None
        if done.returncode != 0:
            return (done.stderr.strip() or f"exit {done.returncode}")[:300], None
        records: Dict[str, List[Record]] = {}
        for line in done.stdout.splitlines():
            f = line.split("|")
            if len(f) != 9 or f[8] != "":
                return f"unexpected line {line!r}", None
            try:
                rec = Record(state=f[3], requeue=int(f[4]), restarts=int(f[5]), priority=int(f[6]), reason=f[7],
                             array_job=f[1], array_task=f[2])
            except ValueError:
                return f"unexpected line {line!r}", None
            records.setdefault(f[0], []).append(rec)
        return None, records

    def look(self, source: str) -> Optional[Dict[str, List[Record]]]:
        """One look at every job the run knows, written as an ``observe`` line."""
        t0 = time.time()
        known = [j for j, at in self.known.items() if at <= t0]
        error, records = self.squeue()
        t1 = time.time()
        if records is None:
            self.history.write("observe", t0=t0, t1=t1, source=source, ok=False, error=error)
            return None
        jobs: Dict[str, Any] = {}
        for job in known:
            recs = records.get(job, [])
            if len(recs) != 1:
                jobs[job] = None if not recs else {"ambiguous": True}
                self.latest.pop(job, None)
            else:
                r = recs[0]
                jobs[job] = {"state": r.state, "reason": r.reason, "requeue": r.requeue, "restarts": r.restarts,
                             "priority": r.priority}
                self.latest[job] = r
        self.history.write("observe", t0=t0, t1=t1, source=source, ok=True, jobs=jobs)
        return records

    def poll(self) -> None:
        """About once a second: look at every job, and make a requeued job run again (once per
        requeue: ``scontrol update StartTime=now``, as a user in a hurry would), so that a second
        requeue of it would be accepted and seen in RestartCnt."""
        while not self.stopping.is_set():
            started = time.time()
            records = self.look("poll")
            if records is not None and self.gate.is_set():
                for job in list(self.known):
                    recs = records.get(job, [])
                    if len(recs) != 1:
                        continue
                    r = recs[0]
                    if (r.state == "PENDING" and r.reason == "BeginTime" and r.restarts > 0 and r.priority > 0
                            and (job, r.restarts) not in self.kicked):
                        self.kicked.add((job, r.restarts))
                        done = lab.run_cmd([REAL_SCONTROL, "update", f"JobId={job}", "StartTime=now"])
                        self.history.write("env", t=time.time(), kind="kick", job=job, exit=done.returncode)
            self.stopping.wait(max(0.0, POLL - (time.time() - started)))

    # -- commands --------------------------------------------------------------------------------

    def next_id(self, prefix: str) -> str:
        with self.lock:
            self.counter += 1
            return f"{prefix}{self.counter}"

    def shim(self, inv: str, fault: Optional[str], slow: float) -> Path:
        directory = self.dir / "inv" / inv
        directory.mkdir(parents=True, exist_ok=True)
        for name, target in (("scontrol", "chaos-scontrol"), ("squeue", "chaos-squeue"), ("jobinfo", "chaos-jobinfo")):
            path = directory / name
            path.write_text(SHIM.format(dir=quote(str(self.dir)), inv=quote(inv), fault=quote(fault or ""),
                                        slow=quote(f"{slow:g}" if slow else ""),
                                        target=quote(str(self.dir / "bin" / target))))
            path.chmod(0o755)
        return directory

    def start(self, *, kind: str, op: str, jobs: Sequence[str], host: str = "", timeout: float = 0.0,
              key: Optional[str] = None, retry: int = 0, settle: bool = False, one_by_one: bool = False,
              parallel: int = 1, fault: Optional[str] = None, squeue_only: bool = False, squeue_slow: float = 0.0,
              number: Optional[int] = None, episode: Optional[int] = None, phase: str = "run",
              prefix: str = "i") -> Live:
        inv = self.next_id(prefix)
        bin_dir = self.shim(inv, fault, squeue_slow)
        common = ["--ledger", self.ledger, "--scontrol", str(bin_dir / "scontrol"),
                  "--settle-delay", f"{self.settle_delay:g}"]
        argv: List[str]
        select = False
        if kind == "sweep":
            argv = [*CLI, "sweep", "--json", *common]
        else:
            extra: List[str] = []
            if key:
                extra += ["--key", key]
            if retry:
                extra += ["--retry", str(retry)]
            if settle:
                extra += ["--settle"]
            if one_by_one:
                extra += ["--one-by-one", "--parallel", str(parallel)]
            if kind == "cli":
                if (number or 0) % 3 == 1:  # a third of them say why (docs/contract.md §10.4)
                    extra += ["--reason", f"chaos {inv}: why it ran"]
                # A quarter of the plain bulk ones name their jobs by selector (docs/contract.md §10.3):
                # those with a name of their own (an array's tasks share the array's: left out).
                named = [j for j in jobs if j in self.names]
                select = len(jobs) > 1 and not (key or retry or settle) and (number or 0) % 4 == 3 and bool(named)
                if select:
                    jobs = named
                target = ["--name", ",".join(self.names[j] for j in jobs)] if select else list(jobs)
                argv = [*CLI, op, *target, "--timeout", f"{timeout:g}", "--json", *common, *extra]
            else:
                argv = [*CALLER, op, *jobs, "--timeout", f"{timeout:g}", *common, *extra]
        env = dict(os.environ, SLURM_DSL_SQUEUE=str(bin_dir / "squeue"),
                   SLURM_DSL_JOBINFO="" if squeue_only or not self.jobinfo else str(bin_dir / "jobinfo"),
                   **self.stepped(host or "host"))
        if self.saves is not None:
            env["SLURM_DSL_STATE_SAVE_LOCATION"] = str(self.saves)
        command = list(argv)
        if host:
            command = ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', host, *command]
        t = time.time()
        self.history.write("invoke", t=t, id=inv, kind=kind, op=op, jobs=list(jobs), select=select, host=host, key=key,
                           retry=retry, settle=settle, timeout=timeout if kind != "sweep" else None,
                           one_by_one=one_by_one, parallel=parallel,
                           argv=argv, fault=fault, squeue_only=squeue_only, squeue_slow=squeue_slow,
                           number=number, episode=episode, phase=phase)
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env, cwd=str(REPO), start_new_session=True)
        live = Live(inv, kind, op, proc, t, timeout, tuple(jobs), number)
        with self.lock:
            self.live[inv] = live
            if number is not None:
                self.by_number[number] = live
            if kind != "sweep":
                self.started.append(live)
        self.spawn(self.reap, live)
        return live

    def reap(self, live: Live) -> None:
        out, err = live.proc.communicate()
        t = time.time()
        rows: List[Any] = []
        other: List[str] = []
        deadline = None
        for line in out.splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                other.append(line[:300])
                continue
            if isinstance(value, dict) and value.get("kind") == "deadline":
                deadline = value.get("deadline")
            else:
                rows.append(value)
        self.history.write("end", t=t, id=live.id, exit=live.proc.returncode, rows=rows, stderr=err[-4000:],
                           stdout_other=other[:20], deadline=deadline)
        with self.lock:
            self.live.pop(live.id, None)
        live.done.set()
        if live.kind != "sweep" and not self.stopping.is_set():
            self.look(f"after {live.id}")

    def spawn(self, target: Callable[..., None], *args: Any) -> threading.Thread:
        thread = threading.Thread(target=self.guarded, args=(target, *args), daemon=True)
        thread.start()
        return thread

    def guarded(self, target: Callable[..., None], *args: Any) -> None:
        try:
            target(*args)
        except Exception as exc:  # a fault or command that could not be made is a note, not the end of the run
            self.history.write("note", t=time.time(), text=f"{getattr(target, '__name__', target)}: {exc!r}")

    def ops_live(self) -> List[Live]:
        with self.lock:
            return [x for x in self.live.values() if x.kind != "sweep"]

    # -- playing the schedule --------------------------------------------------------------------

    def play(self) -> None:
        self.history.write("phase", t=time.time(), name="schedule")
        self.spawn(self.poll)
        start = time.time()
        for event in self.schedule.events:
            while True:
                delay = start + event.t - time.time()
                if delay <= 0:
                    break
                time.sleep(min(delay, 0.2))
            if not isinstance(event, sched.Fault):
                self.gate.wait()
            if isinstance(event, sched.Invoke):
                self.invoke(event)
            elif isinstance(event, sched.Sweep):
                with self.lock:
                    sweeping = sum(1 for x in self.live.values() if x.kind == "sweep")
                if sweeping < 2:
                    self.start(kind="sweep", op="sweep", jobs=(), host=event.host, prefix="s")
            elif isinstance(event, sched.Env):
                self.spawn(self.env, event)
            else:
                thread = self.spawn(self.fault, event)
                with self.lock:
                    self.fault_threads.append(thread)

    def invoke(self, e: sched.Invoke) -> None:
        if len(self.ops_live()) >= MAX_LIVE:
            self.history.write("note", t=time.time(), text=f"operation {e.number} not started: {MAX_LIVE} running")
            return
        jobs = [self.slots[s] for s in e.slots if s in self.slots]
        self.start(kind=e.caller, op=e.op, jobs=jobs, host=e.host, timeout=e.timeout, key=e.key, retry=e.retry,
                   settle=e.settle, one_by_one=e.one_by_one, parallel=e.parallel, fault=e.fault,
                   squeue_only=e.squeue_only, squeue_slow=e.squeue_slow, number=e.number, episode=e.episode,
                   prefix="o")

    def env(self, e: sched.Env) -> None:
        job = self.slots.get(e.slot)
        if job is None:
            return
        if e.kind == "cancel":
            done = lab.run_cmd(["scancel", job])
            self.history.write("env", t=time.time(), kind="cancel", job=job, exit=done.returncode)
        else:
            self.replace(e.slot, "replace")

    def replace(self, slot: int, why: str) -> None:
        """A fresh job in ``slot``; the old one is cancelled (its CPU is the new one's), unless it is
        retired to be looked at in the end as it is."""
        kind = sched.SLOTS[slot]
        old = self.slots.get(slot)
        if old is not None and why == "replace":
            done = lab.run_cmd(["scancel", old])
            self.history.write("env", t=time.time(), kind="cancel", job=old, exit=done.returncode)
        (job,) = self.submit("running" if kind == "array-task" else kind, slot)
        self.slots[slot] = job
        self.history.write("env", t=time.time(), kind=why, job=job, replaces=old, slot=slot)

    # -- faults ----------------------------------------------------------------------------------

    def fault(self, e: sched.Fault) -> None:
        target, _, how = e.kind.partition("-")
        if e.kind in ("cli-kill", "cli-stop"):
            self.on_command(e, self.ops_live(), "command", how == "stop")
        elif e.kind == "sweep-kill":
            with self.lock:
                sweeps = [x for x in self.live.values() if x.kind == "sweep"]
            self.on_command(e, sweeps, "sweep", False)
        elif e.kind in ("script-kill", "script-stop", "scontrol-kill", "scontrol-stop"):
            self.fault_process(e, target, how == "stop")
        else:
            getattr(self, "fault_" + e.kind.replace("-", "_"))(e)

    def skip(self, e: sched.Fault, why: str) -> None:
        self.history.write("fault", t=time.time(), id=f"f{e.number}", kind=e.kind, skipped=True, note=why)

    def target(self, e: sched.Fault, pool: List[Live]) -> Optional[Live]:
        if e.target is not None:
            with self.lock:
                live = self.by_number.get(e.target)
            return live if live is not None and live.id in self.live else None
        return pool[int(e.pick * len(pool))] if pool else None

    def signal_process(self, e: sched.Fault, pid: int, inv: Optional[str], what: str, stop: bool) -> None:
        fid = f"f{e.number}"
        try:
            os.kill(pid, signal.SIGSTOP if stop else signal.SIGKILL)
        except ProcessLookupError:
            self.skip(e, f"{what} {pid} ended first")
            return
        self.history.write("fault", t=time.time(), id=fid, kind=e.kind, target=inv, pid=pid, process=what,
                           seconds=e.seconds if stop else None)
        if not stop:
            return
        with self.lock:
            self.stopped[fid] = pid
        self.stopping.wait(e.seconds)
        self.resume(fid)

    def resume(self, fid: str) -> None:
        with self.lock:
            pid = self.stopped.pop(fid, None)
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        self.history.write("fault_end", t=time.time(), id=fid)

    def continue_all(self) -> None:
        with self.lock:
            fids = list(self.stopped)
        for fid in fids:
            self.resume(fid)

    def on_command(self, e: sched.Fault, pool: List[Live], what: str, stop: bool) -> None:
        live = self.target(e, pool)
        if live is None:
            self.skip(e, f"no {what} running")
            return
        self.signal_process(e, live.proc.pid, live.id, what, stop)

    def children(self, what: str) -> List[Tuple[int, str]]:
        """(pid, command id) of every script (``/bin/sh -s``), or every scontrol (the run's wrapper,
        which is the commands' scontrol, or the real one under it), under a running command or sweep."""
        with self.lock:
            roots = {x.proc.pid: x.id for x in self.live.values()}
        parent: Dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
        real = os.path.realpath(REAL_SCONTROL)
        wrapper = str(self.dir / "bin" / "chaos-scontrol").encode()
        found: List[Tuple[int, str]] = []
        for pid in sorted(parent):
            owner, up = None, parent.get(pid)
            for _ in range(8):
                if up is None:
                    break
                if up in roots:
                    owner = roots[up]
                    break
                up = parent.get(up)
            if owner is None:
                continue
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if what == "script":
                    if argv[:2] == [b"/bin/sh", b"-s"] and parent[pid] in roots:
                        found.append((pid, owner))
                elif wrapper in argv[:2] or os.path.realpath(f"/proc/{pid}/exe") == real:
                    found.append((pid, owner))
        return found

    def fault_process(self, e: sched.Fault, what: str, stop: bool) -> None:
        """A script or scontrol call lasts milliseconds: look for one for up to ``ARMED`` seconds."""
        deadline = time.time() + ARMED
        while True:
            pool = self.children(what)
            if pool or time.time() >= deadline or self.stopping.is_set():
                break
            time.sleep(0.01)
        if not pool:
            self.skip(e, f"no {what} running within {ARMED:g} s")
            return
        pid, owner = pool[int(e.pick * len(pool))]
        self.signal_process(e, pid, owner, what, stop)

    @contextlib.contextmanager
    def alone(self, e: sched.Fault) -> Iterator[bool]:
        """Whether this slurmctld or MariaDB fault may go ahead: one at a time (skipped otherwise)."""
        if not self.daemons.acquire(blocking=False):
            self.skip(e, "another slurmctld or MariaDB fault is under way")
            yield False
            return
        try:
            yield True
        finally:
            self.daemons.release()

    def controller_event(self, e: sched.Fault, how: Callable[[], Dict[str, Any]], restart: float) -> None:
        """One fault on slurmctld: ``how`` brings it down (and says what it did); then it is
        started again ``restart`` seconds later."""
        fid = f"f{e.number}"
        fields = how()
        self.last_controller_event = time.time()
        self.history.write("fault", t=self.last_controller_event, id=fid, kind=e.kind, **fields)
        time.sleep(restart)
        try:
            self.controller.start()
        finally:
            self.last_controller_event = time.time()
            self.history.write("fault_end", t=self.last_controller_event, id=fid)

    def fault_slurmctld_kill(self, e: sched.Fault) -> None:
        with self.alone(e) as go:
            if go:
                self.controller_event(e, lambda: self.controller.kill(signal.SIGKILL), e.seconds)

    def fault_slurmctld_restart(self, e: sched.Fault) -> None:
        with self.alone(e) as go:
            if go:
                self.controller_event(e, lambda: self.controller.kill(signal.SIGTERM), e.seconds)

    def fault_slurmctld_kill_after_ack(self, e: sched.Fault) -> None:
        """docs/testing.md §6.4's window: a requeue of a running job after ~6 s with nothing
        saved (so its call 1 is written at once and its calls 2 and 3 wait for the next save),
        then SIGKILL of slurmctld ``seconds`` after its call 3 (Requeue=0) was acknowledged.  The
        job is left alone afterwards (its slot gets a new one), so the end shows what came back."""
        with self.alone(e) as go:
            slot = self.kill_after_ack(e) if go else None
        if slot is not None:
            self.replace(slot, "retire")

    def kill_after_ack(self, e: sched.Fault) -> Optional[int]:
        """The fault above, slurmctld's lock held; the slot whose job it requeued."""
        slot: Optional[int] = None
        try:
            self.gate.clear()
            time.sleep(6.0)
            running = [s for s, j in sorted(self.slots.items())
                       if sched.SLOTS[s] in ("running", "array-task") and j in self.latest
                       and self.latest[j].state == "RUNNING" and self.latest[j].requeue == 0]
            if not running:
                self.skip(e, "no running job at Requeue=0")
                return None
            slot = running[int(e.pick * len(running))]
            job = self.slots[slot]
            live = self.start(kind="cli", op="requeue", jobs=[job], timeout=10.0, fault="update-0:mark", prefix="d")
            mark = self.dir / f"mark.{live.id}"
            deadline = time.time() + 15
            while not mark.exists() and time.time() < deadline:
                time.sleep(0.005)
            if not mark.exists() or mark.read_text().strip() != "0":
                self.skip(e, f"{live.id}: no Requeue=0 acknowledged")
                return slot
            acked = mark.stat().st_mtime
            time.sleep(max(0.0, acked + e.seconds - time.time()))

            def kill() -> Dict[str, Any]:
                return {**self.controller.kill(signal.SIGKILL), "target": live.id, "job": job, "acked": acked}
            self.controller_event(e, kill, 0.5)
        finally:
            self.gate.set()
        return slot

    def fault_mariadb_kill(self, e: sched.Fault) -> None:
        if self.options.ledger != "mariadb":
            self.skip(e, "the ledger is SQLite")
            return
        fid = f"f{e.number}"
        with self.alone(e) as go:
            if not go:
                return
            pid = int(Path("/run/mysqld/mysqld.pid").read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
            self.history.write("fault", t=time.time(), id=fid, kind=e.kind, pid=pid)
            time.sleep(e.seconds)
            done = subprocess.run([str(REPO / "contrib" / "lab" / "mariadb"), "start"], capture_output=True,
                                  text=True, timeout=120, check=False)
            self.history.write("fault_end", t=time.time(), id=fid, exit=done.returncode,
                               stderr=done.stderr[-500:] if done.returncode else "")

    def fault_ledger_lock(self, e: sched.Fault) -> None:
        """Another writer holds the ledger's write lock for ``seconds``: SQLite's file lock, or on
        MariaDB the one row every writer locks first (docs/contract.md §9.1.1)."""
        fid = f"f{e.number}"
        if self.options.ledger == "sqlite":
            conn: Any = sqlite3.connect(self.ledger, timeout=1.0, isolation_level=None)
            statements = ["BEGIN IMMEDIATE"]
            failure: Any = sqlite3.Error
        else:
            import pymysql

            failure = pymysql.Error
            try:
                conn = pymysql.connect(read_default_file=self.mariadb.option_file, database=self.database,
                                       connect_timeout=3, autocommit=False)
            except pymysql.Error as exc:
                self.skip(e, f"could not connect: {exc}")
                return
            statements = ["SET SESSION innodb_lock_wait_timeout = 2", "START TRANSACTION",
                          "SELECT one FROM write_lock WHERE one = 1 FOR UPDATE"]
        try:
            cursor = conn.cursor()
            try:
                for statement in statements:
                    cursor.execute(statement)
            except failure as exc:
                self.skip(e, f"could not take the lock: {exc}")
                return
            self.history.write("fault", t=time.time(), id=fid, kind=e.kind, seconds=e.seconds)
            time.sleep(e.seconds)
            cursor.execute("ROLLBACK")
            self.history.write("fault_end", t=time.time(), id=fid)
        finally:
            conn.close()

    def fault_takeover(self, e: sched.Fault) -> None:
        """The backup takes over (``scontrol takeover``: the primary saves and exits), and the
        primary is started again ``seconds`` later: a hand-back."""
        argv = self.controller.takeover()
        if argv is None:
            self.skip(e, "no primary/backup pair up (scontrol ping names no backup; --pair runs on one)")
            return
        fid = f"f{e.number}"
        with self.alone(e) as go:
            if not go:
                return
            self.last_controller_event = time.time()
            self.history.write("fault", t=self.last_controller_event, id=fid, kind=e.kind, command=argv)
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
            time.sleep(e.seconds)
            try:
                self.controller.start()
            finally:
                self.last_controller_event = time.time()
                self.history.write("fault_end", t=self.last_controller_event, id=fid, exit=done.returncode,
                                   stderr=done.stderr[-500:])

    def fault_clock_step(self, e: sched.Fault) -> None:
        """A clock stepped ``seconds`` (at most ``MAX_OFFSET`` from the real one): which clock and
        which way from ``pick``; it stays there until the next step of it (the quiet end steps every
        one back)."""
        names = sorted(self.clocks)
        if not names:
            self.skip(e, "no stepped clocks (libfaketime or its fix missing, or left out)")
            return
        i = min(int(e.pick * 2 * len(names)), 2 * len(names) - 1)
        name, sign = names[i // 2], (-1.0 if i % 2 == 0 else 1.0)
        with self.lock:
            before = self.offsets[name]
            after = max(-MAX_OFFSET, min(MAX_OFFSET, before + sign * e.seconds))
            self.step_to(name, after)
            if self.options.ledger != "mariadb" and name != "slurmctld":
                self.ledger_ahead = max(self.ledger_ahead, after)
        fid = f"f{e.number}"
        self.history.write("fault", t=time.time(), id=fid, kind=e.kind, clock=name, step=after - before, offset=after)
        self.history.write("fault_end", t=time.time(), id=fid)

    def fault_mariadb_skew(self, e: sched.Fault) -> None:
        """The ledger server restarted on a clock ``seconds`` off (either way, from ``pick``), for
        ``SKEWED_FOR`` seconds, then restarted on the real one: each restart an outage."""
        if self.options.ledger != "mariadb":
            self.skip(e, "the ledger is SQLite")
            return
        if not self.preload:
            self.skip(e, "no libfaketime (or its fix did not build)")
            return
        offset = e.seconds if e.pick >= 0.5 else -e.seconds
        clock = faketime.offset(self.preload, f"{offset:+.0f}")
        self.ledger_ahead = max(self.ledger_ahead, offset)
        with self.alone(e) as go:
            if not go:
                return
            self.restart_mariadb(e, f"f{e.number}a", clock, offset)
        self.stopping.wait(SKEWED_FOR)
        with self.daemons:  # never left skewed: waits for another daemon fault under way to end
            self.restart_mariadb(e, f"f{e.number}b", {}, 0.0)

    def restart_mariadb(self, e: sched.Fault, fid: str, environ: Dict[str, str], offset: float) -> None:
        lab_mariadb = str(REPO / "contrib" / "lab" / "mariadb")
        self.history.write("fault", t=time.time(), id=fid, kind=e.kind, offset=offset)
        subprocess.run([lab_mariadb, "stop"], capture_output=True, text=True, timeout=120, check=False)
        done = subprocess.run([lab_mariadb, "start"], capture_output=True, text=True, timeout=120, check=False,
                              env=dict(os.environ, **environ))
        self.history.write("fault_end", t=time.time(), id=fid, exit=done.returncode,
                           stderr=done.stderr[-500:] if done.returncode else "")

    def fault_slurmctld_kill_after_purge(self, e: sched.Fault) -> None:
        """A finished job purged (gone from squeue), then slurmctld SIGKILLed ``seconds`` later,
        before its next save can hold the purge: the job comes back as it was (docs/contract.md
        §13.2).  Looks for a purge for up to ``PURGE_WATCH`` seconds."""
        deadline = time.time() + PURGE_WATCH
        finished: set[str] = set()
        purged: List[str] = []
        while not purged:
            if time.time() > deadline or self.stopping.is_set():
                self.skip(e, f"no finished job purged within {PURGE_WATCH:g} s")
                return
            _, records = self.squeue()
            if records is not None:
                purged = sorted(j for j in finished if j not in records)
                finished |= {j for j, recs in records.items()
                             if j in self.known and len(recs) == 1 and recs[0].state in FINISHED}
            time.sleep(0.2)
        with self.alone(e) as go:
            if go:
                time.sleep(e.seconds)
                self.controller_event(e, lambda: {**self.controller.kill(signal.SIGKILL), "purged": purged}, 0.5)

    def fault_saves_stall(self, e: sched.Fault) -> None:
        """The StateSaveLocation the commands read stops answering for ``seconds`` (its bindfs
        server stopped)."""
        if self.saves_server is None:
            self.skip(e, "no StateSaveLocation view (no bindfs)")
            return
        self.signal_process(e, self.saves_server.pid, None, "StateSaveLocation server", True)

    def fault_other_admin(self, e: sched.Fault) -> None:
        """Another admin's scontrol call on one of the run's jobs, between slurm-dsl's calls:
        which job and which call from ``pick`` (``ADMIN_CALLS``), through the run's wrapper (its
        command id an ``x``: no command of the run)."""
        jobs = [self.slots[s] for s in sorted(self.slots) if s != sched.MASTER]
        if not jobs:
            self.skip(e, "no job")
            return
        job = jobs[int(e.pick * len(jobs))]
        argv = [part.format(job=job) for part in ADMIN_CALLS[int(e.pick * 1_000_003) % len(ADMIN_CALLS)]]
        inv = self.next_id("x")
        env = dict(os.environ, CHAOS_DIR=str(self.dir), CHAOS_INV=inv, CHAOS_FAULT="", CHAOS_SQUEUE_SLOW="")
        t = time.time()
        done = subprocess.run([str(self.dir / "bin" / "chaos-scontrol"), *argv], env=env, capture_output=True,
                              text=True, timeout=60, check=False)
        self.history.write("fault", t=t, id=f"f{e.number}", kind=e.kind, target=inv, job=job, argv=argv,
                           exit=done.returncode)
        self.history.write("fault_end", t=time.time(), id=f"f{e.number}")

    # -- the end ---------------------------------------------------------------------------------

    def quiet(self) -> None:
        """The schedule is over: faults stop, everything runs again, every lease lapses, two sweeps
        past the settle delay, then the jobs' records and the ledger as they are."""
        self.history.write("phase", t=time.time(), name="quiet")
        self.gate.set()
        self.continue_all()
        with self.lock:
            for name in sorted(self.clocks):  # every clock stepped back to the real one
                self.step_to(name, 0.0)
        with self.lock:
            threads = list(self.fault_threads)
        for thread in threads:  # faults still under way (a restart, a lock) end first
            thread.join(timeout=180)
        self.continue_all()
        if lab.lab_available() is not None or self.controller.name == "pair":
            self.controller.start()
            self.last_controller_event = max(self.last_controller_event, time.time())
        if self.options.ledger == "mariadb":
            subprocess.run([str(REPO / "contrib" / "lab" / "mariadb"), "start"], capture_output=True, timeout=120,
                           check=False)
        with self.lock:
            running = list(self.live.values())
        for live in running:  # a sweep has no deadline of its own: its restores' are 15 s each
            bound = live.start + (live.timeout + 40 if live.kind != "sweep" else 300)
            if not live.done.wait(bound - time.time()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(live.proc.pid, signal.SIGKILL)
                self.history.write("note", t=time.time(), text=f"{live.id} still running long past its bound: killed")
        with self.lock:
            starts = [x.start + x.timeout for x in self.started]
        until = max([*starts, time.time()]) + LEASES_LAPSE
        until = max(until, self.last_controller_event + HANDED_BACK) + self.ledger_ahead
        self.history.write("phase", t=time.time(), name="waiting for leases", until=until)
        while time.time() < until:
            time.sleep(1.0)
        self.history.write("phase", t=time.time(), name="final sweeps")
        looked = 0
        for _ in range(4):
            sweep = self.start(kind="sweep", op="sweep", jobs=(), phase="final", prefix="f")
            sweep.done.wait(300)
            ended = self.last_end_line(sweep.id)
            if ended is not None and any(r.get("kind") == "summary" and r.get("lookup_error") is None
                                         for r in ended.get("rows", []) if isinstance(r, dict)):
                looked += 1
            if looked == 2:
                break
            # The final sweeps' host counts the settle delay from its first look (§13.7), and an
            # unknown whose controller did not answer waits 30 s more (core.settle Rule 13); on the
            # pair, absent waits until the controller in control has been so for 33 s, from two
            # heartbeats that far apart (core.durable Rule 7): the second sweep comes after both.
            time.sleep(max(self.settle_delay + UNANSWERED_WAIT, HANDED_BACK) + 1.0)
        self.stopping.set()
        for _ in range(30):
            if self.look("final") is not None:
                break
            time.sleep(1.0)
        self.dump_ledger()

    def last_end_line(self, inv: str) -> Optional[Dict[str, Any]]:
        with open(self.history.path, encoding="utf-8") as f:
            for text in reversed(f.readlines()):
                line = json.loads(text)
                if line["type"] == "end" and line["id"] == inv:
                    return dict(line)
        return None

    def dump_ledger(self) -> None:
        jobs = sorted(self.known, key=int)
        done = subprocess.run([*CLI, "history", *jobs, "--json", "--ledger", self.ledger], capture_output=True,
                              text=True, timeout=120, check=False, cwd=str(REPO))
        ok = done.returncode in (0, 11)
        self.history.write("ledger_dump", t=time.time(), ok=ok, exit=done.returncode, stderr=done.stderr[-2000:])
        if not ok:
            return
        for text in done.stdout.splitlines():
            value = json.loads(text)
            if value.get("kind") == "object":
                self.history.write("ledger_object", job=value["job_id"], bit=value.get("bit"), why=value.get("why"))
            elif value.get("kind") == "operation":
                self.history.write(
                    "ledger_operation", job=value["job_id"], id=value.get("id"), op=value.get("op"),
                    result=value.get("result"), key=value.get("key"), actor=value.get("actor"),
                    started_at=value.get("started_at_epoch"), finished_at=value.get("finished_at_epoch"),
                    requeue_bit=value.get("requeue_bit"), settlement=value.get("settlement"))

    def collect_calls(self) -> None:
        """The wrapper's log, as ``call`` lines."""
        calls: Dict[str, Dict[str, Any]] = {}
        path = self.dir / "calls.log"
        if not path.exists():
            return
        # A line whose time could not be read (its reader killed twice) is dated on the safe side:
        # a start by the last time before it, an end by the next one after it.
        last = self.t0
        undated: List[Dict[str, Any]] = []
        for text in path.read_text(errors="replace").splitlines():
            parts = text.split(" ", 3)
            if len(parts) < 3:
                continue
            kind, cid = parts[0], parts[1]
            dated = False
            with contextlib.suppress(ValueError):
                last, dated = float(parts[2]), True
                for ended in undated:
                    ended["t1"] = last
                undated = []
            with contextlib.suppress(ValueError, IndexError):
                if kind == "S":
                    calls[cid] = {"call": cid, "inv": cid.split(".")[0], "t0": last,
                                  "argv": parts[3].split(" ") if len(parts) > 3 else [], "t1": None, "exit": None}
                elif kind == "E" and cid in calls:
                    calls[cid]["t1"], calls[cid]["exit"] = last, int(parts[3])
                    if not dated:
                        undated.append(calls[cid])
                elif kind == "L":  # a lookup started: it writes nothing, but dates its command's deadline
                    calls[cid] = {"call": cid, "inv": cid.split(".")[0], "t0": float(parts[2]), "argv": ["lookup"],
                                  "t1": None, "exit": None}
        for ended in undated:
            ended["t1"] = time.time()
        for call in sorted(calls.values(), key=lambda c: c["t0"]):
            err = self.dir / "err" / call["call"]
            stderr = err.read_text(errors="replace")[:2000] if err.exists() else ""
            self.history.write("call", stderr=stderr, **call)
        self.history.write("phase", t=time.time(), name="calls", calls=len(calls))

    def cleanup(self) -> None:
        with contextlib.suppress(lab.LabError):
            lab.cancel(*self.known, within=30)
        if self.saves_server is not None and self.saves is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.saves_server.pid, signal.SIGCONT)
            subprocess.run(["umount", "-l", str(self.saves)], capture_output=True, check=False)
            self.saves_server.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.saves_server.wait(30)
            with contextlib.suppress(OSError):
                self.saves.rmdir()
        if self.controller.environ:  # slurmctld on the real clock again, its state saved first
            self.controller.environ = {}
            with contextlib.suppress(lab.LabError):
                lab.stop_slurmctld()
                self.controller.start()
        if self.database is not None and not self.keep:
            with contextlib.suppress(Exception):
                self.mariadb.drop(self.database)
