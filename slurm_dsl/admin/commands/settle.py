"""``slurm-dsl settle``: did an unknown operation take effect? (docs/contract.md §12)."""

from __future__ import annotations

import argparse
import logging
from typing import IO

from ...core.model import UsageError
from ...host.binaries import find_scontrol, find_squeue
from .. import render as show
from ..exits import EXIT_CODES, EXIT_NO_RECORD, EXIT_OK
from ..files import existing_ledger
from ..options import Command, common_options, days, job_id, lookup_options, output_options, settle_delay_option

log = logging.getLogger("slurm_dsl")

# run.settling's: the grammar imports no wing that acts (a test holds them equal).
SINCE_DAYS = 7

_SETTLE_EPILOG = """\
example:
  slurm-dsl settle 4211 4212 --json
  slurm-dsl settle --settle-delay 2      # every unsettled operation of the last 7 days

Each row: JOBID, operation id, op, result, effect (present, absent, gone, undecidable, or - when
there is no verdict yet), when it was settled (now, earlier, not_yet, running), and why.

exit status (an unknown row exits by its effect), the worst row decides:
  0 present   11 gone (or: none of the given jobs has a record)
  15 absent, undecidable, or no verdict yet (look again later)
  2 usage error (a bad job id: nothing ran)   1 any other error (no ledger, ledger unreadable)
"""


def add(sub: argparse._SubParsersAction, name: str) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        name,
        help="did an unknown operation take effect? settle it now from the job's record",
        description="Settle now the unknown operations the ledger recorded (results unknown, and operations"
        " whose process died before their result was written): look their jobs up in one squeue (or pyslurm)"
        " call and decide from each job's record whether the operation's effect is there: present, absent"
        " (only from a lookup at least the settle delay after the operation ended), gone (slurmctld no longer"
        " knows the job) or undecidable (a requeue without a baseline, or a later operation on the same field"
        " with no record from before it). The verdict is appended to the operation's history; its result is"
        " never changed. Every sweep does the same for the last 7 days. Given job ids: every unknown operation"
        " of those jobs, any age, those settled earlier too (their row says 'earlier'); none: the unsettled"
        " ones of the whole ledger started in the last 7 days (--since to widen). Needs the privileges of a"
        " sweep: run it as root or the SlurmUser, so that the lookup sees every job.",
        epilog=_SETTLE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("job_ids", nargs="*", type=job_id, metavar="JOBID",
                   help="plain decimal job id(s) (default: every unsettled operation of the last --since days)")
    p.add_argument("--since", type=days, metavar="DAYS",
                   help="without JOBIDs: settle the operations started in the last DAYS days (default"
                   f" {SINCE_DAYS}, as every sweep does); with JOBIDs their operations are settled, whatever"
                   " their age")
    settle_delay_option(p)
    output_options(p, "one JSON object per operation (kind settle)")
    lookup_options(p)
    common_options(p)
    p.set_defaults(handler="settle")


def run(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from ...lookups.choose import make_lookup
    from ...run.settling import DAY, SINCE_DAYS, settle_rows
    from ...run.tracked import current_actor

    if args.job_ids and args.since is not None:
        raise UsageError("--since goes only without JOBIDs: the given jobs' operations are settled whatever their age")
    job_ids = list(dict.fromkeys(args.job_ids)) or None
    days = SINCE_DAYS if args.since is None else args.since
    scontrol = find_scontrol(args.scontrol)
    lookup = make_lookup(args.lookup, find_squeue(args.squeue, scontrol))
    # No lease and no sweep lock: a verdict is appended next to its row and changes no object.
    with existing_ledger(args.ledger) as ledger:
        report = settle_rows(ledger, lookup, job_ids=job_ids, since=ledger.now() - days * DAY,
                             settle_delay=args.settle_delay, by=f"settle, {current_actor()}", scontrol=scontrol)
    if report.lookup_error is not None:
        log.warning("settle: could not look jobs up: %s; nothing was settled", report.lookup_error)
    if report.unseen is not None:
        log.warning("settle: %s", report.unseen)
    out.write(show.settle_text(report, lookup.name, days if job_ids is None else None, args.json))
    code = max((EXIT_CODES[row.result] for row in report.rows), default=EXIT_OK)
    if job_ids is not None and len(report.no_record) == len(job_ids):
        code = max(code, EXIT_NO_RECORD)  # the ledger knows none of them, as history says
    return code


COMMAND = Command(add, {"settle": run})
