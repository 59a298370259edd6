"""``slurm-dsl ledger status|prune|migrate``: the ledger itself (docs/contract.md §9.1, §10)."""

from __future__ import annotations

import argparse
import logging
from typing import IO, Sequence

from ...core.ledger_rules import prune_before
from ...core.model import UsageError
from ...ledger.choose import open_ledger
from .. import render as show
from ..exits import EXIT_OK
from ..files import existing_ledger, same_location
from ..options import MAX_DAYS, Command, common_options, days, given, output_options

log = logging.getLogger("slurm_dsl")

_STATUS_EPILOG = """\
exit status:
  0 the status was printed, whatever it says (the sweep's own exit status, 15, is the alarm)
  2 usage error   1 any other error (no ledger at that path, ledger unreadable)
"""

_PRUNE_EPILOG = """\
Only objects whose bit is clear and that no operation or sweep holds lose history; each keeps
its newest row, and a row that never finished (a crash's trace) is never removed. Removed in
small transactions, so operations running meanwhile only wait milliseconds; then the WAL is
checkpointed (TRUNCATE).

exit status:
  0 pruned (or counted, with --dry-run)
  2 usage error (DAYS below 1)   1 any other error (no ledger at that path, ledger unavailable)
"""

_MIGRATE_EPILOG = """\
In batches of 500 records, each one transaction on the target: objects first (the not-clear
ones first of all), then the history, so a migration stopped anywhere leaves no history row
without its object; run it again with --merge to finish it. Stop operations and sweeps on the
source first: it is read as it is, not locked.

exit status:
  0 copied (or merged)
  2 usage error (--from and --to name the same ledger)
  1 any other error (no ledger at --from, a target that holds records without --merge, a ledger
    unavailable)
"""


def add(sub: argparse._SubParsersAction, name: str) -> None:  # type: ignore[type-arg]
    ledger = sub.add_parser(
        name, help="the ledger itself: status, prune, migrate",
        description="Look after the ledger: 'status' summarises it, 'prune' removes old history of settled jobs,"
        " 'migrate' copies it into another (SQLite to MariaDB or back).",
    )
    common_options(ledger)
    # The nested commands' parser class is the one the top level gives its own (usage errors).
    below = ledger.add_subparsers(dest="ledger_command", metavar="SUBCOMMAND", parser_class=type(ledger))
    below.required = True
    p = below.add_parser(
        "status", help="objects not clear, by age; the oldest; lookup back-off; the last sweep",
        description="Count the objects by requeue bit, the ones not clear by how long ago their bit changed"
        " (<1h, <1d, <1w, older), name the oldest, count those backing off after failed lookups and the"
        " operations without a result (how many no longer run, the oldest of those), and show the last sweep"
        " (not a dry run): when, and what it did.",
        epilog=_STATUS_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    output_options(p)
    common_options(p)
    p.set_defaults(handler="ledger status")
    p = below.add_parser(
        "prune", help="remove history older than DAYS of settled jobs, then checkpoint",
        description="Remove history rows that finished more than DAYS days ago, of objects whose bit is clear.",
        epilog=_PRUNE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--older-than", required=True, type=days, metavar="DAYS",
                   help=f"remove rows that finished more than DAYS days ago (a whole number from 1 to {MAX_DAYS})")
    p.add_argument("--dry-run", action="store_true", help="count what would be removed, remove nothing")
    output_options(p)
    common_options(p)
    p.set_defaults(handler="ledger prune")
    p = below.add_parser(
        "migrate", help="copy a ledger into another: SQLite to MariaDB, MariaDB to SQLite, or file to file",
        description="Copy every object (bit, why, since when, lookup back-off), every history row (all"
        " columns, unfinished rows unfinished, in their order) and the last sweep from one ledger into"
        " another. The source is only read. Leases are not copied. The target must be empty unless --merge.",
        epilog=_MIGRATE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--from", dest="source", required=True, metavar="LOCATION", type=given,
                   help="the ledger to copy: PATH, sqlite:PATH or mariadb://HOST[:PORT]/DATABASE[?option_file=PATH]"
                   " (it must exist; it is never written)")
    p.add_argument("--to", dest="target", required=True, metavar="LOCATION", type=given,
                   help="the ledger to copy into, in the same forms (an SQLite file is created if need be; a"
                   " MariaDB database must exist)")
    p.add_argument("--merge", action="store_true",
                   help="copy into a ledger that already holds records: an object in both keeps the less clear"
                   " bit (set > may_be_set > clear), a history row already there is skipped; running it twice"
                   " changes nothing the second time")
    output_options(p)
    common_options(p)
    p.set_defaults(handler="ledger migrate")


def status(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from .. import view

    with existing_ledger(args.ledger) as ledger:
        status = view.status_json(ledger, ledger.now())
    out.write(show.status_text(status, args.json))
    return EXIT_OK


def prune(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from .. import view

    with existing_ledger(args.ledger) as ledger:
        now = ledger.now()
        before = prune_before(now, args.older_than)
        result = ledger.prune(before, now, dry_run=args.dry_run)
    report = view.prune_json(result, args.older_than, before, args.dry_run)
    if result.checkpointed is False:
        log.warning("prune: the WAL checkpoint could not finish (the ledger was busy)")
    out.write(show.prune_text(report, args.json))
    return EXIT_OK


def migrate(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from ...ledger.migrate import migrate

    if same_location(args.source, args.target):
        # Not repeated: a URL may hold what must not be shown (opening it refuses that, quietly).
        raise UsageError("--from and --to name the same ledger: nothing to do")
    # The source first, never created nor migrated (a mistyped --from leaves nothing behind), and
    # only then the target, created (an SQLite file) or migrated if need be.
    with open_ledger(args.source, migrate_schema=False) as source, open_ledger(args.target) as target:
        report = migrate(source, target, merge=args.merge)
    out.write(show.migrate_text(report, args.json))
    return EXIT_OK


def ledgers(args: argparse.Namespace) -> Sequence[str]:
    """``migrate`` opens the two it names; ``status`` and ``prune`` the one ``--ledger`` names."""
    return (args.source, args.target) if args.handler == "ledger migrate" else (args.ledger,)


COMMAND = Command(add, {"ledger status": status, "ledger prune": prune, "ledger migrate": migrate}, ledgers)
