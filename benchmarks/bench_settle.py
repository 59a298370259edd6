"""A sweep that settles 10,000 unknown operations vs the same sweep that settles none (issue 18
item 7; docs/contract.md §12: settling rides on the sweep's one lookup, no extra RPC).

Not a test: it prints figures.  Two SQLite ledgers are built once, alike but for one thing: each
holds N objects whose bit is not clear (an unknown requeue leaves its job ``may_be_set``) and one
requeue per job, with a baseline, started an hour ago.  In ``settle`` the first U of those
requeues ended ``unknown`` (so the sweep settles them: each job is gone, or a live lab job);
in ``none`` every requeue ended ``ok`` (nothing to settle).  Each round sweeps a fresh copy of
each, in alternating order, with the real squeue of the lab, counting the squeue processes (one
job-info RPC each).  The figures are the medians over the rounds, and two ratios: of those
medians, and the median of each round's own ratio (its ``settle`` sweep over its ``none`` sweep,
run one right after the other).  The second is the verdict: on a shared VM the same sweep's time
drifts by up to 2x over seconds (every part of it at once: docs/benchmarks.md §9.2), which moves
the ratio of medians by more than what is measured, while the two sweeps of one round share the
machine's state.

Each round then runs the same two sweeps as the admin's timer does, ``slurm-dsl sweep`` in a
process of its own, installed as contrib/README.md says (its squeue counted by a wrapper): the
same ratios for the command, start-up and output included.

    python -m benchmarks.bench_settle [--objects 10000] [--unknown 10000] [--live 4] [--rounds 9]
                                      [--no-command | --cli PATH] [--python PATH]

Target: the same number of squeue runs in both, and settle / none <= 1.5x.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

from benchmarks._ledgers import GONE_BASE, Counting
from benchmarks.bench_bulk import SYSTEM_PYTHON, installed
from slurm_dsl import Op
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import Outcome, Reason, RequeueBit, Result, Verdict
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.lookups.squeue import SqueueLookup
from slurm_dsl.run import settling
from slurm_dsl.run.settling import DEFAULT_LIMIT
from slurm_dsl.run.sweep import sweep
from slurm_dsl.run.tracked import Tracker
from tests import lab

AGO = 3600.0  # the operations started so long ago: far past any settle delay
TARGET = 1.5


def build(path: str, ids: List[str], to_settle: int) -> None:
    """N objects at ``may_be_set``: one unknown requeue each, every one but the first
    ``to_settle`` of them already settled (by an earlier sweep)."""
    with open_ledger(path) as ledger:
        started = ledger.now() - AGO
        baselines = {job: JobInfo(job, "RUNNING", False, 0, 1, "None") for job in ids}
        with ledger.batch():
            op_ids = ledger.begin_operations([(job, Op.REQUEUE, f"bench-{job}") for job in ids], started,
                                             actor="bench_settle", baselines=baselines, baseline_at=started,
                                             ends_by=started + 30)
            ledger.finish_operations([
                (op_id, Outcome(Op.REQUEUE, job, Result.UNKNOWN, RequeueBit.MAY_BE_SET, Reason.TIMED_OUT), b"")
                for job, op_id in zip(ids, op_ids)
            ], started + 10)
            ledger.add_settlements([(op_id, Verdict.GONE, started + 20, None, "benchmark: settled before")
                                    for op_id in op_ids[to_settle:]], started + 20, by="bench_settle")


class Parts:
    """The seconds the sweep spends in each part of settling: reading the unsettled operations,
    deciding their verdicts (reading their later operations included: ``later``), writing them
    (wrapped around the calls the sweep makes)."""

    NAMES = ("read", "later", "decide", "write")

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(self.NAMES, 0.0)

    def timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
        return call


def run(path: str, limit: int) -> Tuple[float, int, int, int, Dict[str, float]]:
    """One sweep of ``path``: its seconds, squeue runs, operations settled, objects done, and the
    seconds of each part of settling (``Parts``)."""
    counter, parts = Counting(), Parts()
    with Tracker(path, scontrol="/usr/bin/scontrol") as tracker, timing_parts(tracker, parts):
        start = time.perf_counter()
        report = sweep(tracker, SqueueLookup(run=counter), restore_timeout=15, settle_limit=limit, settle_delay=2)
        elapsed = time.perf_counter() - start
        assert report.handled, report.lookup_error
        settled = report.verdicts_written
    with open_ledger(path) as ledger:
        assert ledger.unsettled(ledger.now()) == [], "every unknown one settled"
    return elapsed, counter.calls, settled, len(report.swept), parts.seconds


@contextlib.contextmanager
def timing_parts(tracker: Tracker, parts: Parts) -> Iterator[None]:
    """``parts`` timing the sweep's ``ledger.to_settle`` and ``later_operations``, ``settling.decide`` and
    ``settling.write``."""
    ledger = tracker.ledger()
    saved = settling.decide, settling.write
    ledger.to_settle = parts.timed("read", ledger.to_settle)  # type: ignore[method-assign]
    ledger.later_operations = parts.timed("later", ledger.later_operations)  # type: ignore[method-assign]
    settling.decide = parts.timed("decide", settling.decide)
    settling.write = parts.timed("write", settling.write)
    try:
        yield
    finally:
        settling.decide, settling.write = saved
        del ledger.to_settle  # type: ignore[misc]
        del ledger.later_operations  # type: ignore[misc]


def command_run(command: List[str], path: str, squeue: str, count: Path) -> Tuple[float, int]:
    """One ``slurm-dsl sweep`` of ``path`` as the admin's timer runs it (a process of its own,
    ``squeue`` the counting one): its seconds and squeue runs."""
    before = count.stat().st_size if count.exists() else 0
    start = time.perf_counter()
    done = subprocess.run([*command, "sweep", "--ledger", path, "--squeue", squeue, "--settle-delay", "2"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"slurm-dsl sweep exited {done.returncode}: {done.stderr[-500:]}")
    return elapsed, count.stat().st_size - before


def counting_squeue(where: Path, count: Path) -> str:
    """A squeue that adds a byte to ``count`` for each run, then runs the lab's."""
    script = where / "squeue"
    script.write_text(f"#!/bin/sh\nprintf . >>'{count}'\nexec /usr/bin/squeue \"$@\"\n")
    script.chmod(0o755)
    return str(script)


def verdict(label: str, runs: Dict[str, List[Tuple[float, int]]]) -> None:
    """The two ratios of ``runs`` (seconds, squeue runs per sweep, by ledger), and the target's verdict."""
    none = statistics.median(r[0] for r in runs["none"])
    settle = statistics.median(r[0] for r in runs["settle"])
    same = {r[1] for r in runs["none"]} == {r[1] for r in runs["settle"]}
    paired = [s[0] / n[0] for s, n in zip(runs["settle"], runs["none"])]
    ratio = statistics.median(paired)
    print(f"{label}: none {none:.3f} s, settle {settle:.3f} s; squeue runs"
          f" {sorted({r[1] for r in runs['none']})} / {sorted({r[1] for r in runs['settle']})}"
          f" (equal: {'yes' if same else 'NO'}); ratio of the medians: {settle / none:.2f}x;"
          f" each round's ratio: {', '.join(f'{r:.2f}' for r in paired)}")
    print(f"{label}: median of the rounds' ratios settle / none: {ratio:.2f}x"
          f" (target <= {TARGET}x: {'met' if ratio <= TARGET and same else 'NOT met'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=10_000, help="objects (and requeues) in each ledger")
    parser.add_argument("--unknown", type=int, default=10_000, help="of those requeues, how many are unknown")
    parser.add_argument("--live", type=int, default=4, help="live lab jobs among the objects (held, 0 CPU)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-command", action="store_true",
                        help="measure the library's sweep() only, not also the `slurm-dsl sweep` command")
    parser.add_argument("--cli", metavar="PATH", help="the slurm-dsl command to measure (default: this checkout,"
                        " installed into a throwaway venv as contrib/README.md says)")
    parser.add_argument("--python", default=SYSTEM_PYTHON if Path(SYSTEM_PYTHON).exists() else sys.executable,
                        help="the Python to install it with (default: %(default)s)")
    args = parser.parse_args()
    if not 0 < args.unknown <= args.objects or not 0 <= args.live <= args.objects or args.rounds < 1:
        parser.error("need 0 < --unknown <= --objects, 0 <= --live <= --objects, --rounds >= 1")
    reason = lab.lab_available()
    if reason:
        print(f"bench_settle: no lab: {reason} (run contrib/lab/up)", file=sys.stderr)
        return 1
    live = [lab.submit("--hold", *lab.SLEEP_JOB) for _ in range(args.live)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            command = (
                None if args.no_command else [args.cli] if args.cli else installed(args.python, Path(tmp) / "venv")
            )
            count = Path(tmp) / "squeue-runs"
            squeue = counting_squeue(Path(tmp), count)
            ids = live + [str(GONE_BASE + i) for i in range(args.objects - len(live))]
            bases = {"none": 0, "settle": args.unknown}
            for name, unknown in bases.items():
                build(str(Path(tmp) / f"{name}.base.sqlite3"), ids, unknown)
            limit = max(DEFAULT_LIMIT, args.unknown)
            figures: Dict[str, List[Tuple[float, int, int, int, Dict[str, float]]]] = {name: [] for name in bases}
            commands: Dict[str, List[Tuple[float, int]]] = {name: [] for name in bases}
            for i in range(args.rounds):
                for name in (("none", "settle") if i % 2 == 0 else ("settle", "none")):
                    path = str(Path(tmp) / f"{name}.{i}.sqlite3")
                    shutil.copy(Path(tmp) / f"{name}.base.sqlite3", path)
                    figures[name].append(run(path, limit))
                if command is not None:
                    for name in (("none", "settle") if i % 2 == 0 else ("settle", "none")):
                        path = str(Path(tmp) / f"{name}.{i}.command.sqlite3")
                        shutil.copy(Path(tmp) / f"{name}.base.sqlite3", path)
                        commands[name].append(command_run(command, path, squeue, count))
            print(f"  {args.objects} objects ({len(live)} live lab jobs), {args.rounds} rounds, SQLite")
            for name, rows in figures.items():
                secs = statistics.median(r[0] for r in rows)
                print(f"  {name:>6}: {rows[0][3]} objects swept, {rows[0][2]} operations settled,"
                      f" {sorted({r[1] for r in rows})} squeue runs, median {secs:.2f} s"
                      f" (all: {', '.join(f'{r[0]:.2f}' for r in rows)})")
                print("          settling's parts, medians: " + ", ".join(
                    f"{part} {statistics.median(r[4][part] for r in rows):.3f} s" for part in Parts.NAMES))
            verdict("sweep()", {name: [(r[0], r[1]) for r in rows] for name, rows in figures.items()})
            if command is not None:
                verdict("slurm-dsl sweep", commands)
    finally:
        lab.cancel(*live)
    return 0


if __name__ == "__main__":
    sys.exit(main())
