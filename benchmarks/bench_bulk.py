"""Bulk operations against the lab, side by side in one run (docs/contract.md §11).

Not a test: it prints figures.  N pending jobs are held and released (and M requeued)
again and again, each round by three methods, interleaved so that slurmctld's state and the
machine's load are the same for all three:

- ``slurm-dsl``: the CLI on the whole list (bulk path, ledger, one lookup for the array
  check and one for corroboration, one ping per chunk), as an admin runs it;
- (a) a loop of bare per-id ``scontrol hold <id>`` processes, what a shell loop does;
- (b) one bare ``scontrol hold <id,id,...>``: no deadline, no reading, no ledger;
- (c) for hold and release, ``benchmarks/floor.py`` run by the same Python: the least a command
  started per operation can add to (b) (a squeue in a thread, a commit before the call and one
  after, nothing read or checked), so that slurm-dsl's added time can be set against the floor.

The requeue round uses the pending jobs the release round left: call 2 is refused per id
(``Job is pending execution``), so every method pays for all three calls on every id.  The
``R`` round requeues RUNNING jobs, as admins do after a node failed: fresh jobs for every
measurement, in a partition made for the run that oversubscribes the node so that all of
them run at once (slurmctld kills and requeues each one: its own work dominates).  It
also reports the peak Python memory (tracemalloc) of reading 1,000 and 10,000 ids through
``run_many`` against a fake scontrol, to show it stays flat per chunk.

    python -m benchmarks.bench_bulk [--jobs 1000] [--requeue 200] [--running 200] [--rounds 3]
                                    [--python PATH | --cli PATH | --in-place] [--ops hold,release]
                                    [--compare PATH]

``--compare PATH`` measures a second ``slurm-dsl`` (e.g. main's, installed the same way) in the
same interleaved rounds, so that before and after share slurmctld's state and the machine's load.

``slurm-dsl`` is measured as admins run it: by default this checkout is installed as
contrib/README.md says (a venv of the system's python3, a regular pip install) in a throwaway
directory, and that ``slurm-dsl`` is run.
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Callable, Dict, List, Optional

from slurm_dsl import Op
from slurm_dsl.run.bulk import run_many
from slurm_dsl.run.tracked import Tracker
from tests import lab
from tests.fakes import write_fake_squeue, write_list_fake

SCONTROL = "/usr/bin/scontrol"
SQUEUE = "/usr/bin/squeue"
REPO = Path(__file__).resolve().parent.parent
FLOOR = Path(__file__).resolve().parent / "floor.py"
SYSTEM_PYTHON = "/usr/bin/python3"  # what contrib/README.md's `python3 -m venv` runs on Debian


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def installed(python: str, where: Path) -> List[str]:
    """The ``slurm-dsl`` command as contrib/README.md installs it: ``python3 -m venv`` with the
    system's Python, then a regular ``pip install`` of this checkout (bytecode compiled).  Not
    the development venv: there an editable install's import hook runs at every start of any
    Python, and with PYTHONDONTWRITEBYTECODE every run compiles the package again (together
    ~50 ms a run, which no admin's install pays)."""
    print(f"installing this checkout into {where} with {python} ...", flush=True)
    subprocess.run([python, "-m", "venv", str(where)], check=True)
    subprocess.run([str(where / "bin" / "pip"), "install", "--quiet", "--no-deps", str(REPO)], check=True)
    return [str(where / "bin" / "slurm-dsl")]


def cli(command: List[str], op: str, ids: List[str], ledger: str) -> None:
    done = subprocess.run([*command, op, *ids, "--timeout", "60", "--ledger", ledger],
                          capture_output=True, text=True, check=False)
    if done.returncode not in (0, 10):
        raise SystemExit(f"slurm-dsl {op} exited {done.returncode}: {done.stderr[-500:]}")


def loop(argvs: List[List[str]]) -> None:
    for argv in argvs:
        subprocess.run(argv, capture_output=True, check=False)


def one(argv: List[str]) -> None:
    subprocess.run(argv, capture_output=True, check=False)


def requeue_methods(command: List[str], ids: List[str], ledger: str) -> Dict[str, Callable[[], object]]:
    """The three ways to requeue ``ids``: the CLI, a per-id loop of the three calls, the three list calls."""
    joined = ",".join(ids)
    per_id = [
        [SCONTROL, *a]
        for i in ids
        for a in (["update", f"JobId={i}", "Requeue=1"], ["requeue", i], ["update", f"JobId={i}", "Requeue=0"])
    ]
    lists = [[SCONTROL, "update", f"JobId={joined}", "Requeue=1"], [SCONTROL, "requeue", joined],
             [SCONTROL, "update", f"JobId={joined}", "Requeue=0"]]
    return {
        "slurm-dsl": lambda: cli(command, "requeue", ids, ledger),
        "(a) per-id loop": lambda: loop(per_id),
        "(b) one list call": lambda: loop(lists),
    }


def bench_op(
    command: List[str], name: str, ids: List[str], ledger: str, rounds: int, compare: Optional[List[str]] = None,
    python: Optional[str] = None, loops: bool = True,
) -> Dict[str, float]:
    """Median seconds of each method for ``name`` (hold and release alternate to keep the jobs
    cycling); ``compare``: a second slurm-dsl measured the same way, as ``compared``; ``python``:
    the floor (``benchmarks/floor.py``) run by it, as ``(c) floor``."""
    joined = ",".join(ids)
    if name == "requeue":
        methods = requeue_methods(command, ids, ledger)
        if compare is not None:
            methods["compared"] = requeue_methods(compare, ids, ledger + ".compared")["slurm-dsl"]
        undo: Callable[[], object] = lambda: None  # noqa: E731
    else:
        other = "release" if name == "hold" else "hold"
        methods = {
            "slurm-dsl": lambda: cli(command, name, ids, ledger),
            "(a) per-id loop": lambda: loop([[SCONTROL, name, i] for i in ids]),
            "(b) one list call": lambda: one([SCONTROL, name, joined]),
        }
        if compare is not None:
            methods["compared"] = lambda: cli(compare, name, ids, ledger + ".compared")
        if python is not None:
            methods["(c) floor"] = lambda: one([python, str(FLOOR), ledger + ".floor", SQUEUE, SCONTROL, name, *ids])
        undo = lambda: one([SCONTROL, other, joined])  # noqa: E731
    if not loops:
        del methods["(a) per-id loop"]
    times: Dict[str, List[float]] = {m: [] for m in methods}
    for _ in range(rounds):
        for method, run in methods.items():
            undo()
            times[method].append(timed(run))
    medians = {m: statistics.median(t) for m, t in times.items()}
    if compare is not None:  # each round's own difference: what the rounds' load shares cancels out
        medians["paired"] = statistics.median(c - o for c, o in zip(times["compared"], times["slurm-dsl"]))
    return medians


BENCH_PARTITION = "slurmdsl-bench"  # made for the run and removed after it


def _squeue_states(partition: str) -> List[str]:
    done = subprocess.run(["squeue", "-h", "-p", partition, "-o", "%T"], capture_output=True, text=True, check=True)
    return done.stdout.split()


def _wait_for(what: str, condition: Callable[[], bool], timeout: float = 180.0) -> None:
    """Poll ``condition`` until it holds (the scheduler starts ~100 jobs a cycle)."""
    give_up = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > give_up:
            raise SystemExit(f"bench_bulk: gave up waiting for {what}")
        time.sleep(0.5)


def _running_jobs(count: int) -> List[str]:
    """``count`` fresh jobs, all RUNNING in the bench partition (after the last ones are gone)."""
    _wait_for("the last round's jobs to go", lambda: not _squeue_states(BENCH_PARTITION))
    ids = [lab.submit("-p", BENCH_PARTITION, *lab.SLEEP_JOB) for _ in range(count)]
    _wait_for(f"{count} jobs to run", lambda: _squeue_states(BENCH_PARTITION).count("RUNNING") >= count)
    return ids


def bench_requeue_running(command: List[str], count: int, ledger: str, rounds: int) -> Dict[str, float]:
    """Median seconds of each method requeueing ``count`` RUNNING jobs: fresh ones for every
    measurement (a requeued job may not start again for CredExpire seconds), in a partition of
    their own that oversubscribes the node so that all of them run at once."""
    cpus = int(subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True,
                              check=True).stdout.split()[0].rstrip("+"))
    node = subprocess.run(["sinfo", "-h", "-o", "%N"], capture_output=True, text=True, check=True).stdout.split()[0]
    subprocess.run([SCONTROL, "create", f"PartitionName={BENCH_PARTITION}", f"Nodes={node}", "MaxTime=INFINITE",
                    f"OverSubscribe=FORCE:{-(-count // cpus) + 4}", "State=UP"], check=True)
    times: Dict[str, List[float]] = {"slurm-dsl": [], "(a) per-id loop": [], "(b) one list call": []}
    try:
        for _ in range(rounds):
            for method in times:
                ids = _running_jobs(count)
                times[method].append(timed(requeue_methods(command, ids, ledger)[method]))
                lab.cancel(*ids)
    finally:
        lab.cancel_submitted()
        _wait_for("the bench partition's jobs to go", lambda: not _squeue_states(BENCH_PARTITION))
        subprocess.run([SCONTROL, "delete", f"PartitionName={BENCH_PARTITION}"], check=False)
    return {m: statistics.median(t) for m, t in times.items()}


def memory(count: int) -> float:
    """Peak MiB of Python allocations while ``run_many`` reads ``count`` ids (a fake scontrol)."""
    with tempfile.TemporaryDirectory() as tmp:
        fake = write_list_fake(Path(tmp) / "bin", {})
        write_fake_squeue(Path(tmp) / "bin", "")
        ids = [str(n) for n in range(5_000_000, 5_000_000 + count)]
        with Tracker(str(Path(tmp) / "ledger.sqlite3"), scontrol=str(fake), squeue="/bin/true") as tracker:
            tracemalloc.start()
            for _ in run_many(tracker, Op.RESTORE, ids, 60.0):
                pass
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    return peak / (1 << 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--requeue", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--running", type=int, default=200, metavar="N",
                        help="also requeue N running jobs (fresh ones each time; 0: skip) (default: %(default)s)")
    parser.add_argument("--cli", metavar="PATH", help="the slurm-dsl command to measure (default: this checkout,"
                        " installed into a throwaway venv as pip installs it)")
    parser.add_argument("--python", default=SYSTEM_PYTHON if Path(SYSTEM_PYTHON).exists() else sys.executable,
                        help="the Python to install it with (default: %(default)s)")
    parser.add_argument("--in-place", action="store_true",
                        help="measure `python -m slurm_dsl` of this checkout in the current Python instead")
    parser.add_argument("--ops", default="hold,release,requeue",
                        help="which of hold, release, requeue to measure (default: %(default)s)")
    parser.add_argument("--compare", metavar="PATH",
                        help="a second slurm-dsl command measured in the same rounds (e.g. main's)")
    parser.add_argument("--no-loop", action="store_true",
                        help="leave out (a), the per-id loop: a thousand scontrol calls a round keep slurmctld"
                        " busy (and saving) into the next measurement; for the ratios to (b) alone")
    args = parser.parse_args()
    ops = args.ops.split(",")
    if not set(ops) <= {"hold", "release", "requeue"}:
        raise SystemExit(f"--ops: unknown operation in {args.ops!r}")
    compare = [args.compare] if args.compare else None
    reason = lab.lab_available()
    if reason is not None:
        raise SystemExit(f"the lab is not usable: {reason}")
    print(f"submitting {args.jobs} held jobs ...", flush=True)
    # Their begin time an hour away, no release lets one start: a job launched on the lab's own node
    # mid-round (slurmd, the job's processes) would take the CPU from whichever method runs then.
    ids = [lab.submit("--hold", "--begin=now+3600", *lab.SLEEP_JOB) for _ in range(args.jobs)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            command = (
                [args.cli] if args.cli else [sys.executable, "-m", "slurm_dsl"] if args.in_place
                else installed(args.python, Path(tmp) / "venv")
            )
            ledger = str(Path(tmp) / "ledger.sqlite3")
            results = {
                f"{op} {len(chosen)}": bench_op(command, op, chosen, ledger, args.rounds, compare,
                                                python=None if args.in_place else args.python,
                                                loops=not args.no_loop)
                for op in ops
                for chosen in [ids[: args.requeue] if op == "requeue" else ids]
            }
            if args.running:
                lab.cancel(*ids)  # the pending jobs would take slots the running ones need
                results[f"requeue {args.running} R"] = bench_requeue_running(command, args.running, ledger,
                                                                           args.rounds)
    finally:
        lab.cancel(*ids)
    print(f"\nmedians of {args.rounds} interleaved rounds (seconds), and slurm-dsl's ratios:")
    for what, medians in results.items():
        ours, floor = medians["slurm-dsl"], medians["(b) one list call"]
        per_id = medians.get("(a) per-id loop", math.nan)
        print(f"  {what:<15} slurm-dsl {ours:7.3f}   (a) {per_id:7.3f}   (b) {floor:7.3f}"
              f"   (a)/slurm-dsl {per_id / ours:5.2f}x   slurm-dsl/(b) {ours / floor:5.2f}x"
              + (f"   compared {medians['compared']:7.3f} = {medians['compared'] / floor:5.2f}x (b)"
                 if "compared" in medians else ""))
        added = {m: 1000 * (t - floor) for m, t in medians.items() if m in ("slurm-dsl", "compared", "(c) floor")}
        print(f"  {'':<15} added to (b): " + "   ".join(f"{m} {ms:+.0f} ms" for m, ms in added.items())
              + (f"   compared less slurm-dsl, the median of each round's: {1000 * medians['paired']:+.0f} ms"
                 if "paired" in medians else ""))
    for count in (1000, 10000):
        print(f"  peak Python memory of run_many over {count} ids: {memory(count):.1f} MiB")


if __name__ == "__main__":
    main()
