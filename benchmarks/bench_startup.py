"""Start-up cost: how long ``slurm-dsl hold 7 --timeout 5`` takes to reach its first Slurm call.

Not a test: it prints figures.  The command runs against a fake ``squeue`` and ``scontrol``
(tests/fakes.py: job 7 is pending, the hold succeeds, so the command completes with ok), each
behind a one-line bash stamp that appends bash's ``$EPOCHREALTIME`` to a file as its first act.
The first stamp of a run is its first Slurm call (the squeue of the array check); its time
since the bench started the process is the figure.  Side by side, interleaved round by round
so that every figure sees the same machine load, and medians of the rounds:

- ``python -m slurm_dsl hold 7 --timeout 5`` (this checkout, first on PYTHONPATH), and the
  installed ``slurm-dsl`` entry point beside the interpreter, if there is one (also run with
  this checkout first on the path);
- bare interpreter start-up: ``python -c pass`` and ``python -S -c pass`` (no site, so no
  ``.pth`` import hook an editable install adds), timed to their exit, and ``python`` that
  starts the same stamped fake at once, timed like the command: the exact floor, the same
  bash stamp included.

slurm-dsl's own cost before its first call is its figure less the floor.  The runs write
bytecode into a throwaway ``PYTHONPYCACHEPREFIX`` (a warm-up round fills it first), as an
installed package has it: with ``PYTHONDONTWRITEBYTECODE`` every run would compile the package
again.  Last, the top self-times of ``python -X importtime -m slurm_dsl hold ...``, medians
of a few runs, and the total of what the command imports beyond the interpreter's own start.

    python -m benchmarks.bench_startup [--rounds 21] [--top 15] [--python PATH]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Mapping, Tuple

from tests.fakes import write_fake, write_fake_squeue

REPO = Path(__file__).resolve().parent.parent
JOB = "7"
COMMAND = ["hold", JOB, "--timeout", "5"]
_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def stamped(directory: Path, name: str, real: Path, stamps: Path) -> Path:
    """``name`` in ``directory``: a bash script that stamps the time it started, then is ``real``."""
    path = directory / name
    path.write_text(
        "#!/bin/bash\n"
        f"printf '%s %s\\n' {name} \"$EPOCHREALTIME\" >> {shlex.quote(str(stamps))}\n"
        f'exec {shlex.quote(str(real))} "$@"\n'
    )
    path.chmod(0o755)
    return path


def first_stamp(stamps: Path) -> Tuple[str, float]:
    lines = stamps.read_text().split("\n")
    name, when = lines[0].split()
    return name, float(when)


def run_to_first_call(argv: List[str], env: Mapping[str, str], stamps: Path) -> float:
    """Seconds from starting ``argv`` to the first stamp it caused; the command must succeed.
    Run in the stamps' directory: ``python -m`` puts the working directory first on the path,
    where a checkout would shadow the one PYTHONPATH names."""
    stamps.write_text("")
    start = time.time()
    done = subprocess.run(argv, env=env, cwd=stamps.parent, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_startup: {argv} exited {done.returncode}: {done.stdout[-300:]} {done.stderr[-500:]}")
    name, when = first_stamp(stamps)
    if argv[-len(COMMAND):] == COMMAND and name != "squeue":
        raise SystemExit(f"bench_startup: the first Slurm call was {name}, not the array check's squeue")
    return when - start


def run_to_exit(argv: List[str], env: Mapping[str, str]) -> float:
    start = time.time()
    subprocess.run(argv, env=env, cwd=env["PYTHONPYCACHEPREFIX"], check=True)
    return time.time() - start


def import_times(argv: List[str], env: Mapping[str, str]) -> Dict[str, int]:
    """Each module's self time (microseconds) in one ``-X importtime`` run of ``argv``."""
    done = subprocess.run(argv, env=env, cwd=env["PYTHONPYCACHEPREFIX"], capture_output=True, text=True, check=False)
    found: Dict[str, int] = {}
    for line in done.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match:
            found[match.group(4)] = found.get(match.group(4), 0) + int(match.group(1))
    return found


def cumulative(argv: List[str], env: Mapping[str, str]) -> int:
    """The cumulative microseconds of the last module ``-X importtime`` reports for ``argv``."""
    done = subprocess.run(argv, env=env, cwd=env["PYTHONPYCACHEPREFIX"], capture_output=True, text=True, check=True)
    match = _IMPORT_LINE.match(done.stderr.splitlines()[-1])
    if match is None:
        raise SystemExit(f"bench_startup: no -X importtime table from {argv}")
    return int(match.group(2))


def medians(samples: List[Dict[str, int]]) -> Dict[str, float]:
    names = {name for sample in samples for name in sample}
    return {name: statistics.median(sample.get(name, 0) for sample in samples) for name in names}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=21, help="interleaved rounds (default: %(default)s)")
    parser.add_argument("--top", type=int, default=15, help="import self-times shown (default: %(default)s)")
    parser.add_argument("--import-runs", type=int, default=5,
                        help="-X importtime runs whose medians are shown (default: %(default)s)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter (default: %(default)s)")
    parser.add_argument("--against", action="append", default=[], metavar="CHECKOUT",
                        help="also measure another checkout's `python -m slurm_dsl` in the same rounds"
                        " (e.g. the main branch's, for a before and after); repeatable")
    args = parser.parse_args()
    if args.rounds < 1 or args.import_runs < 1:
        parser.error("--rounds and --import-runs must be at least 1")
    python = args.python
    entry = Path(python).parent / "slurm-dsl"
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp_name:
        tmp = Path(tmp_name)
        stamps = tmp / "stamps"
        real = tmp / "real"
        real_squeue = write_fake_squeue(real, f"{JOB}|PENDING|0|0|1000|None")
        real_scontrol = write_fake(real, {})  # every call succeeds: the hold is ok
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        scontrol = stamped(bin_dir, "scontrol", real_scontrol, stamps)
        squeue = stamped(bin_dir, "squeue", real_squeue, stamps)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
        env.update(
            PYTHONPATH=str(REPO),
            PYTHONPYCACHEPREFIX=str(tmp),
            SLURM_DSL_SCONTROL=str(scontrol),
            SLURM_DSL_SQUEUE=str(squeue),
            SLURM_DSL_LEDGER=str(tmp / "ledger" / "ledger.sqlite3"),
        )
        spawn_fake = ("import os; os.waitpid(os.posix_spawn(os.environ['SLURM_DSL_SQUEUE'],"
                      " ['squeue', '--version'], os.environ), 0)")
        floor = "python starting the fake at once"
        to_call: Dict[str, Tuple[List[str], Dict[str, str]]] = {
            "python -m slurm_dsl hold 7 --timeout 5": ([python, "-m", "slurm_dsl", *COMMAND], env),
        }
        if entry.exists():
            to_call[f"{entry} hold 7 --timeout 5"] = ([str(entry), *COMMAND], env)
        checkouts = {"this checkout": env}
        for other in args.against:
            checkouts[other] = {**env, "PYTHONPATH": str(Path(other).resolve())}
            to_call[f"python -m slurm_dsl hold 7 --timeout 5, {other}"] = (
                [python, "-m", "slurm_dsl", *COMMAND], checkouts[other])
        to_call[floor] = ([python, "-c", spawn_fake], env)
        to_exit = {"python -c pass": [python, "-c", "pass"], "python -S -c pass": [python, "-S", "-c", "pass"]}

        for argv, its_env in to_call.values():  # warm-up: bytecode, the ledger created, the page cache
            run_to_first_call(argv, its_env, stamps)
        for argv in to_exit.values():
            run_to_exit(argv, env)
        names = list(to_call) + list(to_exit)
        samples: Dict[str, List[float]] = {name: [] for name in names}
        for round_no in range(args.rounds):
            order = names[round_no % len(names):] + names[: round_no % len(names)]  # each goes first in turn
            for name in order:
                if name in to_call:
                    samples[name].append(run_to_first_call(*to_call[name], stamps))
                else:
                    samples[name].append(run_to_exit(to_exit[name], env))
        median = {name: statistics.median(values) * 1000 for name, values in samples.items()}

        # Not timed: the import tables of the command, and of the bare interpreter to take off.
        bare = medians([import_times([python, "-X", "importtime", "-c", "pass"], env)
                        for _ in range(args.import_runs)])
        tables = {where: medians([import_times([python, "-X", "importtime", "-m", "slurm_dsl", *COMMAND], its_env)
                                  for _ in range(args.import_runs)])
                  for where, its_env in checkouts.items()}
        cli_import = {where: statistics.median(
                          cumulative([python, "-X", "importtime", "-c", "import slurm_dsl.admin.cli"], its_env)
                          for _ in range(args.import_runs))
                      for where, its_env in checkouts.items()}

    width = max(map(len, names))
    print(f"{python}: medians of {args.rounds} interleaved rounds, ms (load average now {os.getloadavg()[0]:.2f}):")
    for name in names:
        print(f"  {name:<{width}}  {median[name]:7.1f}")
    base = median[floor]
    print(f"\nto the first Slurm call, against the floor ({floor}: {base:.1f} ms) and python -c pass:")
    for name in to_call:
        if name != floor:
            print(f"  {name:<{width}}  {median[name] / base:.2f}x the floor; slurm-dsl's own cost"
                  f" {median[name] - base:5.1f} ms ({median[name] - median['python -c pass']:5.1f} ms more than"
                  " python -c pass)")

    print(f"\n-X importtime, medians of {args.import_runs} runs (it slows what it measures; the bare interpreter's"
          f" own {sum(bare.values()) / 1000:.1f} ms in {len(bare)} modules left out):")
    for where, table in tables.items():
        ours = {name: us for name, us in table.items() if name not in bare}
        own = sum(us for name, us in ours.items() if name.startswith("slurm_dsl")) / 1000
        print(f"  {where}: import slurm_dsl.admin.cli {cli_import[where] / 1000:.1f} ms cumulative; the whole hold"
              f" imports {len(ours)} modules, {sum(ours.values()) / 1000:.1f} ms self-time ({own:.1f} ms slurm_dsl's)")
    ours = {name: us for name, us in tables["this checkout"].items() if name not in bare}
    print(f"the top {args.top} self-times of this checkout's hold:")
    for name, us in sorted(ours.items(), key=lambda item: -item[1])[: args.top]:
        print(f"  {us / 1000:6.2f} ms  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
