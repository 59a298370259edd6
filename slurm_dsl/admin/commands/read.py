"""``slurm-dsl read``: a script's captured stderr read as the operation would (docs/contract.md §6)."""

from __future__ import annotations

import argparse
import sys
from typing import IO

from ...core.model import DSLError, Op
from ...core.reader import read_outcome
from ...core.shown import shown
from ...host.files import NotRead, read_regular
from ...host.process import CAP
from ..options import RESULT_EPILOG, Command, common_options, job_id, no_ledger, output_options
from .ops import emit


def add(sub: argparse._SubParsersAction, name: str) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        name, help="read a script's captured stderr and print its outcome",
        description="Read the captured stderr of an operation's script (from FILE, or stdin) with its nonce"
        " and exit status, and print the outcome as the operation would have. Exits as the operation would.",
        epilog=RESULT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("op", choices=[o.value for o in Op], metavar="OP",
                   help="hold, release, requeue, restore or open")
    p.add_argument("job_id", type=job_id, metavar="JOBID")
    p.add_argument("--nonce", metavar="HEX", help="the script's nonce (not used for open)")
    p.add_argument("--exit-status", required=True, metavar="S", help="the script's exit status")
    p.add_argument("file", nargs="?", metavar="FILE", help="captured stderr (default: stdin)")
    output_options(p)
    common_options(p)
    p.set_defaults(handler="read")


# Bytes of captured stderr read at most: what a script's run keeps of it (host.process.CAP).
MAX_INPUT = CAP


def run(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    if args.file is None or args.file == "-":
        data = sys.stdin.buffer.read(MAX_INPUT + 1)
        if len(data) > MAX_INPUT:
            raise DSLError(f"cannot read standard input: longer than {MAX_INPUT} bytes, which no script's stderr is")
    else:
        found = read_regular(args.file, MAX_INPUT)
        if isinstance(found, NotRead):
            raise DSLError(f"cannot read {shown(args.file, 200)}: {found.why}")
        data = found
    outcome = read_outcome(args.op, args.job_id, data, args.exit_status, args.nonce)
    return emit([outcome], args.json, out)


COMMAND = Command(add, {"read": run}, no_ledger)
