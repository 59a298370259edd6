"""A library caller for a chaos run: one process that calls ``slurm_dsl.run_ops`` as a site
plugin would (docs/contract.md §8), and prints what it got as the command line's ``--json`` does.

Usage: python -m tests.chaos.caller OP --timeout S --ledger L --scontrol PATH
       [--key K] [--retry N] [--settle] [--settle-delay S] [--one-by-one] [--parallel N] JOB...

Its first line is ``{"kind": "deadline", "deadline": EPOCH}``: the deadline it passed, computed
once before the call, so the checker knows it exactly; on the real clock, when this process is on
a stepped one (a clock-step fault: the call gets its own clock's, as a site plugin's would).  Then
one JSON object per outcome (the command line's row), or one ``{"kind": "error", ...}`` and exit 1
(2 for a usage error) when the call raised one of the package's errors.  Anything else raised is a
traceback on stderr, which the checker reports.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.caller")
    parser.add_argument("op")
    parser.add_argument("jobs", nargs="+")
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--scontrol", required=True)
    parser.add_argument("--key")
    parser.add_argument("--retry", type=int, default=0)
    parser.add_argument("--settle", action="store_true")
    parser.add_argument("--settle-delay", type=float, default=10.0)
    parser.add_argument("--one-by-one", action="store_true")
    parser.add_argument("--parallel", type=int, default=1)
    args = parser.parse_args(argv)
    deadline = time.time() + args.timeout
    real = time.time()
    if os.environ.get("LD_PRELOAD"):  # on a stepped clock: the real one from a process that is not
        unfaked = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        real = float(subprocess.run(["date", "+%s.%N"], env=unfaked, capture_output=True, text=True,
                                    check=True).stdout)
    print(json.dumps({"kind": "deadline", "deadline": real + (deadline - time.time())}), flush=True)

    import slurm_dsl
    from slurm_dsl.admin.render import outcome_text

    try:
        outcomes = slurm_dsl.run_ops(
            args.op, args.jobs, deadline=deadline, scontrol=args.scontrol, ledger=args.ledger, key=args.key,
            retry=args.retry, settle=args.settle, settle_delay=args.settle_delay, one_by_one=args.one_by_one,
            parallel=args.parallel)
    except slurm_dsl.DSLError as exc:
        print(json.dumps({"kind": "error", "error": type(exc).__name__, "message": str(exc)}), flush=True)
        return 2 if isinstance(exc, slurm_dsl.UsageError) else 1
    for outcome in outcomes:
        sys.stdout.write(outcome_text(outcome, True))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
