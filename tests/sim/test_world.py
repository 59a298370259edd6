"""slurm-dsl's own run layer in a simulated world (issue 42 item 1, the seams).

A strict world lets nothing reach the machine: every edge it does not fill raises.  Every clock
read, sleep, process, outside file and run identity of the run layer goes through the edges
(``test_no_module_reaches_the_machine_but_the_edges`` reads the package for any other).  And the
product's ``Tracker``, with a real SQLite ledger, runs holds and requeues in the simulation: the
simulated record, the ledger's rows and the outcomes agree with the contract's words.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable, List

import pytest

from slurm_dsl.core.model import Op, RequeueBit, Result
from slurm_dsl.host import files, process, runs, world
from slurm_dsl.host.world import World
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.lookups import saves
from slurm_dsl.run import deadlines
from slurm_dsl.run.tracked import Tracker
from tests.sim.world import SCONTROL, SQUEUE, Simulation

PACKAGE = Path(__file__).resolve().parents[2] / "slurm_dsl"
EDGE_CALLS: List[Callable[[], object]] = [
    lambda: process.run_script("exit 0\n", timeout=1.0),
    lambda: process.run_argv(["/bin/true"], timeout=1.0),
    lambda: files.read_regular("/etc/hostname", 100),
    lambda: files.read_identified("/etc/hostname", 100),
    lambda: files.identity("/etc/hostname"),
    lambda: runs.boot_clock(),
    lambda: runs.this_run(),
    lambda: runs.alive("h/b/1/2"),
    lambda: deadlines.steady(),
    lambda: deadlines.wall(),
    lambda: world.sleep(0.0),
    lambda: world.monotonic(),
    lambda: saves.listens("127.0.0.1", 6817),
]


@pytest.mark.parametrize("call", EDGE_CALLS)
def test_a_strict_world_lets_nothing_reach_the_machine(call: Callable[[], object]) -> None:
    with world.bound(World(strict=True)), pytest.raises(RuntimeError, match="the simulated world has no"):
        call()


def test_every_edge_is_asked() -> None:
    """Each field of ``World`` is an edge some code asks for: none is decoration."""
    asked = {name for path in PACKAGE.rglob("*.py") for name in world.EDGES if f'edge("{name}")' in path.read_text()}
    asked |= {"this_run"} if "current().this_run" in (PACKAGE / "host" / "runs.py").read_text() else set()
    assert asked == set(world.EDGES)


# Where the machine may be met directly: the edges themselves; the ledger's default clock (the
# run layer passes the world's: ``Tracker.ledger``, ``admin.files``) and its own waits on its
# lock and prune's pacing; doctor's probe of a MariaDB server; a terminal's progress line.
EDGE_MODULES = {"host/process.py", "host/files.py", "host/runs.py", "host/world.py", "host/journal.py",
                "run/deadlines.py"}
ALLOWED = {
    ("ledger/sqlite.py", "time.time"), ("ledger/sqlite.py", "time.sleep"), ("ledger/sqlite.py", "time.monotonic"),
    ("ledger/sqlite.py", "os.getpid"), ("ledger/store.py", "time.monotonic"), ("ledger/mariadb.py", "time.time"),
    ("ledger/mariadb.py", "time.monotonic"), ("ledger/mariadb_config.py", "os.getpid"),
    ("admin/doctor.py", "time.time"), ("admin/commands/ops.py", "time.monotonic"),
    ("lookups/saves.py", "socket.create_connection"),  # ``listens``, an edge itself: it asks the world first
}
DIRECT = {"time.time", "time.sleep", "time.monotonic", "time.clock_gettime", "os.getpid", "os.uname",
          "threading.Thread", "subprocess.run", "subprocess.Popen", "socket.create_connection", "socket.socket"}


def test_no_module_reaches_the_machine_but_the_edges() -> None:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        where = str(path.relative_to(PACKAGE))
        if where in EDGE_MODULES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                name = f"{node.value.id}.{node.attr}"
                if name in DIRECT and (where, name) not in ALLOWED:
                    found.add((where, name))
    # Threads the run layer starts carry the world: each threading.Thread target is world.carry(...).
    threads = {w for w, n in found if n == "threading.Thread"}
    for where in threads:
        text = (PACKAGE / where).read_text()
        assert text.count("threading.Thread(") == text.count("threading.Thread(target=world.carry("), where
    assert {f for f in found if f[1] != "threading.Thread"} == set()


def test_the_trackers_operations_run_in_the_simulation(tmp_path: Path) -> None:
    sim = Simulation()
    sim.cluster.start(0.0)
    running, pending, done = sim.cluster.submit(0.0, requeue=0), sim.cluster.submit(0.0, state="PENDING"), \
        sim.cluster.submit(0.0)
    sim.cluster.finish(0.5, done)
    sim.advance(1.0)
    pid = sim.spawn()
    ledger = str(tmp_path / "ledger.sqlite3")
    with world.bound(sim.world(pid)), Tracker(ledger, scontrol=SCONTROL, squeue=SQUEUE) as tracker:
        deadline = deadlines.steady() + 30.0
        requeued = tracker.run(Op.REQUEUE, running, deadline)
        refused = tracker.run(Op.REQUEUE, pending, deadline)
        finished = tracker.run(Op.HOLD, done, deadline)
        gone = tracker.run(Op.HOLD, "999999", deadline)
    assert (requeued.result, requeued.requeue_bit) == (Result.OK, RequeueBit.CLEAR)
    assert (refused.result, refused.requeue_bit) == (Result.REJECTED, RequeueBit.CLEAR)
    assert (finished.result, gone.result) == (Result.REJECTED, Result.NOT_FOUND)
    record = (sim.cluster.jobs(sim.t, [running]) or {})[running]
    assert (record.state, record.requeue, record.restarts) == ("PENDING", 0, 1)
    assert sim.started == set()  # every process it asked for was simulated
    with world.bound(sim.world(pid)), open_ledger(ledger) as opened:
        row = opened.history(running)[-1]
        watched = opened.get(running)
    assert row.result is Result.OK and row.baseline is not None and row.baseline.restarts == 0
    assert row.started_at >= 1_767_225_600.0  # the simulation's wall clock, not this machine's
    assert watched is not None and watched.bit is RequeueBit.MAY_BE_SET  # watched until its clear is saved


def _sweep(sim: Simulation, ledger: str) -> None:
    from slurm_dsl.lookups.squeue import SqueueLookup
    from slurm_dsl.run.sweep import sweep

    pid = sim.spawn()
    with world.bound(sim.world(pid)), Tracker(ledger, scontrol=SCONTROL, squeue=SQUEUE) as tracker:
        with tracker.ledger().sweep_lock():
            sweep(tracker, SqueueLookup(SQUEUE))
    sim.exit(pid)


@pytest.mark.parametrize("warm", [False, True])
def test_a_flag_slurmctld_loses_is_found_and_cleared(tmp_path: Path, warm: bool) -> None:
    """The requeue acknowledged, slurmctld SIGKILLed 0.5 s later: with its save thread cold, call 1
    was saved at once and calls 2-3 not, so the job comes back RUNNING at Requeue=1, RestartCnt 0
    (docs/durability.md §2); warm (a change saved just before), the whole requeue vanishes.  The
    ledger kept the object watched either way, and sweeps restore the flag and clear the object
    only once saves prove the clear (contract §13.3)."""
    sim = Simulation()
    sim.cluster.start(0.0)
    job, other = sim.cluster.submit(0.0), sim.cluster.submit(0.0)
    sim.advance(20.0)
    if warm:
        sim.cluster.call(sim.t, ("hold", other))
        sim.advance(sim.t + 0.01)
    ledger = str(tmp_path / "ledger.sqlite3")
    pid = sim.spawn()
    with world.bound(sim.world(pid)), Tracker(ledger, scontrol=SCONTROL, squeue=SQUEUE) as tracker:
        assert tracker.run(Op.REQUEUE, job, deadlines.steady() + 30.0).result is Result.OK
    sim.exit(pid)
    sim.cluster.kill(sim.t + 0.5)
    sim.cluster.start(sim.t + 1.0)
    sim.advance(sim.t + 1.0)
    back = (sim.cluster.jobs(sim.t, [job]) or {})[job]
    assert (back.state, back.requeue, back.restarts) == (("RUNNING", 0, 0) if warm else ("RUNNING", 1, 0))
    for _ in range(13):  # a sweep a minute, as the timer runs it: an idle slurmctld saves at its 300 s checkpoint
        _sweep(sim, ledger)
        sim.advance(sim.t + 60.0)
    with world.bound(sim.world(sim.spawn())), open_ledger(ledger) as opened:
        obj = opened.get(job)
    assert obj is not None and obj.bit is RequeueBit.CLEAR
    assert (sim.cluster.jobs(sim.t, [job]) or {})[job].requeue == 0
    assert sim.started == set()
