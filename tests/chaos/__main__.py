"""``python -m tests.chaos``: play a seeded chaos schedule on the lab, check its history, and say
how to replay it (docs/testing.md §6).

Runs as root against the lab ``contrib/lab/up`` brings up.  Its faults SIGKILL slurmctld and
MariaDB: run it in a chroot lab (``contrib/lab/chroot --run 'python -m tests.chaos ...'
bookworm``), never on a lab that others use.  Exit status: 0 no violation, 1 violations (each
printed with the history lines that prove it, and the command that replays the schedule), 2 a
usage error, 3 the lab could not be used.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterator, List, Optional, Sequence, Tuple

from tests.chaos import checker
from tests.chaos import schedule as sched
from tests.chaos.history import read, shown

ROOT = Path("/var/tmp/slurm-dsl-chaos")


def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, help="the schedule's seed (default: a random one, printed)")
    p.add_argument("--minutes", type=float, default=2.0, help="how long the schedule lasts (default 2)")
    p.add_argument("--ledger", choices=("sqlite", "mariadb", "auto"), default="auto",
                   help="SQLite on one host, or MariaDB shared by two (ctl-a, ctl-b); auto: drawn from the seed")
    p.add_argument("--without", default="", metavar="KIND,...",
                   help="fault kinds (or groups: " + ", ".join(sched.GROUPS) + ") to leave out; kinds: "
                   + ", ".join(sched.FAULT_KINDS))
    p.add_argument("--rate", default="", metavar="KIND=PER_MINUTE,...",
                   help="another rate for random fault kinds (0: none), e.g. slurmctld-kill-after-ack=4")
    p.add_argument("--only-slots", default=None, metavar="N,...", help="shrunk: only operations on these job slots")
    p.add_argument("--only-faults", default=None, metavar="N,...", help="shrunk: only these faults, by number")
    p.add_argument("--pair", action="store_true",
                   help="on contrib/lab/pair's primary/backup pair (brought up first): slurmctld faults and"
                   " takeovers hit its primary, which each fault starts again")
    p.add_argument("--settle-delay", type=float, default=2.0, help="the commands' and sweeps' --settle-delay")
    p.add_argument("--dir", type=Path, help=f"where the run's files go (default {ROOT}/SEED-TIME)")
    p.add_argument("--shrink", type=int, default=0, metavar="RUNS",
                   help="after a failing run, up to RUNS more runs to find a smaller schedule that still fails")
    p.add_argument("--check", type=Path, metavar="HISTORY", help="only check this history (no lab needed)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    return p.parse_args(argv)


def numbers(text: Optional[str]) -> Optional[FrozenSet[int]]:
    return None if text is None else frozenset(int(x) for x in text.split(",") if x.strip())


def rates(text: str) -> Tuple[Tuple[str, float], ...]:
    out = []
    for item in (x for x in text.split(",") if x.strip()):
        kind, _, value = item.partition("=")
        if kind not in sched.RANDOM_FAULTS:
            raise ValueError(f"--rate: {kind!r} is not a random fault kind ({', '.join(sched.RANDOM_FAULTS)})")
        out.append((kind, float(value)))
    return tuple(out)


def options_of(args: argparse.Namespace, seed: int) -> sched.Options:
    ledger = args.ledger
    if ledger == "auto":
        ledger = random.Random(seed).choice(("sqlite", "mariadb"))
    return sched.Options(seed=seed, minutes=args.minutes, ledger=ledger,
                         without=sched.expand(frozenset(x for x in args.without.split(",") if x)),
                         only_slots=numbers(args.only_slots), only_faults=numbers(args.only_faults),
                         fault_rates=rates(args.rate))


def replay(options: sched.Options, without: str, settle_delay: float, pair: bool = False) -> str:
    words = ["python", "-m", "tests.chaos", "--seed", str(options.seed), "--minutes", f"{options.minutes:g}",
             "--ledger", options.ledger]
    if pair:
        words += ["--pair"]
    if without:
        words += ["--without", without]
    if settle_delay != 2.0:
        words += ["--settle-delay", f"{settle_delay:g}"]
    if options.fault_rates:
        words += ["--rate", ",".join(f"{k}={v:g}" for k, v in options.fault_rates)]
    if options.only_slots is not None:
        words += ["--only-slots", ",".join(map(str, sorted(options.only_slots)))]
    if options.only_faults is not None:
        words += ["--only-faults", ",".join(map(str, sorted(options.only_faults)))]
    return " ".join(words)


def render(report: checker.Report, lines: List[Dict[str, Any]]) -> str:
    by_n = {x["n"]: x for x in lines}
    out = [f"{k}: {json.dumps(v) if isinstance(v, dict) else v}" for k, v in report.figures.items()]
    out.append(f"violations: {len(report.violations)}")
    for v in report.violations:
        out.append(f"VIOLATION {v.kind}{' (' + v.known + ')' if v.known else ''}: {v.message}")
        out.extend(f"    {shown(by_n[n])}" for n in v.lines if n in by_n)
    return "\n".join(out)


def play(options: sched.Options, directory: Path, settle_delay: float,
         pair: bool = False) -> Tuple[checker.Report, List[Dict[str, Any]]]:
    from tests.chaos.runner import Runner

    directory.mkdir(parents=True, exist_ok=True)
    schedule = sched.make(options)
    print(f"chaos: seed {options.seed}, {options.minutes:g} min, {options.ledger} ledger,"
          f" {len(schedule.events)} events, {len(schedule.faults())} faults; files in {directory}", file=sys.stderr)
    path = Runner(schedule, directory, settle_delay=settle_delay, pair=pair).run()
    lines = read(path)
    report = checker.check(lines)
    (directory / "report.json").write_text(json.dumps(
        {"figures": report.figures, "violations": [v.__dict__ for v in report.violations]}, indent=1, default=list))
    return report, lines


def implicated(report: checker.Report, lines: List[Dict[str, Any]]) -> Tuple[FrozenSet[int], float]:
    """The slots of the jobs the violations name, and the latest time the lines they cite show."""
    slot_of = {str(x["job"]): x["slot"] for x in lines if x["type"] == "job" and x.get("slot") is not None}
    t0 = next(float(x["t"]) for x in lines if x["type"] == "run")
    by_n = {x["n"]: x for x in lines}
    slots = frozenset(slot_of[v.job] for v in report.violations if v.job in slot_of)
    times = [float(by_n[n].get("t", by_n[n].get("t0", t0))) for v in report.violations for n in v.lines
             if n in by_n and by_n[n]["type"] in ("invoke", "call", "fault")]
    return slots, (max(times) - t0 if times else math.inf)


def shrink(options: sched.Options, report: checker.Report, lines: List[Dict[str, Any]], runs: int,
           directory: Path, settle_delay: float, pair: bool = False) -> Tuple[sched.Options, str]:
    """Smaller schedules that still give a violation of the same kind, greedily: only the job
    slots the violations name, a schedule cut 20 s after the last line they cite, then half the
    faults at a time; at most ``runs`` runs.  The smallest found, and how far it got."""
    kinds = {v.kind for v in report.violations}
    slots, last = implicated(report, lines)

    def candidates(best: sched.Options) -> Iterator[sched.Options]:
        if slots and best.only_slots is None:
            yield replace(best, only_slots=slots)
        shorter = math.ceil((last + 20) / 6) / 10
        if shorter < best.minutes:
            yield replace(best, minutes=shorter)
        faults = sorted(f.number for f in sched.make(best).faults())
        if len(faults) >= 2:
            half = len(faults) // 2
            yield replace(best, only_faults=frozenset(faults[:half]))
            yield replace(best, only_faults=frozenset(faults[half:]))

    best, tried, attempt = options, {options}, 0
    while attempt < runs:
        candidate = next((c for c in candidates(best) if c not in tried), None)
        if candidate is None:
            break
        tried.add(candidate)
        attempt += 1
        print(f"chaos: shrinking, run {attempt} of at most {runs}: {replay(candidate, '', settle_delay, pair)}",
              file=sys.stderr)
        got, _ = play(candidate, directory / f"shrink-{attempt}", settle_delay, pair)
        if kinds & {v.kind for v in got.violations}:
            best = candidate
    before, after = size(options), size(best)
    how = (f"shrunk in {attempt} run(s) from {before[0]} job slots, {before[1]} faults, {before[2]:g} min"
           f" to {after[0]} job slots, {after[1]} faults, {after[2]:g} min")
    return best, how


def size(options: sched.Options) -> Tuple[int, int, float]:
    slots = len(options.only_slots) if options.only_slots is not None else len(sched.SLOTS)
    return slots, len(sched.make(options).faults()), options.minutes


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse(argv)
    if args.check is not None:
        lines = read(args.check)
        try:
            report = checker.check(lines)
        except ValueError as exc:
            print(f"chaos: {args.check}: {exc}", file=sys.stderr)
            return 2
        print(json.dumps({"figures": report.figures, "violations": [v.__dict__ for v in report.violations]},
                         default=list) if args.json else render(report, lines))
        return 1 if report.violations else 0
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    try:
        options = options_of(args, seed)
    except ValueError as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        return 2
    directory = args.dir or ROOT / f"{seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    from tests import lab

    try:
        report, lines = play(options, directory, args.settle_delay, args.pair)
    except lab.LabError as exc:
        print(f"chaos: {exc}", file=sys.stderr)
        return 3
    print(json.dumps({"figures": report.figures, "violations": [v.__dict__ for v in report.violations]},
                     default=list) if args.json else render(report, lines))
    sys.stdout.flush()  # the report before what stderr says of it
    if not report.violations:
        return 0
    command = replay(options, args.without, args.settle_delay, args.pair)
    print(f"chaos: replay: {command}", file=sys.stderr)
    if args.shrink > 0:
        best, how = shrink(options, report, lines, args.shrink, directory, args.settle_delay, args.pair)
        print(f"chaos: {how}; replay the smallest: {replay(best, args.without, args.settle_delay, args.pair)}",
              file=sys.stderr)
    print(f"chaos: in a chroot lab: contrib/lab/chroot --run {shlex.quote(command)} bookworm", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
