"""The ``slurm-dsl`` command line (docs/contract.md §10): the only module that prints.

Results go to stdout (a table, or one JSON object per job with ``--json``);
diagnostics go to stderr as ``slurm-dsl: <message>``.  The exit status of an
operation is its worst result (``EXIT_CODES``); 2 is a usage error (nothing
ran), 3 a sweep already running, 1 any other error.  Library errors become CLI
errors in ``main`` only, by type (``EXIT_OF_ERROR``); handlers just raise them,
and anything that is not a ``DSLError`` is a bug, left to crash with its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import signal
import sys
import time
from typing import IO, Dict, Iterable, List, NoReturn, Optional, Sequence, Tuple, Type

from .. import __version__
from ..core.errors import DSLError, InvalidInput, LedgerError, SweepBusy, UsageError, describe
from ..core.jobid import SHOWN_TOKEN, token, validate_job_id
from ..core.jobinfo import LOOKUP_KINDS
from ..core.ledger_rules import prune_before
from ..core.model import Op, Outcome, Result
from ..core.reader import read_outcome
from ..core.script import render
from ..core.shown import shown
from ..ledger.base import LedgerStore
from ..ledger.choose import is_url, open_ledger, sqlite_path
from ..run.binaries import find_scontrol, find_squeue
from ..run.calls import new_nonce
from ..run.deadlines import MAX_TIMEOUT, TIMEOUT_HELP
from ..run.driver import Stopped, drive
from ..run.tracked import Tracker, ledger_path

# What only the sweep, doctor and the admin's view need (the sweeper, the lookup choice, pyslurm's
# adapter, a thread pool) is imported by their handlers: an operation, the common case run on
# every job, does not pay their start-up time.

PROG = "slurm-dsl"

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
# docs/contract.md §10, worst first: the exit status of one job, or the worst of several.
EXIT_CODES: Dict[Result, int] = {
    Result.UNKNOWN: 15,
    Result.BIT_SET: 14,
    Result.NOT_RUN: 13,
    Result.EXPIRED: 12,
    Result.NOT_FOUND: 11,
    Result.REJECTED: 10,
    Result.OK: 0,
}

_EPILOG = """\
exit status:
  0 ok   10 rejected   11 not_found   12 expired   13 not_run   14 bit_set   15 unknown
  2 usage error (nothing ran)   1 any other error
  With several jobs, the worst result decides (15 is worst, 0 best).
"""

_LEDGER_FAILED = """\
  If the ledger fails part-way, every job whose script started is still printed, no further
  job starts, the jobs not started are listed on stderr, and the exit status is the worst
  printed result, and at least 1.
"""

_OP_HELP = {
    Op.HOLD: "hold jobs (scontrol hold): pending jobs stay pending, running jobs keep running at priority 0",
    Op.RELEASE: "release held jobs (scontrol release), wrapped and deadline-guarded",
    Op.REQUEUE: "requeue jobs: set Requeue=1, scontrol requeue, then clear Requeue=0 again",
    Op.RESTORE: "clear a job's Requeue flag (RestoreRequeueBit: scontrol update Requeue=0)",
    Op.OPEN: "release jobs with a direct, unwrapped scontrol release under the same deadline guard",
}

_SWEEP_EPILOG = """\
exit status:
  0 every object looked at was settled (or left to a running operation)
  15 some object could not be settled (lookup failed, restore not ok): it stays, with back-off
  3 another sweep is running: nothing done
  2 usage error   1 any other error (ledger unavailable)
"""
EXIT_SWEEP_BUSY = 3

# The exit status of a library error, decided here only (in ``main``): the first class that
# matches wins, so the more specific come first.  Not an error at all: EXIT_CODES (docs/contract.md §10).
EXIT_OF_ERROR: Tuple[Tuple[Type[DSLError], int], ...] = (
    (UsageError, EXIT_USAGE),  # a bad flag or value, an array's own JobId: nothing ran
    (SweepBusy, EXIT_SWEEP_BUSY),  # another sweep is running: nothing done
    (DSLError, EXIT_ERROR),  # configuration, ledger, lookup, files...
)

_ARRAY_NOTE = (
    " The ids are looked up first (one squeue): an array's own JobId whose array has other tasks is"
    " refused with exit 2 before anything runs, since scontrol would act on every task; address a task"
    " by its own JobId (squeue -r -O JobID,ArrayJobID,ArrayTaskID)."
)
_REQUEUE_NOTE = (
    " The result's requeue bit says whether the job's Requeue flag may have been left at 1:"
    " clear, may_be_set or set. Whenever it is not clear the ledger records it, and"
    " 'slurm-dsl sweep' puts it right."
)


def _op_examples(op: Op) -> str:
    return (
        "examples:\n"
        f"  slurm-dsl {op.value} 1234 --timeout 10\n"
        f"  slurm-dsl {op.value} 1234 1235 1236 --timeout 10 --json\n"
        f"  squeue -h -p maint -o %A | xargs slurm-dsl {op.value} --timeout 10 --parallel 8\n\n"
    )


log = logging.getLogger("slurm_dsl")


# argparse's own messages quote the argument they refuse whole ("invalid int value: '...'",
# "invalid choice: ..."): an argument may be 128 KiB, so a usage error is capped (and escaped).
_USAGE_CAP = 500


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(shown(message, _USAGE_CAP))


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    # deadlines.MAX_TIMEOUT: the runner's poll() could not wait much longer (NaN fails both tests).
    if not (value > 0 and value <= MAX_TIMEOUT):
        raise argparse.ArgumentTypeError(
            f"must be a positive number of seconds, at most {MAX_TIMEOUT:g} (one day): {text!r}"
        )
    return value


def _job_id_or_stdin(text: str) -> str:
    return text if text == "-" else _job_id(text)


def _job_id(text: str) -> str:
    try:
        return validate_job_id(text)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _common_options(parser: argparse.ArgumentParser, top: bool = False) -> None:
    """Options accepted both before and after the command.  Below the top level their
    default is SUPPRESS, so a subcommand does not overwrite what was given before it."""
    default = {} if top else {"default": argparse.SUPPRESS}
    parser.add_argument(
        "--scontrol",
        metavar="PATH",
        help="scontrol to run (default: $SLURM_DSL_SCONTROL, else the first on PATH, else /usr/bin/scontrol)",
        **default,  # type: ignore[arg-type]
    )
    parser.add_argument(
        "--ledger",
        metavar="PATH|URL",
        help="the object ledger: an SQLite file, or mariadb://HOST[:PORT]/DATABASE (credentials from"
        " /etc/slurm-dsl/ledger.cnf; see contrib/README.md) (default: $SLURM_DSL_LEDGER, else"
        " /var/lib/slurm-dsl/ledger.sqlite3)",
        **default,  # type: ignore[arg-type]
    )
    parser.add_argument(
        "-v", "--verbose", action="count", help="more log output on stderr (-vv for debug)",
        **({"default": 0} if top else default),
    )


_SQUEUE_HELP = (
    "squeue to run (default: $SLURM_DSL_SQUEUE, else the squeue beside the scontrol in use,"
    " else the first on PATH, else /usr/bin/squeue)"
)


def _lookup_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--squeue", metavar="PATH", help=_SQUEUE_HELP)
    parser.add_argument(
        "--lookup", choices=LOOKUP_KINDS, default=os.environ.get("SLURM_DSL_LOOKUP", "auto"),
        help="how sweeps look jobs up: squeue, pyslurm (an error if no pyslurm matching the running Slurm"
        " imports), or auto: pyslurm when usable, else squeue (default: $SLURM_DSL_LOOKUP, else auto)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Safe, deadline-wrapped Slurm job control. Every call's outcome is read strictly:"
        " a result is ok or rejected only when it certainly is; anything else is unknown.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _common_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for op in Op:
        p = sub.add_parser(
            op.value,
            help=_OP_HELP[op],
            description=_OP_HELP[op] + ". Each job gets its own script, deadline and result."
            + ("" if op is Op.RESTORE else _ARRAY_NOTE)
            + (_REQUEUE_NOTE if op is Op.REQUEUE else ""),
            epilog=_op_examples(op) + _EPILOG + _LEDGER_FAILED,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument(
            "job_ids", nargs="+", type=_job_id_or_stdin, metavar="JOBID",
            help="plain decimal job id(s), or - to read whitespace-separated ids from stdin",
        )
        p.add_argument(
            "--one-by-one", action="store_true",
            help="one script per job (default with several ids: the bulk path, one scontrol per chunk and call)",
        )
        p.add_argument(
            "--timeout", required=True, type=_positive_seconds, metavar="SECONDS",
            help=TIMEOUT_HELP,
        )
        p.add_argument("--json", action="store_true", help="one JSON object per job on stdout")
        p.add_argument("--squeue", metavar="PATH", help=_SQUEUE_HELP + "; it checks the ids for whole arrays first")
        p.add_argument(
            "--parallel", type=int, default=1, metavar="N",
            help="run up to N jobs at once (default 1); results are printed in the order given",
        )
        _common_options(p)
        p.set_defaults(handler=_cmd_op, op=op)
    p = sub.add_parser(
        "sweep",
        help="settle every job whose Requeue flag a requeue may have left set",
        description="Find the ledger's objects whose requeue bit is not clear, look their jobs up in one"
        " squeue (or pyslurm) call, clear the objects of jobs that are gone, finished or already at Requeue=0,"
        " and run RestoreRequeueBit on jobs still showing Requeue=1. A lookup that cannot reach slurmctld"
        " changes nothing and backs off. One sweep at a time.",
        epilog=_SWEEP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dry-run", action="store_true", help="look up and report, change nothing")
    p.add_argument("--limit", type=int, metavar="N", help="settle at most N objects (oldest first)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per line, each with a kind: job (one per object looked at),"
                   " orphan (with --orphans), then summary")
    p.add_argument("--metrics-file", metavar="PATH", help="write a Prometheus textfile (atomically)")
    p.add_argument("--orphans", action="store_true",
                   help="also list jobs showing Requeue=1 that the ledger does not track")
    p.add_argument("--fix", action="store_true", help="with --orphans: run RestoreRequeueBit on them too")
    p.add_argument("--restore-timeout", type=_positive_seconds, default=15.0, metavar="SECONDS",
                   help="deadline of each RestoreRequeueBit (default 15)")
    _lookup_options(p)
    _common_options(p)
    p.set_defaults(handler=_cmd_sweep)
    p = sub.add_parser(
        "doctor",
        help="check that this machine is ready for slurm-dsl",
        description="Check the scontrol to run, the deadline wrapper's tools, slurmctld, the Slurm version and"
        " lookup, JobRequeue and the job_submit companion, the ledger, and who is asking. Exit 0 unless a"
        " check fails (warnings do not).",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per check")
    _lookup_options(p)
    _common_options(p)
    p.set_defaults(handler=_cmd_doctor)
    p = sub.add_parser(
        "script", help="print the script an operation would run, and run nothing",
        description="Print the deadline-wrapped sh script for OP on JOBID (with a fresh nonce). Nothing runs.",
    )
    p.add_argument(
        "op", choices=[o.value for o in Op if o.wrapped], metavar="OP", help="hold, release, requeue or restore"
    )
    p.add_argument("job_id", type=_job_id, metavar="JOBID")
    p.add_argument("--timeout", required=True, type=_positive_seconds, metavar="SECONDS")
    _common_options(p)
    p.set_defaults(handler=_cmd_script)
    p = sub.add_parser(
        "read", help="read a script's captured stderr and print its outcome",
        description="Read the captured stderr of an operation's script (from FILE, or stdin) with its nonce"
        " and exit status, and print the outcome as the operation would have. Exits as the operation would.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("op", choices=[o.value for o in Op], metavar="OP", help="hold, release, requeue, restore or open")
    p.add_argument("job_id", type=_job_id, metavar="JOBID")
    p.add_argument("--nonce", metavar="HEX", help="the script's nonce (not used for open)")
    p.add_argument("--exit-status", required=True, metavar="S", help="the script's exit status")
    p.add_argument("file", nargs="?", metavar="FILE", help="captured stderr (default: stdin)")
    p.add_argument("--json", action="store_true", help="print a JSON object")
    _common_options(p)
    p.set_defaults(handler=_cmd_read)
    _admin_parsers(sub)
    return parser


_HISTORY_EPILOG = """\
exit status:
  0 at least one of the jobs has a record   11 none of them has (the ledger never saw them)
  2 usage error (a bad job id)   1 any other error (no ledger at that path, ledger unreadable)
"""
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


def _days(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of days: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 day: {text!r}")
    return value


def _admin_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``history`` and ``ledger status|prune``: the admin's view of the ledger."""
    p = sub.add_parser(
        "history", help="what every recorded operation did to jobs, and who ran it",
        description="Print each job's object (its requeue bit, since when and why) and every operation the"
        " ledger recorded on it, oldest first: when, op, result, requeue bit, the bit before and after, each"
        " call's status and message, and who ran it. Reads the ledger; runs nothing.",
        epilog=_HISTORY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("job_ids", nargs="+", type=_job_id, metavar="JOBID", help="plain decimal job id(s)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per line: the job's object (kind object), then each operation"
                   " (kind operation); kind no_record for a job never seen")
    _common_options(p)
    p.set_defaults(handler=_cmd_history)
    ledger = sub.add_parser(
        "ledger", help="the ledger itself: status, prune, migrate",
        description="Look after the ledger: 'status' summarises it, 'prune' removes old history of settled jobs,"
        " 'migrate' copies it into another (SQLite to MariaDB or back).",
    )
    _common_options(ledger)
    below = ledger.add_subparsers(dest="ledger_command", metavar="SUBCOMMAND", parser_class=_Parser)
    below.required = True
    p = below.add_parser(
        "status", help="objects not clear, by age; the oldest; lookup back-off; the last sweep",
        description="Count the objects by requeue bit, the ones not clear by how long ago their bit changed"
        " (<1h, <1d, <1w, older), name the oldest, count those backing off after failed lookups and the"
        " operations without a result (how many no longer run, the oldest of those), and show the last sweep"
        " (not a dry run): when, and what it did.",
        epilog=_STATUS_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="one JSON object")
    _common_options(p)
    p.set_defaults(handler=_cmd_ledger_status)
    p = below.add_parser(
        "prune", help="remove history older than DAYS of settled jobs, then checkpoint",
        description="Remove history rows that finished more than DAYS days ago, of objects whose bit is clear.",
        epilog=_PRUNE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--older-than", required=True, type=_days, metavar="DAYS",
                   help="remove rows that finished more than DAYS days ago (a whole number, at least 1)")
    p.add_argument("--dry-run", action="store_true", help="count what would be removed, remove nothing")
    p.add_argument("--json", action="store_true", help="one JSON object")
    _common_options(p)
    p.set_defaults(handler=_cmd_ledger_prune)
    p = below.add_parser(
        "migrate", help="copy a ledger into another: SQLite to MariaDB, MariaDB to SQLite, or file to file",
        description="Copy every object (bit, why, since when, lookup back-off), every history row (all"
        " columns, unfinished rows unfinished, in their order) and the last sweep from one ledger into"
        " another. The source is only read. Leases are not copied. The target must be empty unless --merge.",
        epilog=_MIGRATE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--from", dest="source", required=True, metavar="LOCATION",
                   help="the ledger to copy: PATH, sqlite:PATH or mariadb://HOST[:PORT]/DATABASE[?option_file=PATH]"
                   " (it must exist; it is never written)")
    p.add_argument("--to", dest="target", required=True, metavar="LOCATION",
                   help="the ledger to copy into, in the same forms (an SQLite file is created if need be; a"
                   " MariaDB database must exist)")
    p.add_argument("--merge", action="store_true",
                   help="copy into a ledger that already holds records: an object in both keeps the less clear"
                   " bit (set > may_be_set > clear), a history row already there is skipped; running it twice"
                   " changes nothing the second time")
    p.add_argument("--json", action="store_true", help="one JSON object")
    _common_options(p)
    p.set_defaults(handler=_cmd_ledger_migrate)


def format_outcome(outcome: Outcome) -> str:
    """One table row: job, op, result, requeue bit, and what scontrol said or why unknown."""
    bit = outcome.requeue_bit.value if outcome.requeue_bit is not None else "-"
    notes = [c.message for c in outcome.calls if c.message][-1:]
    if outcome.reason is not None:
        notes.append(f"[{outcome.reason.value}]")
    row = f"{outcome.job_id:>10}  {outcome.op.value:<8} {outcome.result.value:<10} {bit:<10} {' '.join(notes)}"
    return row.rstrip()


def _emit(outcomes: Iterable[Outcome], as_json: bool, out: IO[str]) -> int:
    code = EXIT_OK
    for outcome in outcomes:
        if as_json:
            out.write(json.dumps(outcome.to_json(), sort_keys=True) + "\n")
        else:
            out.write(format_outcome(outcome) + "\n")
        out.flush()
        code = max(code, EXIT_CODES[outcome.result])
    return code


def _cmd_op(args: argparse.Namespace, out: IO[str]) -> int:
    # The whole command's one deadline (TIMEOUT_HELP), from when it starts: reading the ids and
    # opening the ledger count, and every chunk, job and call below keeps this same instant.
    deadline = time.time() + args.timeout
    if args.parallel < 1:
        raise UsageError("--parallel must be at least 1")
    ids = _job_ids(args.job_ids)
    tracker = Tracker(args.ledger, scontrol=find_scontrol(args.scontrol), squeue=args.squeue)
    bulk = not args.one_by_one and len(ids) > 1
    progress = _Progress(sys.stderr) if bulk and sys.stderr.isatty() else None
    code = EXIT_OK
    with tracker, contextlib.closing(
        drive(tracker, args.op, ids, deadline, one_by_one=not bulk, parallel=args.parallel, progress=progress)
    ) as events:
        try:
            # Results print as they come, in the order given, so a long run shows its progress.
            for event in events:
                if isinstance(event, Stopped):
                    code = max(code, _ledger_failed(event.error, event.not_started))
                    continue
                if event.recorded:  # one that was not is logged already, as not recorded
                    _log_outcome(event.outcome)
                code = max(code, _emit([event.outcome], args.json, out))
        finally:
            if progress is not None:
                progress.close()
    return code


def _job_ids(given: Sequence[str]) -> List[str]:
    """The ids in the order given, ``-`` replaced by the whitespace-separated ids on stdin, each
    validated (a bad one is a usage error: nothing ran) and given once."""
    if given.count("-") > 1:
        raise UsageError("'-' (job ids from stdin) may be given once")
    ids: List[str] = []
    for item in given:
        if item != "-":
            ids.append(item)
            continue
        for number, word in enumerate(_stdin_words(sys.stdin), 1):
            if len(word) > _LONGEST_WORD:
                raise UsageError(
                    f"stdin, id {number}: invalid job id {token(word[:SHOWN_TOKEN])}... (more than"
                    f" {_LONGEST_WORD} characters, read no further): no job id is that long"
                )
            try:
                ids.append(validate_job_id(word))
            except InvalidInput as exc:
                raise UsageError(f"stdin, id {number}: {exc}") from None
    if not ids:
        raise UsageError("no job ids (stdin was empty)")
    return list(dict.fromkeys(ids))


# stdin is read this many characters at a time, and a word longer than LONGEST_WORD (no job id
# is) is refused as soon as it is seen: 50 MB without a blank is never held, nor split, whole.
_STDIN_PIECE = 1 << 16
_LONGEST_WORD = 64


def _stdin_words(stream: IO[str]) -> Iterable[str]:
    """The whitespace-separated words of ``stream`` (as ``str.split`` cuts them), read a piece at
    a time; a word longer than ``_LONGEST_WORD`` comes out cut just past it, and is the last."""
    rest = ""
    while True:
        try:
            piece = stream.read(_STDIN_PIECE)
        except UnicodeDecodeError:
            raise UsageError("stdin is not UTF-8 text: expected whitespace-separated job ids") from None
        text = rest + piece
        words = text.split()
        # The last word may go on in the next piece unless a blank (or the end) follows it.
        rest = words.pop() if words and piece and not text[-1].isspace() else ""
        yield from words
        if len(rest) > _LONGEST_WORD:
            yield rest[: _LONGEST_WORD + 1]
            return
        if not piece:
            return


def _log_outcome(outcome: Outcome) -> None:
    # Logged for the journal; the result itself goes to stdout.  Only the outcomes an admin
    # must act on are warnings.
    level = logging.WARNING if outcome.result in (Result.UNKNOWN, Result.BIT_SET) else logging.INFO
    log.log(level, "%s", describe(outcome))


def _ledger_failed(error: LedgerError, not_started: Sequence[str]) -> int:
    skipped = f"; not started: {' '.join(not_started)}" if not_started else ""
    sys.stderr.write(f"{PROG}: ledger error: {shown(str(error), None)}{skipped}\n")
    return EXIT_ERROR


class _Progress:
    """``slurm-dsl: N/M jobs`` on a terminal's stderr, once the work has taken more than a second."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.start = time.monotonic()
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if time.monotonic() - self.start > 1.0:
            self.stream.write(f"\r{PROG}: {done}/{total} jobs")
            self.stream.flush()
            self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")


def _cmd_sweep(args: argparse.Namespace, out: IO[str]) -> int:
    from ..lookups.choose import make_lookup
    from ..lookups.squeue import SqueueLookup
    from ..run.sweep import TAKE_OVER_GRACE, Done, metrics_text, sweep

    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be at least 1")
    if args.fix and not args.orphans:
        raise UsageError("--fix only goes with --orphans")
    scontrol = find_scontrol(args.scontrol)
    squeue = find_squeue(args.squeue, scontrol)
    with Tracker(args.ledger, scontrol=scontrol, squeue=squeue) as tracker:
        with tracker.ledger().sweep_lock():  # SweepBusy if another sweep holds it: main exits 3
            # Holding the lock, this is the only sweep: the leases of any other are a dead one's.
            take_over_at = time.monotonic() + TAKE_OVER_GRACE
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
                take_over_at=take_over_at,
            )
        not_clear = tracker.ledger().count_not_clear()
    for s in report.swept:
        if s.done in (Done.RESTORE_FAILED, Done.LOOKUP_FAILED):
            log.warning("sweep: job %s: %s (%s)", s.job_id, s.done.value, s.why)
        if args.json:
            out.write(json.dumps(s.to_json(), sort_keys=True) + "\n")
        else:
            out.write(f"{s.job_id:>10}  {s.done.value:<14} {shown(s.why)}\n")
    for info in report.orphans:
        if args.json:
            orphan = {"kind": "orphan", "job_id": info.job_id, "orphan": True, "state": info.state}
            out.write(json.dumps(orphan, sort_keys=True) + "\n")
        else:
            out.write(f"{info.job_id:>10}  orphan         shows Requeue=1 ({shown(info.state)}), not tracked by the"
                      " ledger\n")
    summary = {"kind": "summary", "summary": report.counts(), "lookup": lookup.name,
               "lookup_error": report.lookup_error, "orphans": len(report.orphans),
               "fixed_orphans": [o.result.value for o in report.fixed_orphans], "not_clear": not_clear,
               "dry_run": report.dry_run, "seconds": round(report.finished - report.started, 3)}
    if args.json:
        out.write(json.dumps(summary, sort_keys=True) + "\n")
    else:
        done = ", ".join(f"{v} {k}" for k, v in report.counts().items() if v) or "nothing to do"
        out.write(f"sweep{' (dry run)' if report.dry_run else ''}: {done}; {not_clear} object(s) not clear"
                  f" (lookup: {lookup.name})\n")
    if report.lookup_error:
        log.warning("sweep: could not look jobs up: %s; nothing was cleared", report.lookup_error)
    if args.metrics_file:
        _write_atomically(args.metrics_file, metrics_text(report, not_clear))
    return EXIT_OK if report.settled else EXIT_CODES[Result.UNKNOWN]


def _cmd_doctor(args: argparse.Namespace, out: IO[str]) -> int:
    from .doctor import FAIL, run_checks

    checks = run_checks(args.scontrol, args.squeue, ledger_path(args.ledger), args.lookup)
    for check in checks:
        if args.json:
            out.write(json.dumps(check.to_json(), sort_keys=True) + "\n")
        else:
            out.write(f"{check.status:<5} {check.name:<11} {shown(check.detail, None)}\n")
    return EXIT_ERROR if any(c.status == FAIL for c in checks) else EXIT_OK


# ``history`` when none of the jobs has a record: the ledger does not know them, as not_found
# says slurmctld does not.  (1 stays "the ledger could not be read".)
EXIT_NO_RECORD = EXIT_CODES[Result.NOT_FOUND]


def _existing_ledger(explicit: Optional[str]) -> LedgerStore:
    """Open the ledger for an admin command, which never creates one: a mistyped ``--ledger``
    must not leave a fresh, empty ledger (and its directory) behind, nor report that as clean."""
    path = ledger_path(explicit)
    if not is_url(path) and not os.path.lexists(sqlite_path(path)):
        raise LedgerError(
            f"no ledger at {path}: nothing has been recorded there (--ledger PATH or $SLURM_DSL_LEDGER"
            " names another)",
            path=path,
        )
    return open_ledger(path)


def _cmd_history(args: argparse.Namespace, out: IO[str]) -> int:
    from . import view as admin_view

    found = False
    with _existing_ledger(args.ledger) as ledger:
        for job_id in dict.fromkeys(args.job_ids):
            records = admin_view.history_json(job_id, ledger.get(job_id), ledger.history(job_id))
            found = found or records[0]["kind"] != "no_record"
            if args.json:
                out.writelines(json.dumps(r, sort_keys=True) + "\n" for r in records)
            else:
                out.writelines(line + "\n" for line in admin_view.history_lines(records))
            out.flush()
    return EXIT_OK if found else EXIT_NO_RECORD


def _cmd_ledger_status(args: argparse.Namespace, out: IO[str]) -> int:
    from . import view as admin_view

    with _existing_ledger(args.ledger) as ledger:
        status = admin_view.status_json(ledger, ledger.now())
    if args.json:
        out.write(json.dumps(status, sort_keys=True) + "\n")
    else:
        out.writelines(line + "\n" for line in admin_view.status_lines(status))
    return EXIT_OK


def _cmd_ledger_prune(args: argparse.Namespace, out: IO[str]) -> int:
    from . import view as admin_view

    with _existing_ledger(args.ledger) as ledger:
        now = ledger.now()
        before = prune_before(now, args.older_than)
        result = ledger.prune(before, now, dry_run=args.dry_run)
    report = admin_view.prune_json(result, args.older_than, before, args.dry_run)
    if result.checkpointed is False:
        log.warning("prune: the WAL checkpoint could not finish (the ledger was busy)")
    out.write(json.dumps(report, sort_keys=True) + "\n" if args.json else admin_view.prune_line(report) + "\n")
    return EXIT_OK


def _same_location(a: str, b: str) -> bool:
    """Whether two ledger locations are one by their names alone (the stores' ``identity`` then
    catches two names for one ledger)."""
    def name(location: str) -> str:  # a URL without its query, or the file's absolute path
        if is_url(location):
            return "mariadb://" + location.split("://", 1)[1].split("?", 1)[0]
        return os.path.abspath(sqlite_path(location))

    return name(a) == name(b)


def _cmd_ledger_migrate(args: argparse.Namespace, out: IO[str]) -> int:
    from . import view as admin_view

    if _same_location(args.source, args.target):
        # Not repeated: a URL may hold what must not be shown (opening it refuses that, quietly).
        raise UsageError("--from and --to name the same ledger: nothing to do")
    # The source first, never created nor migrated (a mistyped --from leaves nothing behind), and
    # only then the target, created (an SQLite file) or migrated if need be.
    with open_ledger(args.source, migrate_schema=False) as source, open_ledger(args.target) as target:
        report = admin_view.migrate(source, target, merge=args.merge)
    if args.json:
        out.write(json.dumps(report, sort_keys=True) + "\n")
    else:
        out.writelines(line + "\n" for line in admin_view.migrate_lines(report))
    return EXIT_OK


def _write_atomically(path: str, text: str) -> None:
    import tempfile

    """Replace ``path`` with ``text``, mode 0644 (node_exporter reads it as another user).

    Root runs the sweep and the directory may be another account's, so no name there is trusted:
    the temp file is a new one (``mkstemp``: random name, O_EXCL, never through a symlink) in the
    target's directory, named so that a textfile collector (``*.prom``) skips it, chmod-ed through
    its fd; ``os.replace`` then swaps the name itself, so a symlink at ``path`` is replaced, never
    written through.  The temp file is removed on any failure.
    """
    directory, name = os.path.split(path)
    tmp: Optional[str] = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory or ".")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o644)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise DSLError(f"cannot write metrics file {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _cmd_script(args: argparse.Namespace, out: IO[str]) -> int:
    deadline = time.time() + args.timeout
    out.write(render(Op(args.op), args.job_id, deadline, new_nonce(), find_scontrol(args.scontrol)))
    return EXIT_OK


def _cmd_read(args: argparse.Namespace, out: IO[str]) -> int:
    if args.file is None or args.file == "-":
        data = sys.stdin.buffer.read()
    else:
        try:
            with open(args.file, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise DSLError(f"cannot read {args.file}: {exc.strerror}") from None
    outcome = read_outcome(args.op, args.job_id, data, args.exit_status, args.nonce)
    return _emit([outcome], args.json, out)


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time (tests and callers may swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            # A traceback after the message keeps its lines; anything else is escaped (below).
            sys.stderr.write(shown(self.format(record), None, lines=True) + "\n")
        except Exception:
            self.handleError(record)


class _EscapingFormatter(logging.Formatter):
    """Records quote what squeue, pyslurm or a ledger said: the message is escaped whole,
    newlines too, so that no record can forge another line (docs/contract.md §10.1)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return shown(super().formatMessage(record), None)


_handler: Optional[_StderrHandler] = None


def _setup_logging(verbose: int) -> None:
    """Log records to stderr as ``slurm-dsl: message`` (under systemd: the journal).
    The library itself never configures handlers; only this entry point does, once."""
    global _handler
    root = logging.getLogger("slurm_dsl")
    if _handler is None:
        _handler = _StderrHandler()
        _handler.setFormatter(_EscapingFormatter(f"{PROG}: %(message)s"))
        root.addHandler(_handler)
    root.setLevel(logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG)


def _parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """The command line as a Namespace with a ``handler``; ``UsageError`` if it is not one."""
    args, extra = build_parser().parse_known_args(argv)
    # argparse binds positionals before the options that follow them, so the FILE
    # of "read OP JOBID --nonce N --exit-status S FILE" arrives here.
    if extra and getattr(args, "handler", None) is _cmd_read and args.file is None and len(extra) == 1:
        args.file = extra.pop()
    if extra:
        raise UsageError(shown(f"unrecognized arguments: {' '.join(extra)}", _USAGE_CAP))
    return args


def exit_status_of(error: DSLError) -> int:
    """The exit status for a library error: the first row of ``EXIT_OF_ERROR`` it is an instance of."""
    return next(code for cls, code in EXIT_OF_ERROR if isinstance(error, cls))


def main(argv: Optional[Sequence[str]] = None, out: Optional[IO[str]] = None) -> int:
    """Run the command line; return its exit status.

    The one place where errors become exit statuses: a ``DSLError`` is ``slurm-dsl: <message>``
    on stderr and ``EXIT_OF_ERROR``'s status; anything else is a bug and propagates (a
    traceback), except EPIPE (quiet, 1) and Ctrl-C (130).
    """
    out = out or sys.stdout
    args: Optional[argparse.Namespace] = None
    try:
        args = _parse_args(argv)
        _setup_logging(args.verbose)
        return int(args.handler(args, out))
    except DSLError as exc:
        # The message may quote text from outside (a path, an id, a server's words): escaped.
        sys.stderr.write(f"{PROG}: {shown(str(exc), None)}\n")
        if args is None:  # the command line itself was wrong
            sys.stderr.write(f"Try '{PROG} --help' for more information.\n")
        return exit_status_of(exc)
    except BrokenPipeError:
        # Quiet on EPIPE (``slurm-dsl ... | head``), as the shell tools are.
        sys.stderr.close()
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 128 + signal.SIGINT


def run() -> None:
    """The console script: ``main``, then leave at once.

    By the time ``main`` returns, every outcome is recorded (the ledger committed and closed) and
    the worker threads are joined; what is left is to flush what was printed.  ``sys.exit`` would
    then free every object one by one, about 15 ms after a bulk operation, for nothing: the
    process ends here.  The objects made while importing are frozen first, so that the garbage
    collector does not walk them again and again during a long run.
    """
    gc.freeze()
    status = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # ``slurm-dsl ... | head``: quiet, as in ``main``
        status = max(status, EXIT_ERROR)
    with contextlib.suppress(OSError, ValueError):  # ValueError: ``main`` closed stderr on EPIPE
        sys.stderr.flush()
    logging.shutdown()
    os._exit(status)
