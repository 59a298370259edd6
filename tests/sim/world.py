"""The simulated world slurm-dsl's own code runs in: one host's clocks, its processes and files,
and the simulated cluster behind scontrol and squeue (docs/testing.md §7).

``Simulation.world(pid)`` is a strict ``slurm_dsl.host.world.World`` for one simulated process:
every clock it reads is the simulation's (the host's wall clock may be stepped or skewed, its boot
clock never steps), every process it starts is answered by the simulated cluster and takes
simulated time, every outside file it reads is the simulated StateSaveLocation or slurm.conf, and
a sleep moves the simulated clock.  An edge the simulation does not fill raises, so nothing reaches
the real machine.  Written from docs/contract.md §2-§4, §9.3 and §13 and the ground truth, not from
slurm_dsl's code; the ``Completed`` and ``Identity`` values are the edges' own types.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

from slurm_dsl.host.files import Identity, NotRead
from slurm_dsl.host.process import Completed
from slurm_dsl.host.world import World
from tests.sim import shell
from tests.sim.slurmctld import Cluster

EPOCH = 1_767_225_600.0  # the simulation's time 0 on a wall clock: 2026-01-01
STATE = "/sim/state"
CONF = "/etc/slurm/slurm.conf"
SCONTROL, SQUEUE = "/usr/bin/scontrol", "/usr/bin/squeue"
CONTROL = ("hold", "uhold", "release", "requeue", "requeuehold", "update")  # scontrol's control verbs
LOAD = 0.004  # seconds a squeue or scontrol load takes (docs/slurm-behaviour.md §7)


@dataclass
class Host:
    """One simulated host: its name, this boot, its wall clock's offset from true time, and the
    processes alive on it (pid -> start, in ticks since boot)."""

    name: str = "simhost"
    boot: str = "b0b0b0b0-0000-4000-8000-000000000001"
    offset: float = 0.0
    booted_at: float = 0.0  # simulated time of this boot
    alive: Dict[int, int] = field(default_factory=dict)
    next_pid: int = 4000


class Simulation:
    """A simulated cluster and host, and the clock they share (``t``: seconds since ``EPOCH``)."""

    def __init__(self, cluster: Optional[Cluster] = None, host: Optional[Host] = None) -> None:
        self.cluster = cluster or Cluster()
        self.host = host or Host()
        self.journal: List[str] = []  # what the system log took
        # A second host sharing the ledger (MariaDB in a site's setup; the simulation's SQLite file
        # stands in, on the same clock): its runs' liveness cannot be told from the first.
        self.other = Host(name="simhost2", boot="b0b0b0b0-0000-4000-8000-000000000002")
        self.host_of: Dict[int, Host] = {}
        self.t = 0.0
        self.started: Set[Tuple[str, ...]] = set()  # programs asked for that the simulation does not run
        self.tags: Dict[int, str] = {}  # who a process's calls are from, as the cluster keeps it ("dsl:N")
        # A process to freeze (pid -> at which of its process starts or sleeps, counting from 1, and
        # what to do then: the scheduler's ``freeze`` runs others while it waits; SIGSTOP).
        self.freeze_at: Dict[int, Tuple[int, Callable[[], None]]] = {}
        self.edges_of: Dict[int, int] = {}
        self.unfrozen_at_script: Set[int] = set()
        # A process to SIGKILL (pid -> at which script it runs, how many of its calls are made
        # first, and what to call then): it makes them, dies, and never returns to slurm-dsl.
        self.kill_at: Dict[int, Tuple[int, int, Callable[[], None]]] = {}
        self.scripts_of: Dict[int, int] = {}
        self.looked: Dict[int, float] = {}  # each process's last squeue: when it read slurmctld
        self.in_flight: Set[int] = set()  # of those, whose next call's request is on its way as it dies
        # A fault between the calls of a process's script (pid -> at which script, and what to call
        # with each call's number and end): slurmctld SIGKILLed after a call, say.
        self.between: Dict[int, Tuple[int, Callable[[int, float], None]]] = {}
        # Called with (pid, the script's calls) before a script runs: the checker's look at leases.
        self.before_script: Optional[Callable[[int, List[Tuple[str, ...]]], None]] = None
        # Called once (then forgotten) as the next squeue reaches slurmctld: a schedule's move timed to it.
        self.before_lookup: Optional[Callable[[], None]] = None

    # -- time ---------------------------------------------------------------------------------

    def advance(self, to: float) -> None:
        self.t = max(self.t, to)
        self.cluster.advance(self.t)

    def sleep(self, seconds: float) -> None:
        self.advance(self.t + max(seconds, 0.0))

    # -- processes ------------------------------------------------------------------------------

    def spawn(self, host: Optional[Host] = None) -> int:
        """A new process (a command, a sweep) on ``host`` (the first by default): its pid, unique
        across the hosts."""
        host = host or self.host
        pid = self.host.next_pid
        self.host.next_pid += 1
        self.host_of[pid] = host
        host.alive[pid] = int((self.t - host.booted_at) * 100)
        return pid

    def exit(self, pid: int) -> None:
        self.host_of.get(pid, self.host).alive.pop(pid, None)

    def run_of(self, pid: int) -> str:
        """Process ``pid``'s run, as ``host.runs`` words it."""
        host = self.host_of.get(pid, self.host)
        return f"{host.name}/{host.boot}/{pid}/{host.alive.get(pid, 0)}"

    def world(self, pid: int) -> World:
        host = self.host_of.get(pid, self.host)

        def sleep(seconds: float) -> None:
            self.edge(pid)
            self.sleep(seconds)

        def run_script(script: str, **kw: Any) -> Completed:
            self.edge(pid, script=True)
            done = self.run_script(script, pid=pid, **kw)
            if pid in self.unfrozen_at_script:
                self.edge(pid)  # its runner stopped once the script ended, before it records the end
            return done

        def run_argv(argv: Sequence[str], **kw: Any) -> Completed:
            self.edge(pid)
            return self.run_argv(argv, pid=pid, **kw)

        return World(
            monotonic=lambda: EPOCH + self.t,
            wall=lambda: EPOCH + self.t + self.host.offset,  # one wall clock: the ledger's (a MariaDB server's)
            boot_clock=lambda: self.t - host.booted_at,
            sleep=sleep,
            run_script=run_script,
            run_argv=run_argv,
            read_regular=self.read_regular,
            read_identified=self.read_identified,
            identity=self.identity,
            this_run=lambda: self.run_of(pid),
            alive=lambda text: self.alive(text, host),
            listens=self.listens,
            journal=self.note,
            strict=True,
        )

    def note(self, line: str) -> bool:
        """The system log: it takes every line (an audit line of ``--reason``, contract §10.4)."""
        self.journal.append(line)
        return True

    def edge(self, pid: int, script: bool = False) -> None:
        """Process ``pid`` is about to start a process or sleep: where a freeze takes it.  For a
        process in ``unfrozen_at_script``, not as it starts a script but once the script ended:
        between reading the time left and the spawn is the one window contract §2 names as
        uncovered (a lease may then lapse while the script runs), and only a run whose liveness
        cannot be told can be caught in it."""
        if script and pid in self.unfrozen_at_script:
            return
        self.edges_of[pid] = self.edges_of.get(pid, 0) + 1
        at = self.freeze_at.get(pid)
        if at is not None and at[0] == self.edges_of[pid]:
            del self.freeze_at[pid]
            at[1]()

    def alive(self, text: Optional[str], asker: Optional[Host] = None) -> Optional[bool]:
        """As ``host.runs.alive`` words it, asked on ``asker``: known alive, known gone, or cannot
        be told (a run of another host)."""
        asker = asker or self.host
        parts = (text or "").split("/")
        if len(parts) != 4 or not parts[2].isdigit():
            return None
        name, boot, pid, start = parts[0], parts[1], int(parts[2]), parts[3]
        if name != asker.name:
            return None
        if boot != asker.boot:
            return False
        return str(asker.alive.get(pid)) == start

    def listens(self, address: str, port: int) -> Optional[bool]:
        """A connection to a controller: accepted while it runs (a restarted primary listens while
        it waits to take control back), refused when it does not."""
        found = next((c for c in self.cluster.controllers if c.name == address), None)
        return None if found is None else found.up

    def run_script(self, script: str, *, timeout: float, cap: int, kill_grace: float, pid: int = 0) -> Completed:
        if self.before_script is not None:
            self.before_script(pid, [call.argv for call in shell.parse(script)[1]])
        start = self.t
        self.scripts_of[pid] = self.scripts_of.get(pid, 0) + 1
        kill = self.kill_at.get(pid)
        if kill is not None and kill[0] == self.scripts_of[pid]:
            del self.kill_at[pid]
            ran = shell.run(self.cluster, start, script, deadline=start + timeout, who=self.tags.get(pid, "dsl"),
                            calls_made=kill[1], in_flight=pid in self.in_flight)
            self.advance(ran.ends)
            self.exit(pid)
            kill[2]()  # dead: this thread never goes on
        between = self.between.get(pid)
        after_call = None
        if between is not None and between[0] == self.scripts_of[pid]:
            del self.between[pid]
            after_call = between[1]
        ran = shell.run(self.cluster, start, script, deadline=start + timeout, who=self.tags.get(pid, "dsl"),
                        after_call=after_call)
        self.advance(ran.ends)
        return Completed(("/bin/sh", "-s"), ran.status, b"", ran.stderr, ran.ends >= start + timeout, False)

    def run_argv(self, argv: Sequence[str], *, timeout: float, cap: int, kill_grace: float, pid: int = 0) -> Completed:
        argv = tuple(argv)
        program = os.path.basename(argv[0])
        if program == "squeue":
            self.looked[pid] = self.t  # the record it reads is slurmctld's at this moment
            return self._squeue(argv, timeout)
        if program == "scontrol" and argv[1:3] == ("show", "config"):
            # Answered by the controller in control: its BOOT_TIME (the start of its process).
            ctl = self.cluster.in_control()
            if ctl is None:
                took, text = self.cluster.load_fails()
                self.advance(self.t + min(took, timeout))
                return Completed(argv, 1, b"", text.replace("slurm_load_jobs", "slurm_load_ctl_conf").encode(),
                                 took > timeout, False)
            self.advance(self.t + LOAD)
            boot = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(EPOCH) + ctl.booted))
            age = int(self.cluster.primary.min_job_age)
            text = f"BOOT_TIME               = {boot}\nMinJobAge               = {age} sec\n"
            return Completed(argv, 0, text.encode(), b"", False, False)
        if program == "scontrol" and argv[1] in CONTROL:  # open's direct call, or any other made unwrapped
            if self.before_script is not None:  # a call on a job outside a script is leased too (contract §9.2)
                self.before_script(pid, [argv[1:]])
            reply = self.cluster.call(self.t, argv[1:], who=self.tags.get(pid, "dsl"))
            self.advance(min(reply.ends, self.t + timeout))
            return Completed(argv, reply.rc, b"", reply.stderr.encode(), reply.ends > self.t + timeout, False)
        self.started.add(argv)
        return Completed(argv, 127, b"", f"{argv[0]}: not in the simulation\n".encode(), False, False, started=False)

    def _squeue(self, argv: Tuple[str, ...], timeout: float) -> Completed:
        """``squeue -h -a -t all -r [-j ids] -O <fields, each ending in |>...<nonce>`` (contract
        §9.3, docs/slurm-behaviour.md §9): a record per job, fields and nonce; a single unknown id
        exits 1; no controller: exit 1 after the client's retries."""
        if self.before_lookup is not None:  # what else happens in slurmctld as this lookup reaches it
            before, self.before_lookup = self.before_lookup, None
            before()
        ids = argv[argv.index("-j") + 1].split(",") if "-j" in argv else None
        nonce = argv[-1].rsplit("|", 1)[1]
        jobs = self.cluster.jobs(self.t, ids)
        if jobs is None:
            took, text = self.cluster.load_fails()
            self.advance(self.t + min(took, timeout))
            return Completed(argv, 1, b"", text.encode(), took > timeout, False)
        self.advance(self.t + LOAD)
        if ids is not None and len(ids) == 1 and not jobs:
            return Completed(argv, 1, b"", b"slurm_load_jobs error: Invalid job id specified\n", False, False)
        lines = []
        for job in jobs.values():
            array, task = (job.array[0], str(job.array[1])) if job.array else (job.job_id, "N/A")
            fields = (job.job_id, array, task, job.state, str(job.requeue), str(job.restarts), str(job.priority),
                      job.reason)
            lines.append("|".join(fields) + "|" + nonce + "\n")
        return Completed(argv, 0, "".join(lines).encode(), b"", False, False)

    # -- files ----------------------------------------------------------------------------------

    def _file(self, path: str) -> Union[Tuple[bytes, Identity], NotRead]:
        disk = self.cluster.disk
        if os.path.basename(path) == "slurm.conf":  # wherever the code under test looks for it
            text = f"SlurmctldHost={self.cluster.primary.name}\nStateSaveLocation={STATE}\n"
            if len(self.cluster.controllers) > 1:
                text += f"SlurmctldHost={self.cluster.controllers[1].name}\n"
            return text.encode(), Identity(7, 0, len(text))
        if path == f"{STATE}/job_state" and disk.job_state is not None:
            saved = disk.job_state
            # The header's time is slurmctld's time(NULL) when the save began: epoch seconds of its clock.
            began = int(EPOCH) + saved.began
            header = struct.pack(">I", 17) + b"PROTOCOL_VERSION\0" + struct.pack(">Hq", 0x2600, began)
            return header, Identity(saved.inode, int(saved.mtime * 1e9), saved.size)
        if path == f"{STATE}/heartbeat" and disk.heartbeat is not None:
            return struct.pack(">qq", *disk.heartbeat), Identity(disk.heartbeat_inode, 0, 16)
        return NotRead(path, "No such file or directory", True)

    def read_regular(self, path: str, limit: int, timeout: float, *, head: bool = False) -> Union[bytes, NotRead]:
        found = self._file(path)
        if isinstance(found, NotRead):
            return found
        data = found[0]
        if len(data) > limit and not head:
            return NotRead(path, f"longer than {limit} bytes: refused")
        return data[:limit]

    def read_identified(self, path: str, limit: int, timeout: float) -> Union[Tuple[bytes, Identity], NotRead]:
        return self._file(path)

    def identity(self, path: str, timeout: float) -> Union[Identity, NotRead]:
        found = self._file(path)
        return found if isinstance(found, NotRead) else found[1]
