"""Helpers for live tests on the lab's primary/backup slurmctld pair (contrib/lab/pair).

Strategy: the pair is a second cluster beside the single-node lab, reached by setting
``SLURM_CONF`` to its slurm.conf (``env()``; tests/integration/test_pair_live.py sets it for a
whole test), so that tests/lab.py's helpers and slurm-dsl itself talk to it unchanged.  Which
controller is in control is read from the heartbeat file that the controller in control writes
into the shared StateSaveLocation every second (two big-endian 64-bit numbers: the time and its
SlurmctldHost index; src/slurmctld/heartbeat.c, the same from 22.05 to 26.05): ``scontrol ping``
cannot tell, since a backup in standby answers it UP as well.
Every wait polls an observable condition (the heartbeat, a pid, ``job_state``'s mtime) with a
bound, and a timeout fails with the controllers' state and the tails of their logs.

Root is needed: the pair's processes are recognised by the token in their environment, and
controllers are signalled by pid.  Measured figures: docs/lab.md §6.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from tests.lab import POLL_INTERVAL, REPO_ROOT, USABLE_NODE_STATES, LabError, _pid_running

PAIR = REPO_ROOT / "contrib" / "lab" / "pair"
CONF = Path("/etc/slurm-pair/slurm.conf")
RUN = Path("/run/slurm-pair")
STARTED = RUN / "started"
STATE_SAVE = Path("/var/spool/slurm-pair/state")
LOGS = Path("/var/log/slurm-pair")
BRIDGE = "slpair0"
HOSTS_TAG = "# slurm-dsl lab pair"
CONTROLLERS: Tuple[str, str] = ("ctl-a", "ctl-b")
"""In SlurmctldHost order: ctl-a is the primary, ctl-b the backup."""

HEARTBEAT_FRESH = 3.0
"""Seconds within which the controller in control has rewritten its heartbeat (it does so every
second with SlurmctldTimeout=5); an older one means that nobody is in control."""


def env() -> Dict[str, str]:
    """The environment of a client of the pair."""
    return dict(os.environ, SLURM_CONF=str(CONF))


def run_pair(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``contrib/lab/pair ARGS``, waited for; its output kept."""
    try:
        return subprocess.run([str(PAIR), *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabError(f"{PAIR} {' '.join(args)}: {exc}") from exc


def client(argv: List[str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """A Slurm client command against the pair, whatever ``SLURM_CONF`` the caller has."""
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env(),
                              timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabError(f"{' '.join(argv)}: {exc}") from exc


def _check(proc: subprocess.CompletedProcess[str], what: str) -> subprocess.CompletedProcess[str]:
    if proc.returncode != 0:
        raise LabError(f"{what} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}\n{tails()}")
    return proc


# --- what runs --------------------------------------------------------------


def token() -> Optional[str]:
    """The token that every process of the pair carries in its environment, if there is one."""
    try:
        return (RUN / "token").read_text().strip() or None
    except OSError:
        return None


def recorded_pid(name: str) -> Optional[int]:
    """The pid contrib/lab/pair recorded for ``name`` (holder-ctl-a, slurmctld-ctl-a, slurmd, ...)."""
    try:
        return int((STARTED / name).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def carries_token(pid: int, tok: Optional[str] = None) -> bool:
    tok = tok or token()
    if not tok:
        return False
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"SLURM_DSL_LAB_TOKEN={tok}".encode() in environ.split(b"\0")


def running(name: str, comm: str) -> Optional[int]:
    """The pid of the pair's ``name`` if it runs (comm ``comm``, the pair's token), else None."""
    pid = recorded_pid(name)
    if pid is None or not _pid_running(pid, comm) or not carries_token(pid):
        return None
    return pid


def controller_pid(name: str) -> Optional[int]:
    """The pid of controller ``name``'s slurmctld, or None if it is not running."""
    return running(f"slurmctld-{name}", "slurmctld")


def leftovers(tok: str) -> List[int]:
    """Every live process carrying the token ``tok`` (zombies count as gone)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and carries_token(int(entry.name), tok):
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[-1].split()[0] != "Z":
                found.append(int(entry.name))
    return found


def available() -> Optional[str]:
    """None if the pair is up here (its namespaces held, its slurmd and a controller running),
    else a one-line reason."""
    if os.geteuid() != 0:
        return "the pair's helpers need root"
    if not CONF.is_file():
        return f"no {CONF} (contrib/lab/pair up, in a network namespace of its own)"
    missing = [n for n, comm in (("holder-ctl-a", "sleep"), ("holder-ctl-b", "sleep"), ("slurmd", "slurmd"))
               if running(n, comm) is None]
    if missing:
        return f"{', '.join(missing)} not running (contrib/lab/pair up)"
    if all(controller_pid(c) is None for c in CONTROLLERS):
        return "neither controller runs (contrib/lab/pair up)"
    return None


# --- who is in control ------------------------------------------------------


def heartbeat() -> Optional[Tuple[float, str]]:
    """(time, controller) of the last heartbeat written into the StateSaveLocation, or None."""
    try:
        data = (STATE_SAVE / "heartbeat").read_bytes()
    except OSError:
        return None
    if len(data) != 16:
        return None
    when, index = struct.unpack(">QQ", data)
    if index >= len(CONTROLLERS):
        return None
    return float(when), CONTROLLERS[index]


def in_control() -> Optional[str]:
    """The controller in control now, or None (the one in control died, or none has taken over
    yet): the writer of a heartbeat younger than HEARTBEAT_FRESH."""
    beat = heartbeat()
    if beat is None or time.time() - beat[0] > HEARTBEAT_FRESH:
        return None
    return beat[1]


def ping() -> Dict[str, bool]:
    """Which controllers answer ``scontrol ping`` (UP), whether in control or in standby."""
    proc = client(["scontrol", "ping"])
    answer = {c: False for c in CONTROLLERS}
    for line in proc.stdout.splitlines():
        # "Slurmctld(primary) at ctl-a is UP" (22.05, 24.11, 26.05)
        words = line.split()
        if len(words) == 5 and words[0].startswith("Slurmctld(") and words[2] in answer and words[3] == "is":
            answer[words[2]] = words[4] == "UP"
    return answer


def state() -> str:
    """A line saying who is in control and which slurmctld runs, for failure messages."""
    pids = {c: controller_pid(c) for c in CONTROLLERS}
    return f"in control: {in_control()}; heartbeat: {heartbeat()}; slurmctld pids: {pids}"


def log(name: str) -> str:
    """Controller ``name``'s slurmctld log (``slurmd`` for slurmd's)."""
    path = LOGS / "slurmd.log" if name == "slurmd" else LOGS / name / "slurmctld.log"
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def tails(lines: int = 8) -> str:
    """The last lines of both controllers' logs."""
    out = []
    for c in CONTROLLERS:
        out.append(f"--- {c}: {LOGS / c / 'slurmctld.log'}")
        out += log(c).splitlines()[-lines:]
    return "\n".join(out)


def wait_in_control(name: str, timeout: float) -> float:
    """Poll until ``name`` is in control; the seconds it took.  AssertionError after ``timeout``."""
    start = time.monotonic()
    while in_control() != name:
        if time.monotonic() - start >= timeout:
            raise AssertionError(f"{name} not in control within {timeout:g} s; {state()}\n{tails()}")
        time.sleep(POLL_INTERVAL)
    return time.monotonic() - start


def wait_answering(names: Tuple[str, ...] = CONTROLLERS, timeout: float = 30.0) -> None:
    """Poll until every controller in ``names`` answers ``scontrol ping``."""
    deadline = time.monotonic() + timeout
    while True:
        answer = ping()
        if all(answer[n] for n in names):
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"not all of {names} answer ping within {timeout:g} s: {answer}; {state()}")
        time.sleep(POLL_INTERVAL)


# --- acting on the controllers -----------------------------------------------


def kill(name: str, sig: int = signal.SIGKILL, timeout: float = 30.0) -> None:
    """Send ``sig`` to controller ``name``'s slurmctld and wait until it is gone."""
    pid = controller_pid(name)
    if pid is None:
        raise LabError(f"{name}'s slurmctld is not running; {state()}")
    os.kill(pid, sig)
    wait_gone(name, pid, timeout)


def wait_gone(name: str, pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _pid_running(pid, "slurmctld"):
        if time.monotonic() >= deadline:
            raise AssertionError(f"{name}'s slurmctld (pid {pid}) still runs after {timeout:g} s; {state()}")
        time.sleep(POLL_INTERVAL)


def start(name: str) -> None:
    """Start controller ``name``'s slurmctld (``contrib/lab/pair start``); it returns once the
    daemon runs, not once it is in control."""
    _check(run_pair("start", name), f"contrib/lab/pair start {name}")


def takeover() -> subprocess.CompletedProcess[str]:
    """``scontrol takeover``: the backup takes control, and the primary saves its state and exits."""
    return client(["scontrol", "takeover"], timeout=60)


def up(timeout: float = 120.0) -> float:
    """``contrib/lab/pair up`` (starts what is dead: a dead ctl-a while ctl-b is in control is a
    hand-back); the seconds it took."""
    start_at = time.monotonic()
    _check(run_pair("up", timeout=timeout), "contrib/lab/pair up")
    return time.monotonic() - start_at


def down() -> subprocess.CompletedProcess[str]:
    return _check(run_pair("down"), "contrib/lab/pair down")


def node_state() -> str:
    """The pair's node's state as sinfo shows it (``unknown`` until slurmd registers with the
    controller that took control, for a few seconds after each change of controller)."""
    return client(["sinfo", "-h", "-N", "-o", "%T"]).stdout.strip()


def wait_node_usable(timeout: float = 30.0) -> None:
    """Poll until the node can run jobs: one submitted before it is would wait for a later
    scheduling pass (up to 30 s on 22.05, the backfill interval)."""
    deadline = time.monotonic() + timeout
    while node_state().rstrip("+") not in USABLE_NODE_STATES:
        if time.monotonic() >= deadline:
            raise AssertionError(f"the pair's node is {node_state()!r} after {timeout:g} s; {state()}")
        time.sleep(POLL_INTERVAL)


def nominal(timeout: float = 120.0) -> None:
    """The pair as up leaves it: ctl-a in control, ctl-b in standby, both answering ping, and the
    node usable."""
    if in_control() == "ctl-a" and all(controller_pid(c) is not None for c in CONTROLLERS):
        wait_answering(timeout=30)
        wait_node_usable()
        return
    up(timeout)


# --- saves -------------------------------------------------------------------


def job_state_mtime_ns() -> int:
    """When the controller in control last rewrote the jobs' state (0: never)."""
    try:
        return (STATE_SAVE / "job_state").stat().st_mtime_ns
    except OSError:
        return 0


def wait_saved(after_ns: int, timeout: float = 15.0) -> int:
    """Poll until ``job_state`` was rewritten after ``after_ns`` (time.time_ns()); its mtime.
    slurmctld writes it at most once per 5 s (SAVE_MAX_WAIT), so a change acknowledged at
    ``after_ns`` is on disk once this returns."""
    deadline = time.monotonic() + timeout
    while True:
        mtime = job_state_mtime_ns()
        if mtime > after_ns:
            return mtime
        if time.monotonic() >= deadline:
            raise AssertionError(f"job_state not rewritten within {timeout:g} s of the change; {state()}")
        time.sleep(POLL_INTERVAL)
