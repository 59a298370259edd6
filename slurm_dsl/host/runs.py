"""Which run of slurm-dsl a process is, and whether a run is known alive (docs/contract.md §13.7).

A run is ``host/boot/pid/start``, ``start`` from ``/proc/<pid>/stat`` field 22; every program it
starts carries it in ``RUN_ENV``.  Whether a run is over is never told by a time."""

from __future__ import annotations

import errno
import os
import time
from typing import Dict, NamedTuple, Optional

from . import world
from .files import NotRead, read_regular

RUN_ENV = "SLURM_DSL_RUN"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# Seconds a look through the whole process table for a run's name may take (``_marked``); past
# them, "cannot be told".  A loaded host with a few hundred processes takes tens of milliseconds.
SCAN_TIMEOUT = 2.0
_found: Dict[str, str] = {}


class Run(NamedTuple):
    """A run as ``this_run`` writes it."""

    host: str
    boot: str
    pid: int
    start: int

    def __str__(self) -> str:
        return f"{self.host}/{self.boot}/{self.pid}/{self.start}"

    @classmethod
    def parse(cls, text: Optional[str]) -> Optional[Run]:
        """The run ``text`` names (None: none, or not one)."""
        parts = (text or "").split("/")
        if len(parts) != 4 or not parts[2].isdigit() or not parts[3].isdigit() or not parts[0] or not parts[1]:
            return None
        return cls(parts[0], parts[1], int(parts[2]), int(parts[3]))


def boot_id() -> str:
    """This boot's id, read once per process ("" where it cannot be read)."""
    if world.current().this_run is not None:
        return this_run().boot
    if "boot" not in _found:
        data = read_regular(BOOT_ID, 64)
        _found["boot"] = "" if isinstance(data, NotRead) else data.decode("ascii", "replace").strip()
    return _found["boot"]


def started(pid: int) -> Optional[int]:
    """When process ``pid`` started (clock ticks since boot), or None: no such process."""
    data = read_regular(f"/proc/{pid}/stat", 4096)
    return None if isinstance(data, NotRead) else _start_of(data)


def _start_of(stat: bytes) -> Optional[int]:
    # The command name, field 2, is in parentheses and may hold anything: fields count after its ")".
    fields = stat.rpartition(b")")[2].split()
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


def this_run() -> Run:
    """This process's run."""
    simulated = world.current().edge("this_run")
    if simulated is not None:
        found = Run.parse(simulated())
        assert found is not None
        return found
    if "run" not in _found or _found.get("pid") != str(os.getpid()):  # a forked child is another run
        pid = os.getpid()
        _found["pid"] = str(pid)
        _found["run"] = str(Run(os.uname().nodename, boot_id() or "?", pid, started(pid) or 0))
    run = Run.parse(_found["run"])
    assert run is not None
    return run


def boot_clock() -> float:
    """This host's boot clock (CLOCK_BOOTTIME), compared only with readings of the same host and boot."""
    simulated = world.current().edge("boot_clock")
    return simulated() if simulated is not None else time.clock_gettime(time.CLOCK_BOOTTIME)


def observer() -> Optional[str]:
    """This host in this boot, ``host/boot`` (None: the boot cannot be told)."""
    here = this_run()
    return None if here.boot == "?" else f"{here.host}/{here.boot}"


def ended() -> str:
    """Where and when now is on a clock that never steps: ``host/boot/seconds``."""
    here = this_run()
    return f"{here.host}/{here.boot}/{boot_clock():.6f}"


def since(text: Optional[str], at: Optional[float] = None) -> Optional[float]:
    """Seconds from ``text`` (an ``ended``) to ``at`` (default: now), both this host's in this boot; else None."""
    here = observer()
    return None if here is None else between(text, f"{here}/{boot_clock() if at is None else at}")


def between(earlier: Optional[str], later: Optional[str]) -> Optional[float]:
    """Seconds from ``earlier`` to ``later`` (each an ``ended``), both on one host's boot clock and boot; else None."""
    first, second = (text or "" for text in (earlier, later))
    where, _, at = first.rpartition("/")
    there, _, then = second.rpartition("/")
    if not where or where != there or where.endswith("/?") or "/" not in where:
        return None
    try:
        return float(then) - float(at)
    except ValueError:
        return None


def alive(text: Optional[str]) -> Optional[bool]:
    """Whether the run ``text`` names is known alive (True), known dead (False), or cannot be told here (None).

    A stopped process counts as alive: it may go on."""
    simulated = world.current().edge("alive")
    if simulated is not None:
        return simulated(text)  # type: ignore[no-any-return]
    run = Run.parse(text)
    here = this_run()
    if run is None or run.host != here.host:
        return None
    if run.boot != here.boot:
        return False if here.boot != "?" and run.boot != "?" else None
    if started(run.pid) == run.start:
        return True
    return _marked(str(run), run.start)


def _marked(mark: str, since: int) -> Optional[bool]:
    """Whether a process started at ``since`` or later carries ``mark`` (None: an environment unread, or the
    scan past ``SCAN_TIMEOUT``)."""
    wanted = f"{RUN_ENV}={mark}".encode()
    unreadable = False
    until = world.monotonic() + SCAN_TIMEOUT
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    for pid in pids:
        left = until - world.monotonic()
        if left <= 0:
            return None
        status = read_regular(f"/proc/{pid}/stat", 4096, left)
        if isinstance(status, NotRead):
            unreadable = unreadable or _unanswered(status)
            continue
        start = _start_of(status)
        if start is None or start < since:
            continue  # older than the run
        data = read_regular(f"/proc/{pid}/environ", 1 << 20, max(until - world.monotonic(), 0.0), head=True)
        if isinstance(data, NotRead):
            unreadable = unreadable or _unanswered(data)
            continue
        if wanted in data.split(b"\0"):
            return True
    return None if unreadable else False


def _unanswered(found: NotRead) -> bool:
    """A process file not read for a reason other than its process being gone or a kernel thread's."""
    return not (found.missing or found.why == os.strerror(errno.ESRCH))


def owner_run(owner: str) -> Optional[str]:
    """The run a lease owner names after its ``@`` (``run.tracked.lease_owner``); None for one that names none."""
    run = owner.rpartition("@")[2] if "@" in owner else None
    return run if Run.parse(run) is not None else None


def owner_alive(owner: str) -> Optional[bool]:
    """``alive`` of the run a lease owner names (``owner_run``; None: it names none)."""
    run = owner_run(owner)
    return None if run is None else alive(run)
