#!/usr/bin/env python3
"""Requeue every job running on a node that is being drained, once, even across a crash.

A site plugin as a site would write it, on slurm-dsl's public API only (``import slurm_dsl``):

    drain_requeue.py NODE [--user USER] [--name JOBNAME] [--key KEY] [--retry N] [--timeout SECONDS]
                     [--any-state]

It lists the jobs running on NODE (``squeue -h -r -t RUNNING -w NODE -o %A``: one id per job,
array tasks by their own JobId), refuses a node that is not draining unless ``--any-state``, and
requeues them all with ``slurm_dsl.run_ops("requeue", ..., key=KEY, retry=N)``.  It uses what the
``slurm-dsl`` command on the host uses (``slurm_dsl.configuration()``: /etc/slurm-dsl/slurm-dsl.conf,
``$SLURM_DSL_CONFIG``, the environment): the same scontrol and squeue for its own questions, and,
unless ``--ledger`` names another, the same ledger, the one the host's sweeps read; an intent
recorded anywhere else would protect no Requeue flag.  The key defaults
to ``drain:NODE:<the node's drain reason time>`` (``scontrol show node``'s ``Reason=... [root@T]``
stamp), so one drain is one logical operation: if this program, or its host, dies half-way, running
it again requeues only the jobs whose requeue is absent, and never a job twice (docs/contract.md
§12 in the package's documentation).  One line per job on stdout; the exit status is the worst
row's, as the slurm-dsl command line's (0 ok, 10 rejected, 11 gone, 12 expired, 15 unknown), 2 for
a bad argument, 1 when nothing could be asked.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from typing import List, Optional

import slurm_dsl

EXIT = {"ok": 0, "rejected": 10, "not_found": 11, "expired": 12, "not_run": 13, "bit_set": 14, "unknown": 15}
NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
USER = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,63}")


def node_word(text: str) -> str:
    if not NODE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a node name: {text!r}")
    return text


def user_word(text: str) -> str:
    if not USER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a user name: {text!r}")
    return text


def run(argv: List[str], timeout: float = 30.0) -> str:
    """A Slurm client's stdout, or SystemExit(1) saying why it could not ask."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        sys.exit(f"drain_requeue: {argv[0]}: {exc}")
    if done.returncode != 0:
        sys.exit(f"drain_requeue: {' '.join(argv)}: {done.stderr.strip() or f'exit {done.returncode}'}")
    return done.stdout


def node_state(scontrol: str, node: str) -> tuple[str, Optional[str]]:
    """The node's State= word and its drain reason's time stamp (None: no reason set)."""
    shown = run([scontrol, "show", "node", node, "-o"])
    state = re.search(r"\bState=(\S+)", shown)
    stamp = re.search(r"\bReason=.*\[[^@\]]+@([0-9T:-]+)\]", shown)
    return (state.group(1) if state else "?"), (stamp.group(1) if stamp else None)


def running_jobs(squeue: str, node: str, user: Optional[str], name: Optional[str]) -> List[str]:
    argv = [squeue, "-h", "-r", "-t", "RUNNING", "-w", node, "-o", "%A"]
    if user is not None:
        argv += ["-u", user]
    if name is not None:
        argv += ["-n", name]
    return [word for word in run(argv).split() if word.isdigit()]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="drain_requeue.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("node", type=node_word, help="the node being drained")
    parser.add_argument("--user", type=user_word, help="only this user's jobs")
    parser.add_argument("--name", type=user_word, help="only the jobs of this name")
    parser.add_argument("--key", help="the idempotency key (default: drain:NODE:<drain reason time>)")
    parser.add_argument("--retry", type=int, default=2, help="requeue again a job whose requeue is absent (default 2)")
    parser.add_argument("--timeout", type=float, default=300.0, help="the whole run's deadline (default 300 s)")
    parser.add_argument("--settle-delay", type=float, help=argparse.SUPPRESS)  # the tests' short delay
    parser.add_argument("--any-state", action="store_true", help="requeue even if the node is not draining")
    parser.add_argument("--ledger", help="the slurm-dsl ledger (default: the one slurm-dsl uses: $SLURM_DSL_LEDGER,"
                        " else the config file's ledger, else the built-in one; slurm-dsl config shows it)")
    args = parser.parse_args(argv)

    try:
        # The scontrol and squeue slurm-dsl runs; a bad config file stops everything here.
        configured = slurm_dsl.configuration()
        scontrol, squeue = configured.scontrol_path, configured.squeue_path
    except slurm_dsl.DSLError as exc:
        print(f"drain_requeue: {exc}", file=sys.stderr)
        return 1
    state, stamp = node_state(scontrol, args.node)
    if "DRAIN" not in state and not args.any_state:
        print(f"drain_requeue: {args.node} is {state}, not draining: nothing done (--any-state to go on)",
              file=sys.stderr)
        return 2
    key = args.key or f"drain:{args.node}:{stamp or 'no-reason'}"
    jobs = running_jobs(squeue, args.node, args.user, args.name)
    if not jobs:
        print(f"drain_requeue: no running job on {args.node}", file=sys.stderr)
        return 0
    try:
        # ledger=None (no --ledger) and settle_delay=None are slurm-dsl's own, read as its command reads them.
        outcomes = slurm_dsl.run_ops(
            "requeue", jobs, timeout=args.timeout, ledger=args.ledger, key=key, retry=args.retry,
            settle_delay=args.settle_delay,
        )
    except slurm_dsl.DSLError as exc:  # nothing ran (a lookup that could not ask, the ledger)
        print(f"drain_requeue: {exc}", file=sys.stderr)
        return 1
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
