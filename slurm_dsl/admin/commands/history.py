"""``slurm-dsl history``: what every recorded operation did to jobs (docs/contract.md §9.1, §10)."""

from __future__ import annotations

import argparse
from typing import IO

from ...core.model import UsageError
from .. import render as show
from ..exits import EXIT_LOST, EXIT_NO_RECORD, EXIT_OK
from ..files import existing_ledger
from ..options import Command, common_options, job_id, output_options

_HISTORY_EPILOG = """\
exit status:
  0 at least one of the jobs has a record   11 none of them has (the ledger never saw them)
  with --lost: 0 none is lost   16 some acknowledged operation was lost and not redone
  2 usage error (a bad job id)   1 any other error (no ledger at that path, ledger unreadable)

examples:
  slurm-dsl history 1234 --json
  slurm-dsl history --lost          # what slurmctld acknowledged and then lost, and how to redo each
"""


LOST_SHOWN = 10_000  # lost operations listed at most


def add(sub: argparse._SubParsersAction, name: str) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        name, help="what every recorded operation did to jobs, and who ran it",
        description="Print each job's object (its requeue bit, since when and why) and every operation the"
        " ledger recorded on it, oldest first: when, op, result, requeue bit, the bit before and after, each"
        " call's status and message, and who ran it. Reads the ledger; runs nothing.",
        epilog=_HISTORY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("job_ids", nargs="*", type=job_id, metavar="JOBID", help="plain decimal job id(s)")
    p.add_argument("--lost", action="store_true",
                   help="list instead the operations slurmctld acknowledged and then lost in a crash or takeover"
                   " (recorded by a sweep, settle or keyed run) that nothing has redone since, each with the"
                   " command that redoes it; of these jobs only, if given")
    output_options(p, "one JSON object per line: the job's object (kind object), then each operation (kind"
                   " operation); kind no_record for a job never seen")
    common_options(p)
    p.set_defaults(handler="history")


def run(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from .. import view

    if args.lost:
        with existing_ledger(args.ledger) as ledger:
            lost = [e for e in ledger.lost(LOST_SHOWN) if not args.job_ids or e.job_id in args.job_ids]
        out.write(show.lost_text(view.lost_json(lost), args.json))
        return EXIT_LOST if lost else EXIT_OK
    if not args.job_ids:
        raise UsageError("history: give job ids, or --lost")
    found = False
    with existing_ledger(args.ledger) as ledger:
        for job_id in dict.fromkeys(args.job_ids):
            entries = ledger.history(job_id)
            comments = ledger.comments([e.id for e in entries]) if entries else {}
            records = view.history_json(job_id, ledger.get(job_id), entries, comments)
            found = found or records[0]["kind"] != "no_record"
            out.write(show.history_text(records, args.json))
            out.flush()
    return EXIT_OK if found else EXIT_NO_RECORD


COMMAND = Command(add, {"history": run})
