#!/usr/bin/env python3
"""Requeue every job running on a node that is being drained, once, even across a crash.

A site plugin as a site would write it, on slurm-dsl's public API only (``import slurm_dsl``):

    drain_requeue.py NODE [--user USER] [--name JOBNAME] [--key KEY] [--retry N] [--timeout SECONDS]
                     [--any-state]

It refuses a node that is not draining unless ``--any-state``, then runs
``slurm_dsl.run_ops("requeue", select={"node": NODE, "state": "RUNNING", ...}, key=KEY, retry=N)``:
slurm-dsl lists the jobs (array tasks by their own JobIds) and records the set with the key, so a
rerun acts on that set, not on jobs that reached the node since.  The key defaults to
``drain:NODE:<the node's drain reason time>`` (``scontrol show node``'s ``Reason=... [root@T]``), so
one drain is one logical operation: run again after a crash, it requeues only the jobs whose requeue
is absent, never one twice (docs/contract.md §10.3, §12).  It uses what the ``slurm-dsl`` command
uses (``slurm_dsl.configuration()``): that scontrol and, unless ``--ledger`` names another, that
ledger, the one the host's sweeps read.  One line per job; the exit status is the worst row's, as
slurm-dsl's (0 ok, 10 rejected, 11 gone, 12 expired, 15 unknown), 2 for a bad argument, 1 when
nothing could be asked.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from typing import Dict, List, Optional

import slurm_dsl

EXIT = {"ok": 0, "rejected": 10, "not_found": 11, "expired": 12, "not_run": 13, "bit_set": 14, "unknown": 15}
NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def node_word(text: str) -> str:
    if not NODE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a node name: {text!r}")
    return text


def node_state(scontrol: str, node: str) -> tuple[str, Optional[str]]:
    """The node's State= word and its drain reason's time stamp (None: no reason set); SystemExit(1)
    saying why when scontrol could not tell."""
    argv = [scontrol, "show", "node", node, "-o"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        sys.exit(f"drain_requeue: {scontrol}: {exc}")
    if done.returncode != 0:
        sys.exit(f"drain_requeue: {' '.join(argv)}: {done.stderr.strip() or f'exit {done.returncode}'}")
    state = re.search(r"\bState=(\S+)", done.stdout)
    stamp = re.search(r"\bReason=.*\[[^@\]]+@([0-9T:-]+)\]", done.stdout)
    return (state.group(1) if state else "?"), (stamp.group(1) if stamp else None)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="drain_requeue.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("node", type=node_word, help="the node being drained")
    parser.add_argument("--user", help="only this user's jobs")
    parser.add_argument("--name", help="only the jobs of this name")
    parser.add_argument("--key", help="the idempotency key (default: drain:NODE:<drain reason time>)")
    parser.add_argument("--retry", type=int, default=2, help="requeue again a job whose requeue is absent (default 2)")
    parser.add_argument("--timeout", type=float, default=300.0, help="the whole run's deadline (default 300 s)")
    parser.add_argument("--settle-delay", type=float, help=argparse.SUPPRESS)  # the tests' short delay
    parser.add_argument("--any-state", action="store_true", help="requeue even if the node is not draining")
    parser.add_argument("--ledger", help="the slurm-dsl ledger (default: the one slurm-dsl uses: $SLURM_DSL_LEDGER,"
                        " else the config file's ledger, else the built-in one; slurm-dsl config shows it)")
    args = parser.parse_args(argv)

    try:
        scontrol = slurm_dsl.configuration().scontrol_path  # a bad config file stops everything here
    except slurm_dsl.DSLError as exc:
        print(f"drain_requeue: {exc}", file=sys.stderr)
        return 1
    state, stamp = node_state(scontrol, args.node)
    if "DRAIN" not in state and not args.any_state:
        print(f"drain_requeue: {args.node} is {state}, not draining: nothing done (--any-state to go on)",
              file=sys.stderr)
        return 2
    select: Dict[str, str] = {"node": args.node, "state": "RUNNING"}
    select.update({k: v for k, v in (("user", args.user), ("name", args.name)) if v is not None})
    try:
        # ledger=None (no --ledger) and settle_delay=None are slurm-dsl's own, read as its command reads them.
        outcomes = slurm_dsl.run_ops(
            "requeue", select=select, timeout=args.timeout, ledger=args.ledger,
            key=args.key or f"drain:{args.node}:{stamp or 'no-reason'}", retry=args.retry,
            settle_delay=args.settle_delay,
        )
    except slurm_dsl.InvalidInput as exc:
        print(f"drain_requeue: {exc}", file=sys.stderr)
        return 2
    except slurm_dsl.DSLError as exc:  # nothing ran (a lookup that could not ask, the ledger)
        print(f"drain_requeue: {exc}", file=sys.stderr)
        return 1
    if not outcomes:
        print(f"drain_requeue: no running job on {args.node} selected", file=sys.stderr)
        return 0
    worst = 0
    for outcome in outcomes:
        # A requeue whose outcome was unknown, settled by the job's record: present, absent, gone...
        effect = f" effect={outcome.effect.value}" if outcome.effect is not None else ""
        detail = f" ({outcome.detail})" if outcome.detail else ""
        print(f"{outcome.job_id} requeue {outcome.result.value}{effect}{detail}")
        worst = max(worst, EXIT[outcome.exits_as.value])
    return worst


if __name__ == "__main__":
    sys.exit(main())
