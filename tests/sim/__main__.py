"""``python -m tests.sim [--minutes M] [--seed S] [--steps N] [--plant NAME]``: play seeded
schedules of slurm-dsl's own commands in the simulated world until M minutes have passed (or
one seed's schedule with ``--seed`` and no ``--minutes``), print the figures, and on a violation
the replay command; exit 1 on any violation (docs/testing.md §7).  ``--plant`` plants a named old
bug first (``PLANTS``), to see how fast the schedules find it."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

from tests.sim.schedule import play


def _plant(module: object, name: str, value: object) -> None:
    setattr(module, name, value)


def _durability_13() -> None:
    from slurm_dsl.core import ledger_rules

    _plant(ledger_rules, "cleared_by_a_call", lambda outcome: False)


def _saved_at_once() -> None:
    from slurm_dsl.run import durable, looks

    for module in (looks, durable):
        _plant(module, "looks_needed", lambda *args, **kwargs: 0)


def _no_reread() -> None:
    from slurm_dsl.run import tracked

    _plant(tracked, "not_to_act", lambda *args, **kwargs: {})


def _not_alive() -> None:
    from slurm_dsl.run import settling

    _plant(settling, "owner_alive", lambda owner: None)  # as before §13.7: the times alone decide


def _no_intent() -> None:
    from slurm_dsl.core import ledger_rules

    _plant(ledger_rules, "intent", lambda op, nonce: None)


def _gone_at_once() -> None:
    from slurm_dsl.run import settling

    _plant(settling, "_unproven", lambda ledger, watch, gone: [])


PLANTS: Dict[str, Callable[[], None]] = {
    "durability-13": _durability_13,  # a requeue's cleared object not kept watched (Rule L8 dropped)
    "saved-at-once": _saved_at_once,  # no save seen needed before a clear counts as saved (Rule D2 dropped)
    "no-reread": _no_reread,  # a keyed job not decided again under its lease (keys acting twice)
    "not-alive": _not_alive,  # a run known alive no longer told: the times alone decide (§13.7 dropped)
    "gone-at-once": _gone_at_once,  # a purge taken as saved at once (Rule D8 dropped: finding 3)
    "no-intent": _no_intent,  # a requeue's intent not committed before its script (Rule L1 dropped)
}


def tally(seed: int, schedules: int, steps: int) -> int:
    """Play ``schedules`` schedules from ``seed`` (every other one on a pair), each to its first
    violation: how many found one, the first (seed and step) and which invariants fired."""
    found: List[str] = []
    kinds: Dict[str, int] = {}
    with tempfile.TemporaryDirectory() as directory:
        for n in range(schedules):
            played = play(Path(directory), seed + n, steps, pair=n % 2 == 1)
            if played.violations:
                kind = played.violations[0].split(":")[0]
                kinds[kind] = kinds.get(kind, 0) + 1
                found.append(f"seed {played.seed} step {len(played.steps)}{' (pair)' if n % 2 else ''}: "
                             f"{played.violations[0]}")
    print(f"found in {len(found)} of {schedules} schedules (seeds {seed}-{seed + schedules - 1});"
          f" invariants: {kinds}")
    for line in found[:3]:
        print(f"  {line[:400]}")
    return 1 if found else 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__)
    parser.add_argument("--minutes", type=float, default=None)
    parser.add_argument("--seed", type=int, default=None, help="the first seed (default: a fresh one)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--plant", choices=sorted(PLANTS), default=None)
    parser.add_argument("--schedules", type=int, default=None,
                        help="play this many schedules from --seed (every other one on a pair) and say how many"
                        " found a violation, the first, and which invariants fired")
    parser.add_argument("--pair", action="store_true", help="a 24.11 primary/backup pair (every other schedule"
                        " with --minutes: both)")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # the commands' own warnings: the figures are what is read here
    os.environ["SLURM_DSL_LOOKUP"] = "squeue"
    os.environ["SLURM_DSL_JOBINFO"] = ""
    os.environ.pop("SLURM_DSL_STATE_SAVE_LOCATION", None)
    if args.plant:
        PLANTS[args.plant]()
    seed = int.from_bytes(os.urandom(3), "big") if args.seed is None else args.seed
    if args.schedules is not None:
        return tally(seed, args.schedules, args.steps)
    until = time.monotonic() + (args.minutes or 0) * 60
    start, schedules, commands, steps = time.monotonic(), 0, 0, 0
    with tempfile.TemporaryDirectory() as directory:
        while True:
            pair = args.pair if args.minutes is None else (args.pair or schedules % 2 == 1)
            played = play(Path(directory), seed + schedules, args.steps, pair=pair)
            schedules, commands, steps = schedules + 1, commands + played.commands, steps + len(played.steps)
            if played.violations:
                print(f"violation in schedule {schedules} (seed {played.seed}): {played.violations[0]}")
                again = " --pair" if pair else ""
                print(f"replay: python -m tests.sim --seed {played.seed} --steps {len(played.steps)}{again}")
                return 1
            if args.minutes is None or time.monotonic() >= until:
                break
    took = time.monotonic() - start
    print(f"seeds {seed}-{seed + schedules - 1}: {schedules} schedules, {steps} steps, {commands} commands"
          f" in {took:.1f} s ({commands / took:.0f} commands/s), 0 violations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
