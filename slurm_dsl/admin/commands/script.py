"""``slurm-dsl script``: the wrapped sh script an operation would run (docs/contract.md §2); nothing runs."""

from __future__ import annotations

import argparse
from typing import IO

from ...core.model import Op
from ...core.script import render
from ...host.binaries import find_scontrol
from ...run.calls import new_nonce
from ...run.deadlines import steady
from ..exits import EXIT_OK
from ..options import Command, common_options, job_id, no_ledger, positive_seconds


def add(sub: argparse._SubParsersAction, name: str) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        name, help="print the script an operation would run, and run nothing",
        description="Print the deadline-wrapped sh script for OP on JOBID (with a fresh nonce). Nothing runs.",
    )
    p.add_argument(
        "op", choices=[o.value for o in Op if o.wrapped], metavar="OP", help="hold, release, requeue or restore"
    )
    p.add_argument("job_id", type=job_id, metavar="JOBID")
    p.add_argument("--timeout", required=True, type=positive_seconds, metavar="SECONDS")
    common_options(p)
    p.set_defaults(handler="script")


def run(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    deadline = steady() + args.timeout
    out.write(render(Op(args.op), args.job_id, deadline, new_nonce(), find_scontrol(args.scontrol)))
    return EXIT_OK


COMMAND = Command(add, {"script": run}, no_ledger)
