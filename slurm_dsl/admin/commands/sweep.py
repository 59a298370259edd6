"""``slurm-dsl sweep``: the sweep from the command line (docs/contract.md §9.5)."""

from __future__ import annotations

import argparse
import logging
from typing import IO

from ...core.model import Result, UsageError
from ...host.binaries import find_scontrol, find_squeue
from ...run.deadlines import steady
from ...run.tracked import Tracker
from .. import render as show
from ..exits import EXIT_CODES, EXIT_LOST, EXIT_OK
from ..files import write_atomically
from ..options import (
    Command,
    common_options,
    count,
    given,
    lookup_options,
    output_options,
    positive_seconds,
    rate_option,
    settle_delay_option,
)

log = logging.getLogger("slurm_dsl")
LOST_SHOWN = 10_000  # lost operations counted at most (history --lost's bound)

# run.settling's: the grammar imports no wing that acts (a test holds them equal).
DEFAULT_SETTLE_LIMIT = 10_000
REDO_TIMEOUT = 30.0  # seconds: a keyed run's calls, and its settling's two looks after the settle delay

_SWEEP_EPILOG = """\
exit status:
  0 every object looked at was settled (or left to a running operation)
  15 some object could not be settled (lookup failed, restore not ok): it stays, with back-off
  16 all settled, and an operation slurmctld acknowledged was found lost and recorded so, and not
     redone by --redo-lost: redo it (slurm-dsl history --lost lists each with its command)
  3 another sweep is running: nothing done
  2 usage error   1 any other error (ledger unavailable)
"""


def add(sub: argparse._SubParsersAction, name: str) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        name,
        help="restore every job whose Requeue flag a requeue may have left set",
        description="Find the ledger's objects that are not clear, look their jobs up in one"
        " squeue (or pyslurm) call, clear the objects of jobs that are gone, finished or already at Requeue=0,"
        " and restore (Requeue=0) jobs still showing Requeue=1. A lookup that cannot reach slurmctld"
        " changes nothing and backs off. One sweep at a time.",
        epilog=_SWEEP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dry-run", action="store_true", help="look up and report, change nothing")
    p.add_argument("--limit", type=count, metavar="N", help="settle at most N objects (oldest first)")
    rate_option(p)
    output_options(p, "one JSON object per line, each with a kind: job (one per object looked at), orphan (with"
                   " --orphans), then summary")
    p.add_argument("--metrics-file", metavar="PATH", type=given,
                   help="write a Prometheus textfile (atomically) (default:"
                   " the config file's metrics_file, else none)")
    p.add_argument("--orphans", action="store_true",
                   help="also list jobs showing Requeue=1 that the ledger does not track")
    p.add_argument("--fix", action="store_true", help="with --orphans: restore them too")
    p.add_argument("--restore-timeout", type=positive_seconds, default=15.0, metavar="SECONDS",
                   help="deadline of each restore (default 15)")
    settle_delay_option(p)
    p.add_argument("--redo-lost", action="store_const", const="yes", default=None,
                   help="run the key of each keyed operation this sweep finds lost in a crash or takeover again"
                   " (as 'slurm-dsl OP JOBID --key KEY --settle'): it acts again where the effect is absent, once;"
                   " unkeyed ones are left to 'history --lost' (default: the config file's redo_lost, else no)")
    p.add_argument("--redo-timeout", type=positive_seconds, default=REDO_TIMEOUT, metavar="SECONDS",
                   help=f"deadline of each --redo-lost run, its settling included (default {REDO_TIMEOUT:g})")
    p.add_argument("--settle-limit", type=count, default=DEFAULT_SETTLE_LIMIT, metavar="N",
                   help="settle at most N unknown operations of the last 7 days, newest first (default"
                   f" {DEFAULT_SETTLE_LIMIT:,}); the rest wait for the next sweep")
    lookup_options(p)
    common_options(p)
    p.set_defaults(handler="sweep")


def run(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from ...lookups.choose import make_lookup
    from ...lookups.squeue import SqueueLookup
    from ...run.sweep import RECLAIM_GRACE, Done, metrics_text, redo_lost, sweep

    if args.fix and not args.orphans:
        raise UsageError("--fix only goes with --orphans")
    scontrol = find_scontrol(args.scontrol)
    squeue = find_squeue(args.squeue, scontrol)
    with Tracker(args.ledger, scontrol=scontrol, squeue=squeue, configuration=args.configuration) as tracker:
        with tracker.ledger().sweep_lock():  # SweepBusy if another sweep holds it: main exits 3
            # Holding the lock, this is the only sweep: the leases of any other are a dead one's.
            reclaim_at = steady() + RECLAIM_GRACE
            lookup = make_lookup(args.lookup, squeue)
            report = sweep(
                tracker,
                lookup,
                limit=args.limit,
                dry_run=args.dry_run,
                restore_timeout=args.restore_timeout,
                orphans=args.orphans,
                fix=args.fix,
                orphan_lookup=SqueueLookup(squeue),
                reclaim_at=reclaim_at,
                settle_limit=args.settle_limit,
                settle_delay=args.settle_delay,
            )
            # After the sweep, still its lock's only holder: each under its job's lease, as any run.
            redone = (redo_lost(tracker, report.lost, args.redo_timeout, args.settle_delay)
                      if args.redo_lost == "yes" and report.lost_written else [])
        ledger = tracker.ledger()
        not_clear = ledger.count_not_clear()
        unsettled = sum(ledger.count_unsettled(ledger.now()))
        lost = len(ledger.lost(LOST_SHOWN)) if args.metrics_file else 0
    for s in report.swept:
        if s.done in (Done.RESTORE_FAILED, Done.LOOKUP_FAILED):
            log.warning("sweep: job %s: %s (%s)", s.job_id, s.done.value, s.why)
    for r in redone:
        if r.redone:
            log.warning("sweep: job %s: %s of operation %d (key %s), lost in a crash or takeover, done again: %s",
                        r.lost.job_id, r.lost.op.value, r.lost.id, r.lost.key, r.outcome and r.outcome.result.value)
        else:
            log.warning("sweep: job %s: %s of operation %d (key %s), lost in a crash or takeover, not done again: %s",
                        r.lost.job_id, r.lost.op.value, r.lost.id, r.lost.key,
                        r.why or (r.outcome and show.format_outcome(r.outcome).strip()))
    out.write(show.sweep_text(report, lookup.name, not_clear, args.json, redone))
    if report.lookup_error:
        log.warning("sweep: could not look jobs up: %s; nothing was cleared", report.lookup_error)
    if report.save_error:
        log.warning("sweep: %s: every object whose job shows Requeue=0 is kept (docs/contract.md §13.3); run the"
                    " sweep as root or the SlurmUser, or set $SLURM_DSL_STATE_SAVE_LOCATION", report.save_error)
    if report.keep_error:
        log.warning("sweep: %s (docs/contract.md §13.3)", report.keep_error)
    if args.metrics_file:
        # After the sweep's work, never before it: a metrics path that is missing or refused
        # (files.check_metrics_path) must not keep flags from being restored; it is exit 1.
        write_atomically(args.metrics_file, metrics_text(report, not_clear, unsettled, lost,
                                                         sum(r.redone for r in redone)))
    if not report.handled:
        return EXIT_CODES[Result.UNKNOWN]
    if report.lost and report.lost_written and len(report.lost) > sum(r.redone for r in redone):
        log.warning("sweep: %d acknowledged operation(s) found lost in a crash or takeover: 'slurm-dsl history"
                    " --lost' lists them and how to redo each", len(report.lost))
        return EXIT_LOST
    return EXIT_OK


COMMAND = Command(add, {"sweep": run})
