"""The scale benchmark: slurm-dsl's commands at 1k to 100k queued jobs, beside the bare calls.

Not a test: it prints figures (issue 20 item 4, docs/benchmarks.md §10).  It raises the lab's
MaxJobCount (``SLURM_DSL_LAB_MAX_JOB_COUNT`` and ``contrib/lab/up``, which restarts slurmctld),
fills slurmctld with held jobs of its own up to each size in turn, and at each size measures, in
``--repeat`` interleaved rounds (medians):

- ``squeue -h -a -t all -r -O <lookup fields>`` with ``-j A``, ``-j A,B``, ``-j`` 100 ids, and no
  ``-j`` (every job), and ``sdiag``: the lookups' raw costs (docs/lookups.md §1);
- bare ``scontrol hold|release A,B``, ``scontrol hold A``, ``scontrol hold <100 ids>``;
- ``slurm-dsl hold A B``, ``release A B``, ``hold A``, ``hold`` of the 100 ids, and ``sweep`` of a
  fresh SQLite ledger holding 100 objects whose bit is not clear (live held jobs at Requeue=0):
  the installed entry point, as an admin runs it, each size with a fresh ledger.

slurm-dsl looks jobs up as the package installs it: with slurm-dsl-jobinfo (contrib/jobinfo,
built from this checkout against the lab's libslurm, and named by ``$SLURM_DSL_JOBINFO``), or
with squeue alone (``--jobinfo none``, as a pip install without the helper does).

Then a markdown table, the issue's targets with their verdicts, and one profile at the largest
size (``-vv``, and how many squeue, sdiag and scontrol processes each command started).  At the
end, however it ends (an error, Ctrl-C, SIGTERM), it scancels exactly its own jobs (their ids,
then their run's unique job name for any whose sbatch was cut short) and puts MaxJobCount back
(waiting first, if the cancelled jobs would exceed it, for slurmctld to purge them: MinJobAge).

The jobs: ``sbatch --hold --no-requeue -o /dev/null --begin=now+7days --time=10 -J <name> --wrap
'sleep 600'``, ``--parallel`` sbatch processes at a time.  Not arrays: a pending array is one job
record until its tasks are split off, so it would not load slurmctld as many jobs do.  The begin
time keeps a released job pending (Reason=BeginTime) so that a hold after a release always finds
it pending, never started on one of the lab's few slots.

    python -m benchmarks.bench_scale [--sizes 1000,10000,50000,100000] [--repeat 7]
                                     [--parallel 3] [--cli PATH] [--jobinfo build|none|PATH]
                                     [--leave-lab]

Run it on a lab of its own (it restarts slurmctld and fills it): ``contrib/lab/chroot --run
'python -m benchmarks.bench_scale --leave-lab' bookworm``, whose lab is thrown away when the run
ends, so that the run need not restore it (cancel its jobs, wait for slurmctld to purge them,
restore MaxJobCount: ~12 min after 100,000 jobs).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from benchmarks.bench_bulk import SYSTEM_PYTHON, installed, timed
from benchmarks.bench_lookup import SDIAG, squeue
from benchmarks.bench_sweep import build
from slurm_dsl.host.binaries import DEFAULT_SQUEUE
from slurm_dsl.lookups.squeue import JOBINFO_ENV
from tests import lab

SCONTROL = "/usr/bin/scontrol"
DEFAULT_SIZES = "1000,10000,50000,100000"
MAX_JOB_COUNT_VAR = "SLURM_DSL_LAB_MAX_JOB_COUNT"
HEADROOM = 2000  # MaxJobCount above the largest size and the jobs held before: other work's jobs
JOB_ARGS = ("--hold", "--no-requeue", "--begin=now+7days", "--time=10", "--wrap", "sleep 600")
CANCEL_CHUNK = 2000
SUBMIT_ATTEMPTS = 5
UP_ATTEMPTS = 3

# The rows, in the table's order: (key, what the table calls it).
ROWS: Tuple[Tuple[str, str], ...] = (
    ("sq1", "`squeue ... -j A` (1 id)"),
    ("sq2", "`squeue ... -j A,B`"),
    ("sq100", "`squeue ... -j` 100 ids"),
    ("sqall", "`squeue ...` every job"),
    ("sdiag", "`sdiag`"),
    ("bare release 2", "bare `scontrol release A,B`"),
    ("bare hold 2", "bare `scontrol hold A,B`"),
    ("dsl hold 2", "`slurm-dsl hold A B`"),
    ("dsl release 2", "`slurm-dsl release A B`"),
    ("bare hold 1", "bare `scontrol hold A`"),
    ("dsl hold 1", "`slurm-dsl hold A` (1 id)"),
    ("bare hold 100", "bare `scontrol hold` 100 ids (one list call)"),
    ("dsl hold 100", "`slurm-dsl hold` 100 ids"),
    ("dsl sweep 100", "`slurm-dsl sweep`, 100 objects"),
)
# What slurm-dsl adds over the bare call that does the same work.
ADDED: Tuple[Tuple[str, str], ...] = (
    ("dsl hold 1", "bare hold 1"),
    ("dsl hold 2", "bare hold 2"),
    ("dsl release 2", "bare release 2"),
    ("dsl hold 100", "bare hold 100"),
)
ADDED_RATIO = 1.5  # at the largest size, at most this times what it adds at the smallest
RELEASE_EXTRA_MS = 50.0  # release A B: at most this much more than the bare call
HOLD_100_RATIO = 1.5  # hold of 100 ids: at most this times the bare list call
SWEEP_RATIO = 1.5  # sweep of 100 objects: at most this times its time at the smallest size

Medians = Mapping[int, Mapping[str, float]]  # size -> row key -> milliseconds


# --- the pure parts: targets and table (tests/test_bench_scale.py) -----------------------------


@dataclass(frozen=True)
class Verdict:
    target: str
    met: bool
    figures: str

    def line(self) -> str:
        return f"- {'met' if self.met else 'NOT MET'}: {self.target}: {self.figures}"


def verdicts(medians: Medians) -> List[Verdict]:
    """The issue's targets, judged between the smallest and the largest size measured."""
    small, large = min(medians), max(medians)
    at_small, at_large = medians[small], medians[large]
    found: List[Verdict] = []
    for ours, bare in ADDED:
        added_small = at_small[ours] - at_small[bare]
        added_large = at_large[ours] - at_large[bare]
        # What it adds cannot be less than nothing: a negative difference is noise, and counts as 0.
        bound = ADDED_RATIO * max(added_small, 0.0)
        found.append(Verdict(
            f"{ours[4:]}: added at {large:,} <= {ADDED_RATIO}x added at {small:,}",
            added_large <= bound,
            f"{added_large:.1f} ms ({at_large[ours]:.1f} - {at_large[bare]:.1f}) against"
            f" {ADDED_RATIO} x {added_small:.1f} = {bound:.1f} ms",
        ))
    extra = at_large["dsl release 2"] - at_large["bare release 2"]
    found.append(Verdict(
        f"release A B at {large:,}: <= {RELEASE_EXTRA_MS:.0f} ms more than bare release A,B",
        extra <= RELEASE_EXTRA_MS,
        f"{at_large['dsl release 2']:.1f} - {at_large['bare release 2']:.1f} = {extra:.1f} ms",
    ))
    ratio = at_large["dsl hold 100"] / at_large["bare hold 100"]
    found.append(Verdict(
        f"hold of 100 ids at {large:,}: <= {HOLD_100_RATIO}x the bare list call",
        ratio <= HOLD_100_RATIO,
        f"{at_large['dsl hold 100']:.1f} / {at_large['bare hold 100']:.1f} ms = {ratio:.2f}x",
    ))
    ratio = at_large["dsl sweep 100"] / at_small["dsl sweep 100"]
    found.append(Verdict(
        f"sweep of 100 objects at {large:,}: <= {SWEEP_RATIO}x its time at {small:,}",
        ratio <= SWEEP_RATIO,
        f"{at_large['dsl sweep 100']:.1f} / {at_small['dsl sweep 100']:.1f} ms = {ratio:.2f}x",
    ))
    return found


def table(medians: Medians, held: Mapping[int, int]) -> str:
    """The markdown table: a row per measurement, a column per size (ms), and what sdiag counted."""
    sizes = sorted(medians)
    lines = [
        "| jobs queued | " + " | ".join(f"{size:,}" for size in sizes) + " |",
        "|---|" + "---:|" * len(sizes),
        "| sdiag: pending + running | " + " | ".join(f"{held[size]:,}" for size in sizes) + " |",
    ]
    for key, name in ROWS:
        lines.append(f"| {name} | " + " | ".join(f"{medians[size][key]:.1f} ms" for size in sizes) + " |")
    for ours, bare in ADDED:
        lines.append(f"| slurm-dsl adds: `{ours[4:]}` | "
                     + " | ".join(f"{medians[size][ours] - medians[size][bare]:.1f} ms" for size in sizes) + " |")
    return "\n".join(lines)


def parse_sizes(text: str) -> List[int]:
    sizes = sorted({int(part) for part in text.split(",")})
    if not sizes or sizes[0] < 300:
        raise ValueError("sizes must be whole numbers of at least 300 (each round uses 203 of its jobs)")
    return sizes


def sdiag_held(text: str) -> int:
    """Jobs pending + running in sdiag's output."""
    counts = dict(re.findall(r"^\s*Jobs (pending|running):\s+(\d+)\s*$", text, re.MULTILINE))
    if set(counts) != {"pending", "running"}:
        raise ValueError(f"no 'Jobs pending' and 'Jobs running' lines in sdiag's output: {text[:200]!r}")
    return int(counts["pending"]) + int(counts["running"])


# --- the lab --------------------------------------------------------------------------------------


def check(argv: Sequence[str], timeout: float = 120.0, env: Optional[Mapping[str, str]] = None) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False,
                          env=None if env is None else dict(env), stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"bench_scale: {' '.join(argv)[:200]} exited {done.returncode}:"
                         f" {(done.stderr or done.stdout)[-800:]}")
    return done.stdout


def config_value(name: str) -> str:
    for line in check([SCONTROL, "show", "config"]).splitlines():
        key, _, value = line.partition("=")
        if key.strip() == name:
            return value.strip()
    raise SystemExit(f"bench_scale: no {name} in scontrol show config")


def held_when_counted(at_least: int, timeout: float = 180.0) -> Tuple[int, float]:
    """sdiag's pending + running once it counts ``at_least`` jobs, and the seconds that took:
    slurmctld refreshes those counters on its own clock (22.05: some 30 s after a fill)."""
    start = time.monotonic()
    while (held := sdiag_held(check([SDIAG]))) < at_least and time.monotonic() - start < timeout:
        time.sleep(1.0)  # polled: the condition is the count itself
    return held, time.monotonic() - start


def records_now() -> int:
    """Every job record slurmctld holds, finished ones kept for MinJobAge included."""
    return len(check([DEFAULT_SQUEUE, "-h", "-a", "-t", "all", "-r", "-o", "%i"], timeout=600).split())


def set_max_job_count(value: Optional[str]) -> None:
    """contrib/lab/up with SLURM_DSL_LAB_MAX_JOB_COUNT=value (None: unset), which rewrites our
    slurm.conf and restarts slurmctld when it changed; up waits until the lab is usable again."""
    env = {k: v for k, v in os.environ.items() if k != MAX_JOB_COUNT_VAR}
    if value is not None:
        env[MAX_JOB_COUNT_VAR] = value
    env.setdefault("SLURM_DSL_LAB_TIMEOUT", "300")  # a restart with 100k jobs saves and loads them all
    print(f"contrib/lab/up with {MAX_JOB_COUNT_VAR}={value if value is not None else '(unset)'} ...", flush=True)
    # Again when up gives up: with many job records slurmctld can take longer to stop (it saves
    # them all) than up waits, 30 s; it stops anyway, and the next up starts it with the new file.
    for attempt in range(UP_ATTEMPTS):
        done = subprocess.run([str(lab.LAB_UP)], capture_output=True, text=True, timeout=900, env=env, check=False)
        if done.returncode == 0:
            return
        print(f"  contrib/lab/up exited {done.returncode} (attempt {attempt + 1} of {UP_ATTEMPTS}):"
              f" {done.stderr.strip().splitlines()[-1:]}", flush=True)
    raise SystemExit(f"bench_scale: contrib/lab/up failed {UP_ATTEMPTS} times: {done.stderr[-800:]}")


class Jobs:
    """The held jobs this run submitted: their ids, and the unique name they all carry."""

    def __init__(self) -> None:
        self.name = f"slurm-dsl-bench-scale-{os.urandom(6).hex()}"
        self.ids: List[str] = []
        self.retries = 0
        self._lock = threading.Lock()

    def fill(self, count: int, parallel: int) -> float:
        """Submit held jobs until this run has ``count``; the seconds it took."""
        start = time.perf_counter()
        need = count - len(self.ids)
        stop = threading.Event()
        errors: List[BaseException] = []
        with self._lock:
            todo = [need]

        def worker() -> None:
            while not stop.is_set():
                with self._lock:
                    if todo[0] <= 0:
                        return
                    todo[0] -= 1
                try:
                    job = self._submit()
                except BaseException as exc:  # handed to the main thread, which raises it
                    errors.append(exc)
                    stop.set()
                    return
                with self._lock:
                    self.ids.append(job)

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(parallel)]
        for thread in threads:
            thread.start()
        try:
            last = time.monotonic()
            while alive := [thread for thread in threads if thread.is_alive()]:
                alive[0].join(timeout=0.5)  # with a timeout: Ctrl-C reaches this thread
                if time.monotonic() - last > 30:
                    last = time.monotonic()
                    print(f"  {len(self.ids):,} jobs submitted ({time.perf_counter() - start:.0f} s)", flush=True)
        finally:
            stop.set()  # an interrupt: the workers end after the sbatch each runs now
            for thread in threads:
                thread.join()
        if errors:
            raise SystemExit(f"bench_scale: sbatch failed: {errors[0]}")
        return time.perf_counter() - start

    def _submit(self) -> str:
        """One held job; again after a failure: with tens of thousands of jobs, slurmctld can be
        busier than the lab's MessageTimeout (3 s) and sbatch gives up ('Socket timed out').  Such
        a job may still have been created: the run's name finds it at the end."""
        for attempt in range(SUBMIT_ATTEMPTS):
            try:
                return lab.submit("-J", self.name, *JOB_ARGS)
            except lab.LabError as exc:
                if attempt == SUBMIT_ATTEMPTS - 1:
                    raise
                with self._lock:
                    self.retries += 1
                    if self.retries <= 3:
                        print(f"  sbatch failed, again: {str(exc)[-160:]}", flush=True)
        raise AssertionError("unreachable")

    def cancel(self) -> None:
        """scancel exactly these jobs, by id in chunks, then by the run's name (a job whose
        sbatch was interrupted after slurmctld took it but before its id was read)."""
        ids = list(self.ids)
        chunks = [ids[i:i + CANCEL_CHUNK] for i in range(0, len(ids), CANCEL_CHUNK)]
        print(f"scancel {len(ids):,} jobs of this run ...", flush=True)
        for chunk in chunks:
            subprocess.run(["scancel", *chunk], capture_output=True, timeout=600, check=False)
        subprocess.run(["scancel", f"--name={self.name}"], capture_output=True, timeout=600, check=False)
        self.ids.clear()


# --- the measurements --------------------------------------------------------------------------


def run_ok(argv: Sequence[str], env: Optional[Mapping[str, str]] = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=300,
                          env=None if env is None else dict(env))
    if done.returncode != 0:
        raise SystemExit(f"bench_scale: {' '.join(argv)[:300]} exited {done.returncode}: {done.stderr[-800:]}")
    return done


@dataclass
class Work:
    """The jobs each round works on, all held between rounds."""

    pair: List[str]  # A, B
    single: str  # hold A (1 id): a job of its own, so that the pair's state stays simple
    hundred: List[str]
    swept: List[str]  # the sweep's 100 objects


QUIET = 1.5  # seconds before each timed row (``rounds``): longer than a pass at 100k and its start's delay


def rounds(command: List[str], work: Work, ledger: str, base: str, repeat: int) -> Dict[str, float]:
    """Median milliseconds of every row over ``repeat`` rounds.  Each round runs every row once,
    in the same order, each real work: what a release releases the next hold holds again.

    Before each timed row the run pauses ``QUIET`` seconds, then an untimed single-job squeue
    returns once slurmctld's job lock is free: what the row before set off in slurmctld is over.
    A release queues a scheduling pass through every job (~0.5 s at 100k, under the job lock)
    that slurmctld starts a little later, so a probe alone, right after it, may come before the
    pass, and the next call, bare or not, would be timed with its wait (the * of
    docs/benchmarks.md §10's first run)."""
    def dsl(*args: str) -> Callable[[], object]:
        return lambda: run_ok([*command, *args, "--timeout", "60", "--ledger", ledger])

    def bare(*args: str) -> Callable[[], object]:
        return lambda: run_ok([SCONTROL, *args])

    pair, hundred = ",".join(work.pair), ",".join(work.hundred)
    sweep_ledger = str(Path(ledger).with_name("sweep.sqlite3"))

    def sweep() -> None:
        run_ok([*command, "sweep", "--lookup", "squeue", "--ledger", sweep_ledger])

    # (key or None for an untimed step, action), in the order each round runs them.
    steps: List[Tuple[Optional[str], Callable[[], object]]] = [
        ("sq1", squeue("-j", work.pair[0])),
        ("sq2", squeue("-j", pair)),
        ("sq100", squeue("-j", hundred)),
        ("sqall", squeue()),
        ("sdiag", lambda: run_ok([SDIAG])),
        ("bare release 2", bare("release", pair)),
        ("bare hold 2", bare("hold", pair)),
        ("dsl release 2", dsl("release", *work.pair)),
        ("dsl hold 2", dsl("hold", *work.pair)),
        (None, bare("release", work.single)),
        ("bare hold 1", bare("hold", work.single)),
        (None, bare("release", work.single)),
        ("dsl hold 1", dsl("hold", work.single)),
        (None, bare("release", hundred)),
        ("bare hold 100", bare("hold", hundred)),
        (None, bare("release", hundred)),
        ("dsl hold 100", dsl("hold", *work.hundred)),
        (None, lambda: shutil.copyfile(base, sweep_ledger)),
        ("dsl sweep 100", sweep),
    ]
    spent: Dict[str, List[float]] = {key: [] for key, _ in steps if key is not None}
    quiet = squeue("-j", work.single)  # a single-job RPC: it returns once the job lock is free
    for _ in range(repeat):
        for key, action in steps:
            if key is None:
                action()
            else:
                time.sleep(QUIET)
                quiet()
                spent[key].append(timed(action) * 1e3)
    return {key: statistics.median(values) for key, values in spent.items()}


def spanned(directory: Path, name: str, real: Path, stamps: Path) -> Path:
    """``name`` in ``directory``: a bash script that runs ``real`` and then stamps when it started
    and ended (``name START END``), for the profile's timeline.  Not ``exec``: a signal meant for
    the program reaches the script; the profile's commands are never stopped, so it makes no
    difference there."""
    path = directory / name
    path.write_text(
        "#!/bin/bash\n"
        "start=$EPOCHREALTIME\n"
        f'{shlex.quote(str(real))} "$@"\n'
        "status=$?\n"
        f"printf '%s %s %s\\n' {name} \"$start\" \"$EPOCHREALTIME\" >> {shlex.quote(str(stamps))}\n"
        'exit "$status"\n'
    )
    path.chmod(0o755)
    return path


def timeline(stamps: Path, start: float) -> str:
    """Each stamped process as ``name start..end`` in ms from the command's start, in start order."""
    spans = sorted((float(begun), float(ended), name) for name, begun, ended in
                   (line.split() for line in stamps.read_text().splitlines() if line))
    return ", ".join(f"{name} {(begun - start) * 1e3:.0f}..{(ended - start) * 1e3:.0f}" for begun, ended, name in spans)


def profile(command: List[str], work: Work, ledger: str, base: str, tmp: Path) -> None:
    """At the largest size: each slurm-dsl command once with -vv, through stamped squeue, sdiag and
    scontrol, to show which lookup the plan chose, how many processes each command started and
    when each ran (ms from the command's start)."""
    stamps = tmp / "stamps"
    bin_dir = tmp / "stamped"
    bin_dir.mkdir(exist_ok=True)
    env = dict(os.environ)
    env["SLURM_DSL_SQUEUE"] = str(spanned(bin_dir, "squeue", Path(DEFAULT_SQUEUE), stamps))
    env["SLURM_DSL_SCONTROL"] = str(spanned(bin_dir, "scontrol", Path(SCONTROL), stamps))
    if env.get(JOBINFO_ENV):
        env[JOBINFO_ENV] = str(spanned(bin_dir, "slurm-dsl-jobinfo", Path(env[JOBINFO_ENV]), stamps))
    spanned(bin_dir, "sdiag", Path(SDIAG), stamps)  # found beside squeue
    sweep_ledger = str(Path(ledger).with_name("sweep.sqlite3"))
    shutil.copyfile(base, sweep_ledger)
    operation = ["--timeout", "60", "--ledger", ledger]
    commands = [
        (["release", *work.pair], operation),
        (["hold", *work.pair], operation),
        (["release", *work.hundred], operation),
        (["hold", *work.hundred], operation),
        (["sweep"], ["--lookup", "squeue", "--ledger", sweep_ledger]),
    ]
    for args, options in commands:
        stamps.write_text("")
        began = time.time()
        start = time.perf_counter()
        done = run_ok([*command, *args, *options, "-vv"], env=env)
        elapsed = (time.perf_counter() - start) * 1e3
        names = [line.split()[0] for line in stamps.read_text().splitlines() if line]
        shown = " ".join(args) if len(args) <= 3 else f"{args[0]} <{len(args) - 1} ids>"
        print(f"\nslurm-dsl {shown} -vv: {elapsed:.0f} ms; processes: "
              + ", ".join(f"{names.count(n)} {n}" for n in ("squeue", "slurm-dsl-jobinfo", "sdiag", "scontrol")))
        print(f"    when (ms from its start): {timeline(stamps, began)}")
        # The log, less the result lines: which lookup ran shows in the processes it started.
        for line in [line for line in done.stderr.splitlines() if not line.endswith(": ok")][:12]:
            print(f"    {line[:200]}")


# --- the run --------------------------------------------------------------------------------------


def jobinfo(choice: str, tmp: Path) -> str:
    """``$SLURM_DSL_JOBINFO`` for the measured commands: the helper built here, none (""), or PATH."""
    if choice == "none":
        return ""
    if choice != "build":
        return choice
    out = tmp / "slurm-dsl-jobinfo"
    check([str(Path(__file__).resolve().parents[1] / "contrib" / "jobinfo" / "build"), str(out)])
    return str(out)


def _terminate(signum: int, frame: Optional[FrameType]) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="jobs queued at each step (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=7, help="rounds at each size (default: %(default)s)")
    parser.add_argument("--parallel", type=int, default=3, help="sbatch processes at a time (default: %(default)s)")
    parser.add_argument("--cli", metavar="PATH", help="the slurm-dsl command to measure (default: this checkout,"
                        " installed into a throwaway venv as pip installs it)")
    parser.add_argument("--python", default=SYSTEM_PYTHON if Path(SYSTEM_PYTHON).exists() else sys.executable,
                        help="the Python to install it with (default: %(default)s)")
    parser.add_argument("--jobinfo", default="build", metavar="build|none|PATH",
                        help="slurm-dsl-jobinfo for slurm-dsl's lookups: built from this checkout (build), none"
                        " (squeue alone), or the one at PATH (default: %(default)s)")
    parser.add_argument("--leave-lab", action="store_true",
                        help="leave the lab as the run left it (its jobs queued, MaxJobCount raised), for a lab"
                        " thrown away when the run ends: contrib/lab/chroot --run's (the restore waits ~12 min"
                        " for slurmctld to purge 100,000 cancelled jobs)")
    args = parser.parse_args(argv)
    if args.jobinfo not in ("build", "none") and not args.jobinfo.startswith("/"):
        parser.error("--jobinfo: build, none or an absolute path")
    try:
        sizes = parse_sizes(args.sizes)
    except ValueError as exc:
        parser.error(f"--sizes: {exc}")
    if args.repeat < 1 or not 1 <= args.parallel <= 16:
        parser.error("--repeat must be at least 1, --parallel 1 to 16")
    reason = lab.lab_available()
    if reason is not None:
        print(f"bench_scale: the lab is not usable: {reason}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, _terminate)
    original_var = os.environ.get(MAX_JOB_COUNT_VAR)
    original = int(config_value("MaxJobCount"))
    min_job_age = config_value("MinJobAge")
    before = records_now()
    wanted = sizes[-1] + before + HEADROOM
    raised = wanted > original
    jobs = Jobs()
    medians: Dict[int, Dict[str, float]] = {}
    held: Dict[int, int] = {}
    fill_seconds: Dict[int, float] = {}
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))  # 0700: the ledger's directory must be private
    try:
        print(f"MaxJobCount {original}, MinJobAge {min_job_age}, {before} job records before this run", flush=True)
        if raised:
            set_max_job_count(str(wanted))
            if int(config_value("MaxJobCount")) < wanted:
                raise SystemExit(f"bench_scale: MaxJobCount is still {config_value('MaxJobCount')} after"
                                 f" contrib/lab/up (is this lab's slurm.conf up's?); {wanted} needed")
        command = [args.cli] if args.cli else installed(args.python, tmp / "venv")
        os.environ[JOBINFO_ENV] = jobinfo(args.jobinfo, tmp)
        print(f"slurm-dsl's lookups: {os.environ[JOBINFO_ENV] or 'squeue alone (no slurm-dsl-jobinfo)'}", flush=True)
        for size in sizes:
            print(f"filling to {size:,} jobs of this run ({args.parallel} sbatch at a time) ...", flush=True)
            fill_seconds[size] = jobs.fill(size, args.parallel)
            held[size], lag = held_when_counted(size)
            print(f"  {size:,} submitted in {fill_seconds[size]:.0f} s ({jobs.retries} sbatch retried so far);"
                  f" sdiag: {held[size]:,} pending + running"
                  f" ({lag:.0f} s after the last sbatch)", flush=True)
            ids = jobs.ids
            work = Work(pair=ids[0:2], single=ids[2], hundred=ids[3:103], swept=ids[103:203])
            ledger = str(tmp / f"ledger-{size}.sqlite3")  # fresh at each size
            base = str(tmp / f"sweep-base-{size}.sqlite3")
            build(base, work.swept)
            medians[size] = rounds(command, work, ledger, base, args.repeat)
            print("  " + ", ".join(f"{key} {value:.1f}" for key, value in medians[size].items()), flush=True)
        print(f"\nSlurm {check(['sinfo', '-V']).strip()}, medians of {args.repeat} rounds"
              f" (load average now {os.getloadavg()[0]:.2f}); fill times: "
              + ", ".join(f"{size:,} in {fill_seconds[size]:.0f} s" for size in sizes) + "\n")
        print(table(medians, held))
        print("\ntargets:")
        for verdict in verdicts(medians):
            print(verdict.line())
        profile(command, work, ledger, base, tmp)
    except KeyboardInterrupt as exc:
        print(f"\nbench_scale: interrupted ({exc or 'Ctrl-C'}): cleaning up", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the clean-up runs to its end
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if args.leave_lab:
            print("--leave-lab: the lab keeps this run's jobs and MaxJobCount", flush=True)
        else:
            jobs.cancel()
        if raised and not args.leave_lab:
            _wait_for_purge(original, min_job_age)
            set_max_job_count(original_var)
            print(f"MaxJobCount back to {config_value('MaxJobCount')}", flush=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _wait_for_purge(limit: int, min_job_age: str) -> None:
    """Poll until slurmctld holds fewer records than ``limit``: a restart with more records than
    MaxJobCount may not load them all (newer Slurm drops what exceeds it)."""
    give_up = time.monotonic() + 1800
    while (count := records_now()) >= limit:
        if time.monotonic() > give_up:
            raise SystemExit(f"bench_scale: {count} job records after 30 min; MaxJobCount left raised")
        print(f"  {count:,} job records >= MaxJobCount {limit}: waiting for slurmctld to purge the cancelled"
              f" ones (MinJobAge {min_job_age}) ...", flush=True)
        time.sleep(20)  # each look is a listing of every job: not more often


if __name__ == "__main__":
    sys.exit(main())
