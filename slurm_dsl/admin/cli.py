"""The ``slurm-dsl`` command line (docs/contract.md §10): the only module that prints.

Results go to stdout (a table, or one JSON object per job with ``--json``);
diagnostics go to stderr as ``slurm-dsl: <message>``.  The exit status of an
operation is its worst result (``EXIT_CODES``); 2 is a usage error (nothing
ran), 3 a sweep already running, 1 any other error.  Library errors become CLI
errors in ``main`` only, by type (``EXIT_OF_ERROR``); handlers just raise them,
and anything that is not a ``DSLError`` is a bug, left to crash with its traceback.

Strategy: three modules.  ``parser`` holds the grammar and help texts, ``render`` every text that
is shown (human and JSON); here are ``main``, one function per command (``HANDLERS``, by the key
the parser gives each subcommand), which acts and writes what ``render`` returns, the exit
statuses and the logging set-up.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import signal
import sys
import time
from typing import IO, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Type

from ..core.ledger_rules import prune_before
from ..core.model import DSLError, InvalidInput, LedgerError, Op, Outcome, Result, SweepBusy, UsageError, describe
from ..core.reader import read_outcome
from ..core.script import render
from ..core.shown import shown
from ..host.binaries import find_scontrol, find_squeue
from ..ledger.choose import open_ledger
from ..run import config
from ..run.calls import new_nonce
from ..run.config import ConfigFileError
from ..run.driver import Stopped, drive
from ..run.tracked import Tracker
from . import render as show
from .account import become_ledger_owner
from .files import existing_ledger, same_location, write_atomically
from .parser import PROG, parse_args
from .parser import job_ids as _job_ids

# What only the sweep, doctor and the admin's view need (the sweeper, the lookup choice, pyslurm's
# adapter, a thread pool) is imported by their handlers: an operation, the common case run on
# every job, does not pay their start-up time.

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
EXIT_SWEEP_BUSY = 3  # another sweep holds the lock: nothing done

# The exit status of a library error, decided here only (in ``main``): the first class that
# matches wins, so the more specific come first.  Not an error at all: EXIT_CODES (docs/contract.md §10).
EXIT_OF_ERROR: Tuple[Tuple[Type[DSLError], int], ...] = (
    (UsageError, EXIT_USAGE),  # a bad flag or value, an array's own JobId: nothing ran
    (ConfigFileError, EXIT_USAGE),  # a bad line in the config file: nothing ran (unreadable: 1, exit_status_of)
    (SweepBusy, EXIT_SWEEP_BUSY),  # another sweep is running: nothing done
    (DSLError, EXIT_ERROR),  # configuration, ledger, lookup, files...
)

log = logging.getLogger("slurm_dsl")


def _emit(outcomes: Iterable[Outcome], as_json: bool, out: IO[str]) -> int:
    code = EXIT_OK
    for outcome in outcomes:
        out.write(show.outcome_text(outcome, as_json))
        out.flush()
        code = max(code, EXIT_CODES[outcome.exits_as])  # a settled row exits by its effect (§12)
    return code


def _cmd_op(args: argparse.Namespace, out: IO[str]) -> int:
    # The whole command's one deadline (TIMEOUT_HELP), from when it starts: reading the ids and
    # opening the ledger count, and every chunk, job and call below keeps this same instant.
    if args.timeout is None:
        raise UsageError(
            f"no deadline: give --timeout SECONDS, or set timeout = SECONDS in the config file"
            f" ({args.configuration.file})"
        )
    deadline = time.time() + args.timeout
    ids = _job_ids(args.job_ids)
    tracker = Tracker(args.ledger, scontrol=find_scontrol(args.scontrol), squeue=args.squeue,
                      configuration=args.configuration)
    bulk = not args.one_by_one and len(ids) > 1
    progress = _Progress(sys.stderr) if bulk and sys.stderr.isatty() else None
    code = EXIT_OK
    if args.key is not None or args.settle or args.retry:
        from ..run.keyed import run_settled

        try:
            events_of = run_settled(tracker, args.op, ids, deadline, key=args.key, settle=args.settle,
                                    retry=args.retry, settle_delay=args.settle_delay, one_by_one=not bulk,
                                    parallel=args.parallel)
        except InvalidInput as exc:  # a --timeout too short for --settle: nothing ran
            tracker.close()
            raise UsageError(str(exc)) from None
    else:
        events_of = drive(tracker, args.op, ids, deadline, one_by_one=not bulk, parallel=args.parallel,
                          progress=progress)
    held: List[Outcome] = []  # with --durable: the rows, printed once their save is confirmed
    with tracker, contextlib.closing(events_of) as events:
        try:
            # Results print as they come, in the order given, so a long run shows its progress.
            for event in events:
                if isinstance(event, Stopped):
                    code = max(code, _ledger_failed(event.error, event.not_started))
                    continue
                if event.recorded:  # one that was not is logged already, as not recorded
                    _log_outcome(event.outcome)
                if args.durable:
                    held.append(event.outcome)
                else:
                    code = max(code, _emit([event.outcome], args.json, out))
        finally:
            if progress is not None:
                progress.close()
        if held:
            from ..run.durable import confirm_saved

            held = confirm_saved(tracker, held, time.time(), deadline)
            for outcome in held:
                if outcome.saved is False:
                    log.warning("%s %s: %s", outcome.op.value, outcome.job_id, outcome.detail)
            code = max(code, _emit(held, args.json, out))
    return code


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

    if args.fix and not args.orphans:
        raise UsageError("--fix only goes with --orphans")
    scontrol = find_scontrol(args.scontrol)
    squeue = find_squeue(args.squeue, scontrol)
    with Tracker(args.ledger, scontrol=scontrol, squeue=squeue, configuration=args.configuration) as tracker:
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
                settle_limit=args.settle_limit,
                settle_delay=args.settle_delay,
            )
        ledger = tracker.ledger()
        not_clear = ledger.count_not_clear()
        unsettled = sum(ledger.count_unsettled(ledger.now()))
    for s in report.swept:
        if s.done in (Done.RESTORE_FAILED, Done.LOOKUP_FAILED):
            log.warning("sweep: job %s: %s (%s)", s.job_id, s.done.value, s.why)
    out.write(show.sweep_text(report, lookup.name, not_clear, args.json))
    if report.lookup_error:
        log.warning("sweep: could not look jobs up: %s; nothing was cleared", report.lookup_error)
    if report.save_error:
        log.warning("sweep: %s: every object whose job shows Requeue=0 is kept (docs/contract.md §13.3); run the"
                    " sweep as root or the SlurmUser, or set $SLURM_DSL_STATE_SAVE_LOCATION", report.save_error)
    if args.metrics_file:
        # After the sweep's work, never before it: a metrics path that is missing or refused
        # (files.check_metrics_path) must not keep flags from being restored; it is exit 1.
        write_atomically(args.metrics_file, metrics_text(report, not_clear, unsettled))
    return EXIT_OK if report.settled else EXIT_CODES[Result.UNKNOWN]


def _cmd_settle(args: argparse.Namespace, out: IO[str]) -> int:
    from ..lookups.choose import make_lookup
    from ..run.settling import DAY, SINCE_DAYS, settle_rows
    from ..run.tracked import current_actor

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


def _cmd_doctor(args: argparse.Namespace, out: IO[str]) -> int:
    from .doctor import FAIL, run_checks

    checks = run_checks(args.scontrol, args.squeue, args.ledger, args.lookup,
                        became_owner_of=args.became_owner_of)
    out.write(show.checks_text(checks, args.json))
    return EXIT_ERROR if any(c.status == FAIL for c in checks) else EXIT_OK


# ``history`` when none of the jobs has a record: the ledger does not know them, as not_found
# says slurmctld does not.  (1 stays "the ledger could not be read".)
EXIT_NO_RECORD = EXIT_CODES[Result.NOT_FOUND]


def _cmd_history(args: argparse.Namespace, out: IO[str]) -> int:
    from . import view

    found = False
    with existing_ledger(args.ledger) as ledger:
        for job_id in dict.fromkeys(args.job_ids):
            records = view.history_json(job_id, ledger.get(job_id), ledger.history(job_id))
            found = found or records[0]["kind"] != "no_record"
            out.write(show.history_text(records, args.json))
            out.flush()
    return EXIT_OK if found else EXIT_NO_RECORD


def _cmd_ledger_status(args: argparse.Namespace, out: IO[str]) -> int:
    from . import view

    with existing_ledger(args.ledger) as ledger:
        status = view.status_json(ledger, ledger.now())
    out.write(show.status_text(status, args.json))
    return EXIT_OK


def _cmd_ledger_prune(args: argparse.Namespace, out: IO[str]) -> int:
    from . import view

    with existing_ledger(args.ledger) as ledger:
        now = ledger.now()
        before = prune_before(now, args.older_than)
        result = ledger.prune(before, now, dry_run=args.dry_run)
    report = view.prune_json(result, args.older_than, before, args.dry_run)
    if result.checkpointed is False:
        log.warning("prune: the WAL checkpoint could not finish (the ledger was busy)")
    out.write(show.prune_text(report, args.json))
    return EXIT_OK


def _cmd_ledger_migrate(args: argparse.Namespace, out: IO[str]) -> int:
    from . import view

    if same_location(args.source, args.target):
        # Not repeated: a URL may hold what must not be shown (opening it refuses that, quietly).
        raise UsageError("--from and --to name the same ledger: nothing to do")
    # The source first, never created nor migrated (a mistyped --from leaves nothing behind), and
    # only then the target, created (an SQLite file) or migrated if need be.
    with open_ledger(args.source, migrate_schema=False) as source, open_ledger(args.target) as target:
        report = view.migrate(source, target, merge=args.merge)
    out.write(show.migrate_text(report, args.json))
    return EXIT_OK


def _cmd_config(args: argparse.Namespace, out: IO[str]) -> int:
    configured = args.configuration
    report = show.config_json(configured.file, configured.found, [e.to_json() for e in configured.settings.values()])
    out.write(show.config_text(report, args.json))
    return EXIT_OK


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


def _setup_logging(verbose: int, base: str = "warning") -> None:
    """Log records at ``base`` (config.LOG_LEVELS: the config file's log_level), raised one level
    per ``verbose``, and above, to stderr as ``slurm-dsl: message`` (under systemd: the journal).
    The library itself never configures handlers; only this entry point does, once."""
    global _handler
    root = logging.getLogger("slurm_dsl")
    if _handler is None:
        _handler = _StderrHandler()
        _handler.setFormatter(_EscapingFormatter(f"{PROG}: %(message)s"))
        root.addHandler(_handler)
    root.setLevel(getattr(logging, _raised(base, verbose).upper()))


def _raised(base: str, verbose: int) -> str:
    """``base`` (a config.LOG_LEVELS word) raised ``verbose`` levels, at most to debug."""
    levels = config.LOG_LEVELS
    return levels[min(levels.index(base) + verbose, len(levels) - 1)]


# Each setting's attribute on the parsed command line, and the type the command takes it in.
_SETTING_ARGS: Dict[str, Tuple[str, Callable[[str], object]]] = {
    "ledger": ("ledger", str),
    "scontrol": ("scontrol", str),
    "squeue": ("squeue", str),
    "lookup": ("lookup", str),
    "timeout": ("timeout", float),
    "settle_delay": ("settle_delay", float),
    "metrics_file": ("metrics_file", str),
}


def _flag_text(given: object) -> Optional[str]:
    """A parsed flag's value as text: a number of seconds as short as it reads back the same."""
    if given is None:
        return None
    if isinstance(given, float):
        short = f"{given:g}"
        return short if float(short) == given else repr(given)
    return str(given)


def _apply_config(args: argparse.Namespace) -> None:
    """Put each setting's effective value (``config.configure``: flag, then environment, then the
    config file, then the built-in default, as the library reads them) into ``args``, the one
    place the commands take them from, and the whole reading into ``args.configuration``;
    ``ConfigFileError`` (before anything runs) for a config file that is bad or refused."""
    flags = {key: _flag_text(getattr(args, attr, None)) for key, (attr, _) in _SETTING_ARGS.items()}
    configured = config.configure(flags, config=getattr(args, "config", None))
    settings = configured.settings
    for key, (attr, kind) in _SETTING_ARGS.items():
        # A flag's value stays as the parser made it (its text is only for ``config`` to show).
        if hasattr(args, attr) and settings[key].source != "flag":
            value = settings[key].value
            setattr(args, attr, None if value is None else kind(value))
    # -v raises the level the file (or the default, warning) sets, one level per v: the
    # effective level, shown by ``config``, is the flag's then.
    args.log_level = configured.log_level
    if args.verbose:
        raised = _raised(args.log_level, args.verbose)
        settings["log_level"] = config.Effective("log_level", raised, "flag", "-" + "v" * args.verbose)
    args.configuration = configured


# The command functions by the key ``parser`` gives each subcommand (its ``handler`` default).
HANDLERS: Dict[str, Callable[[argparse.Namespace, IO[str]], int]] = {
    "op": _cmd_op,
    "sweep": _cmd_sweep,
    "settle": _cmd_settle,
    "doctor": _cmd_doctor,
    "config": _cmd_config,
    "script": _cmd_script,
    "read": _cmd_read,
    "history": _cmd_history,
    "ledger status": _cmd_ledger_status,
    "ledger prune": _cmd_ledger_prune,
    "ledger migrate": _cmd_ledger_migrate,
}


def _ledgers_used(args: argparse.Namespace) -> Sequence[str]:
    """The ledger locations a command will open (none for ``config``, ``script``, ``read``)."""
    if args.handler == "ledger migrate":
        return (args.source, args.target)
    return () if args.handler in ("config", "script", "read") else (args.ledger,)


def exit_status_of(error: DSLError) -> int:
    """The exit status for a library error: the first row of ``EXIT_OF_ERROR`` it is an instance of."""
    if isinstance(error, ConfigFileError) and error.unreadable:
        return EXIT_ERROR  # missing, refused or unreadable: not a usage error
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
        args = parse_args(argv)
        _apply_config(args)
        _setup_logging(args.verbose, args.log_level)
        # Root on the service account's ledger (the package's) runs as that account, and refuses
        # another account's, before anything opens it or runs: admin/account.py.
        args.became_owner_of = become_ledger_owner(
            _ledgers_used(args), scontrol=args.scontrol, service_account=args.configuration.value("service_account"),
            config_file=args.configuration.file,
        )
        return int(HANDLERS[args.handler](args, out))
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
