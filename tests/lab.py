"""Helpers for integration tests against the local Slurm lab (contrib/lab/up).

Strategy: drive real Slurm through its client commands (sbatch, squeue,
scontrol, scancel), each with a timeout, and synchronise only by polling an
observable condition (a job's state, a pid's existence), never by fixed sleeps.
A Slurm command that fails unexpectedly raises ``LabError`` with its stderr;
"the job is unknown" is a value (``None``), not an error, so that it stays
apart from "slurmctld could not be asked".

Jobs read via ``squeue -O`` with an explicit field list: unlike
``scontrol show job -o`` it prints no user-controlled text (JobName), so it
cannot be spoofed (docs/slurm-behaviour.md §9). Checked on Slurm 22.05.8:
``JobID`` is the raw id (an array task that has started has its own one; an
array that is still pending as a whole shows only its master id), ``State``
is the long form (``PENDING``), ``Requeue`` is ``0``/``1``, ``RestartCnt`` an
integer, ``PriorityLong`` the unshortened priority (0 while held), ``Reason``
is e.g. ``JobHeldUser``/``None``.

Root is needed for ``user=``, ``make_job("held_admin")`` and the slurmctld
stop/start helpers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

TEST_USER = "slurmdsl-alice"
"""A plain user that contrib/lab/up creates, to act as a non-owner of jobs."""

REPO_ROOT = Path(__file__).resolve().parents[1]
LAB_UP = REPO_ROOT / "contrib" / "lab" / "up"
SLURM_CONF = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
# The lab's own scontrol and squeue, the first on PATH as a site's: Debian's in /usr/bin, or
# /opt/slurm-25.11/bin in the lab built from source (docs/slurm-25.11.md §1).
SCONTROL = shutil.which("scontrol") or "/usr/bin/scontrol"
# An scontrol wrapper (``.format(log=, go=, at=)``, each a quoted path) that logs every call and
# holds a requeue's call (``requeue``) until the test's word (``go``) once it has said it is there
# (``at``): the test kills or starts slurmctld in between.
PAUSED = f"""#!/bin/sh
printf '%s\\n' "$*" >> {{log}}
if [ "$1" = requeue ] && [ ! -e {{go}} ]; then
    : > {{at}}
    i=0
    while [ ! -e {{go}} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
fi
exec {SCONTROL} "$@"
"""
SQUEUE = shutil.which("squeue") or "/usr/bin/squeue"

POLL_INTERVAL = 0.05
COMMAND_TIMEOUT = 30.0
# With slurmctld down, squeue/sinfo give up after 2 x (MessageTimeout - 1) s,
# 4 s with the lab's MessageTimeout=3 (docs/slurm-24.11-26.05.md §4, D4).
# "completing" is transient (a job's epilog is running) but the node is up and
# registered; a trailing "*" (not responding), "~" (powered off) etc. is not.
# "planned" (Slurm 23.02+): an idle node the backfill scheduler has planned for a pending job
# (sinfo(1)); it is up and answering like "idle", and 24.11 shows it while a test's job waits.
USABLE_NODE_STATES = frozenset({"idle", "mixed", "allocated", "completing", "planned"})
SQUEUE_FIELDS = "JobID:|,State:|,Requeue:|,RestartCnt:|,PriorityLong:|,Reason:|"
# Long enough for any test, bounded so that a leaked job ends by itself.
SLEEP_JOB: Tuple[str, ...] = ("--time=10", "--wrap", "sleep 600")


class LabError(RuntimeError):
    """A Slurm command or a lab daemon did not behave as the lab needs."""


# The slow live tests that are the same on every major run on one major each under
# ``contrib/test --majors`` (docs/testing.md §2, the time budget), chosen so that the majors'
# live parts end together; a plain ``contrib/test`` (no major named) runs them all.
ONE_MAJOR = {"chaos": "sid"}


def not_this_major(what: str) -> Optional[str]:
    """Why ``what`` (a key of ``ONE_MAJOR``) skips on this major, or None when it runs here."""
    major, where = os.environ.get("SLURM_DSL_TEST_MAJOR", ""), ONE_MAJOR[what]
    if major in ("", where):
        return None
    return f"{what} runs on one major, {where} (docs/testing.md §2: the same code on every major)"


def run_cmd(
    argv: Sequence[str], *, cwd: Optional[str] = None, timeout: float = COMMAND_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(argv),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabError(f"{' '.join(argv)}: {exc}") from exc


def _failed(argv: Sequence[str], proc: subprocess.CompletedProcess[str]) -> LabError:
    err = proc.stderr.strip() or proc.stdout.strip() or "(no output)"
    return LabError(f"{' '.join(argv)} exited {proc.returncode}: {err}")


# --- lab state ------------------------------------------------------------


def lab_available() -> Optional[str]:
    """None if slurmctld answers UP and a node is usable, else a one-line reason."""
    try:
        ping = run_cmd(["scontrol", "ping"], timeout=15)
    except LabError as exc:
        return f"scontrol ping failed: {exc}"
    if " is UP" not in ping.stdout:
        # Checked before sinfo, which would hang 4 s on a down controller.
        text = (ping.stdout.strip() or ping.stderr.strip()).splitlines()
        return f"slurmctld is not UP: {text[0] if text else 'no output'}"
    try:
        sinfo = run_cmd(["sinfo", "-h", "-N", "-o", "%T"], timeout=15)
    except LabError as exc:
        return f"sinfo failed: {exc}"
    states = [s.rstrip("+") for s in sinfo.stdout.split()]  # "allocated+": more flags follow
    if sinfo.returncode != 0 or not USABLE_NODE_STATES.intersection(states):
        shown = ", ".join(states) or sinfo.stderr.strip() or "none"
        return f"no usable node (states: {shown})"
    return None


# --- jobs -----------------------------------------------------------------

_submitted: List[str] = []


def submit(*sbatch_args: str, user: Optional[str] = None, cwd: Optional[str] = None) -> str:
    """Submit a batch job and return its id.

    Runs from the temp dir by default with ``-o /dev/null``, so no
    ``slurm-<id>.out`` lands in a work tree; the args may override ``-o``.
    ``user`` submits as that user (``runuser``, so the caller must be root).
    """
    argv: List[str] = ["sbatch", "--parsable", "-o", "/dev/null", *sbatch_args]
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    proc = run_cmd(argv, cwd=cwd if cwd is not None else tempfile.gettempdir())
    if proc.returncode != 0:
        raise _failed(argv, proc)
    job_id = proc.stdout.strip().split(";")[0]  # --parsable: "<id>[;<cluster>]"
    if not job_id.isdigit():
        raise LabError(f"{' '.join(argv)}: unexpected output {proc.stdout!r}")
    _submitted.append(job_id)
    return job_id


# The states in which a job still holds its share of the node's slots.
HOLDING_STATES = "RUNNING,COMPLETING,CONFIGURING,SUSPENDED"


def cancel(*job_ids: str, within: float = 60.0) -> None:
    """scancel the jobs (jobs that are already gone are fine), then wait, polling, until none of
    them holds a slot of the node: scancel only asks, and a job that is still completing would
    leave the next test fewer than the node's 8 slots.  Best effort: it stops waiting after
    ``within`` seconds, or when squeue cannot answer (the test that needs the slots says so)."""
    if not job_ids:
        return
    run_cmd(["scancel", *job_ids])
    argv = ["squeue", "-h", "-a", "-t", HOLDING_STATES, "-j", ",".join(job_ids), "-o", "%i"]
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        proc = run_cmd(argv)
        if proc.returncode != 0 or not proc.stdout.strip():
            return
        time.sleep(POLL_INTERVAL)


def cancel_left_over(within: float = 120.0) -> List[str]:
    """Cancel every job of the lab's users (root and TEST_USER) that an earlier run left,
    a chaos run killed mid-way say, and wait, polling, until none holds a slot: the tests
    count on the node's 8 slots and on no job starting behind their backs.  Returns the ids
    cancelled (the caller says so); best effort, like ``cancel``."""
    users = f"root,{TEST_USER}"
    proc = run_cmd(["squeue", "-h", "-a", "-u", users, "-o", "%i"])
    ids = proc.stdout.split() if proc.returncode == 0 else []
    if ids:
        cancel(*ids, within=within)
    return ids


def cancel_submitted() -> None:
    """Cancel every job submitted through ``submit`` since the last call."""
    ids = list(_submitted)
    _submitted.clear()
    cancel(*ids)


@dataclass(frozen=True)
class JobState:
    job_id: str
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
    reason: str  # None, JobHeldUser, JobHeldAdmin, Dependency, BeginTime, ...
    requeue: int  # the job's Requeue flag, 0 or 1
    restarts: int
    priority: int


def job_state(job_id: str) -> Optional[JobState]:
    """The job's current state, or None if slurmctld does not know the job.

    Raises LabError if squeue fails otherwise (e.g. slurmctld is down).
    """
    argv = ["squeue", "-h", "-a", "-t", "all", "-j", job_id, "-O", SQUEUE_FIELDS]
    proc = run_cmd(argv)
    if proc.returncode != 0:
        # A single unknown id: rc 1 and this text (docs/slurm-behaviour.md §9).
        if "Invalid job id specified" in proc.stderr:
            return None
        raise _failed(argv, proc)
    for line in proc.stdout.splitlines():
        fields = line.split("|")
        if len(fields) != 7 or fields[6] != "":
            raise LabError(f"{' '.join(argv)}: unexpected line {line!r}")
        if fields[0] != job_id:
            continue  # another task of the same array
        try:
            return JobState(
                job_id=fields[0],
                state=fields[1],
                requeue=int(fields[2]),
                restarts=int(fields[3]),
                priority=int(fields[4]),
                reason=fields[5],
            )
        except ValueError as exc:
            raise LabError(f"{' '.join(argv)}: unexpected line {line!r}") from exc
    return None


@dataclass(frozen=True)
class Expect:
    """A predicate on JobState for wait_for, with a readable repr for failures."""

    state: str
    reason: Optional[str] = None
    requeue: Optional[int] = None

    def __call__(self, js: JobState) -> bool:
        return (
            js.state == self.state
            and (self.reason is None or js.reason == self.reason)
            and (self.requeue is None or js.requeue == self.requeue)
        )


def wait_for(job_id: str, predicate: Callable[[JobState], bool], timeout: float = 30.0) -> JobState:
    """Poll the job every ~50 ms until predicate(state) holds; return that state.

    Raises AssertionError with the last state seen after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        js = job_state(job_id)
        if js is not None and predicate(js):
            return js
        if time.monotonic() >= deadline:
            raise AssertionError(f"job {job_id}: {predicate!r} not reached within {timeout:g} s; last state: {js!r}")
        time.sleep(POLL_INTERVAL)


# kind -> (sbatch args, state the job must reach). "held_admin" and "pending"
# need a step besides sbatch (see make_job).
JOB_KINDS: Dict[str, Tuple[Tuple[str, ...], Expect]] = {
    "held_user": (("--hold", *SLEEP_JOB), Expect("PENDING", "JobHeldUser")),
    "held_admin": (("--hold", *SLEEP_JOB), Expect("PENDING", "JobHeldAdmin")),
    "pending": (SLEEP_JOB, Expect("PENDING", "Dependency")),
    "running_rq0": (("--no-requeue", *SLEEP_JOB), Expect("RUNNING", requeue=0)),
    "running_rq1": (("--requeue", *SLEEP_JOB), Expect("RUNNING", requeue=1)),
    "completed": (("--wrap", "true"), Expect("COMPLETED")),
    "failed": (("--wrap", "exit 3"), Expect("FAILED")),
    "cancelled": (("--hold", *SLEEP_JOB), Expect("CANCELLED")),
}


def make_job(kind: str, *extra: str, user: Optional[str] = None) -> str:
    """Submit a fresh job and wait until it is in the state named by ``kind``.

    Kinds: held_user (sbatch --hold), held_admin (--hold, then scontrol hold),
    pending (not held: afterok on a running job), running_rq0 (--no-requeue),
    running_rq1 (--requeue), completed (true), failed (exit 3), cancelled
    (scancel of a held job). ``extra`` goes to sbatch, ``user`` submits as
    that user (the admin hold is still root's).
    """
    if kind not in JOB_KINDS:
        raise ValueError(f"unknown job kind {kind!r}; known: {', '.join(JOB_KINDS)}")
    args, expect = JOB_KINDS[kind]
    if kind == "pending":
        blocker = make_job("running_rq0", user=user)
        args = (f"--dependency=afterok:{blocker}", *args)
    job_id = submit(*extra, *args, user=user)
    if kind == "held_admin":
        check(["scontrol", "hold", job_id])
    elif kind == "cancelled":
        check(["scancel", job_id])
    wait_for(job_id, expect)
    return job_id


def check(argv: Sequence[str]) -> None:
    proc = run_cmd(argv)
    if proc.returncode != 0:
        raise _failed(argv, proc)


# --- slurmctld ------------------------------------------------------------


def _conf_value(key: str, default: str) -> str:
    """A key's value in slurm.conf (keys are case-insensitive), or default."""
    value = default
    try:
        text = SLURM_CONF.read_text()
    except OSError:
        return default
    for line in text.splitlines():
        name, sep, rest = line.split("#", 1)[0].partition("=")
        if sep and name.strip().lower() == key.lower() and rest.strip():
            value = rest.strip()
    return value


def _pid_running(pid: int, comm: str) -> bool:
    """pid exists, is not a zombie and runs ``comm`` (or ``comm``-wlm: Debian 13
    installs the daemons as slurmctld-wlm behind an alternatives symlink, and a
    24.x daemon that re-execs itself on reconfigure shows that name).

    A zombie counts as gone: where PID 1 does not reap (containers), a stopped
    daemon lingers as one."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        name = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return False
    return name in (comm, f"{comm}-wlm") and stat.rsplit(")", 1)[-1].split()[0] != "Z"


def slurmctld_pid() -> int:
    """The pid of the running slurmctld (from its pid file, checked in /proc)."""
    pidfile = Path(_conf_value("SlurmctldPidFile", "/var/run/slurmctld.pid"))
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError) as exc:
        raise LabError(f"no slurmctld pid in {pidfile}: {exc}") from exc
    if not _pid_running(pid, "slurmctld"):
        raise LabError(f"slurmctld (pid {pid} from {pidfile}) is not running")
    return pid


def stop_slurmctld(timeout: float = 30.0) -> None:
    """SIGTERM slurmctld and wait until its pid is gone.

    slurmctld saves its state for 1-3 s before exiting; RPCs sent in that
    window behave like the fully-down case only later (docs/lab.md §5.6),
    so callers get control back only once the process has exited.
    A SIGTERM is sent again every ``RESEND`` seconds: 24.11's slurmctld once logged
    "Terminate signal SIGTERM received" just after an allocation and then did nothing for
    four minutes, until a second SIGTERM made it save its state and exit.
    """
    pid = slurmctld_pid()
    os.kill(pid, signal.SIGTERM)
    start = time.monotonic()
    deadline, resend = start + timeout, start + RESEND
    while _pid_running(pid, "slurmctld"):
        now = time.monotonic()
        if now >= deadline:
            raise LabError(f"slurmctld (pid {pid}) still running {timeout:g} s after SIGTERM")
        if now >= resend:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            resend = now + RESEND
        time.sleep(POLL_INTERVAL)


RESEND = 5.0


@contextlib.contextmanager
def saving(every: float = 1.0) -> Iterator[None]:
    """slurmctld saving its job state while the block runs: a held job of the test's own has its
    comment changed every ``every`` seconds (each change makes the save thread write within a save
    window, 5 s), from a thread of the test, and is cancelled after.  An idle lab saves only when
    something changes (else every 300 s): a sweep's looks see two saves after what it would clear
    only while slurmctld goes on saving (docs/contract.md §13.2)."""
    saver = submit("--hold", *SLEEP_JOB)
    stop = threading.Event()

    def change() -> None:
        n = 0
        while not stop.wait(every):
            n += 1
            run_cmd(["scontrol", "update", f"JobId={saver}", f"Comment=save-{n}"])

    thread = threading.Thread(target=change, name="slurmctld saving", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        cancel(saver)


def kill_slurmctld(timeout: float = 30.0) -> None:
    """SIGKILL slurmctld (a crash: nothing saved on the way out) and wait until it is gone."""
    pid = slurmctld_pid()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while _pid_running(pid, "slurmctld"):
        if time.monotonic() >= deadline:
            raise LabError(f"slurmctld (pid {pid}) still running {timeout:g} s after SIGKILL")
        time.sleep(POLL_INTERVAL / 10)


def start_slurmctld(timeout: float = 30.0, environ: Optional[Mapping[str, str]] = None) -> None:
    """Start slurmctld (via contrib/lab/up, which starts only what is dead and
    records the pid for contrib/lab/down) and wait until the lab is usable; ``environ``: more
    of slurmctld's environment (a faked clock)."""
    env = dict(os.environ, **(environ or {}), SLURM_DSL_LAB_TIMEOUT=str(max(1, int(timeout))))
    try:
        proc = subprocess.run(
            [str(LAB_UP)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout + 30,  # up's own bound, plus its package check
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabError(f"{LAB_UP}: {exc}") from exc
    if proc.returncode != 0:
        raise LabError(f"{LAB_UP} exited {proc.returncode}: {proc.stderr.strip()}")
    reason = lab_available()
    if reason is not None:
        raise LabError(f"{LAB_UP} succeeded but the lab is not usable: {reason}")


# --- slurm-dsl-jobinfo --------------------------------------------------------

JOBINFO_SOURCE = REPO_ROOT / "contrib" / "jobinfo" / "jobinfo.c"
JOBINFO_BUILD = REPO_ROOT / "contrib" / "jobinfo" / "build"


def jobinfo_helper() -> Tuple[Optional[str], str]:
    """(path, "") of slurm-dsl-jobinfo built from this checkout against the lab's libslurm (once
    per source, kept in the temporary directory), or (None, why) when it cannot be built here
    (no C compiler, no libslurm-dev).  It is built into a directory the build itself makes, as
    the package's /usr/libexec/slurm-dsl on a fresh controller (issue 43)."""
    import hashlib

    digest = hashlib.sha256(JOBINFO_SOURCE.read_bytes() + JOBINFO_BUILD.read_bytes()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"slurm-dsl-jobinfo-{os.getuid()}-{digest}" / "slurm-dsl-jobinfo"
    if out.is_file() and os.access(out, os.X_OK):
        return str(out), ""
    proc = subprocess.run(
        [str(JOBINFO_BUILD), str(out)], capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0:
        return None, (proc.stderr.strip() or f"contrib/jobinfo/build exited {proc.returncode}")[-400:]
    return str(out), ""


def sweep_exited(done: subprocess.CompletedProcess[str], allowed: Sequence[int] = (0,)) -> None:
    """A ``sweep --json``'s exit status is one of ``allowed``, or 16 exactly when its summary says it
    recorded an acknowledged operation lost that its ``--redo-lost`` did not do again (docs/contract.md
    §13.4: once, never otherwise)."""
    import json

    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]  # a host's own lines too
    summary: Dict[str, object] = next((x for x in lines if x.get("kind") == "summary"), {})
    rows = [x.get("row") or {} for x in lines if x.get("kind") == "redo"]
    redone = sum(1 for r in rows if r.get("result") in ("ok", "bit_set") or r.get("effect") == "present")
    lost = int(summary.get("lost_written") or 0) > redone  # type: ignore[call-overload]
    said = (done.returncode, done.stdout, done.stderr)
    if lost:  # 16, unless something is left unsettled too (15 wins)
        assert done.returncode == 16 or (done.returncode == 15 and 15 in allowed), said
    else:
        assert done.returncode in allowed, said
