"""``slurm-dsl hold|release|requeue|restore|open|requeuehold``: the operations (docs/contract.md §10-§12).

One subparser per ``Op``, all with the handler key ``op``.  What only ``--settle`` or ``--durable``
needs is imported when asked for: the common case does not pay their start-up time."""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import time
from typing import IO, TYPE_CHECKING, Callable, Iterable, List, Optional, Sequence

from ...core.jobid import JobIds, checked_already
from ...core.keys import check_key, check_reason
from ...core.model import InvalidInput, LedgerError, LookupFailed, Op, Outcome, Result, UsageError, describe
from ...core.numbers import whole_number
from ...core.select import Selection, check_states, check_value
from ...core.shown import shown
from ...host.binaries import find_scontrol
from ...run.deadlines import DEFAULT_TIMEOUT, TIMEOUT_HELP, resolve_deadline, steady
from ..exits import EXIT_CODES, EXIT_ERROR, EXIT_OK
from ..options import (
    MAX_PARALLEL,
    PROG,
    RESULT_EPILOG,
    SQUEUE_HELP,
    Command,
    common_options,
    given,
    job_id_or_stdin,
    job_ids,
    output_options,
    parallel,
    positive_seconds,
    rate_option,
    refusing,
    settle_delay_option,
)

if TYPE_CHECKING:
    from ...run.arrays import LookupAnswer
    from ...run.tracked import Tracker

log = logging.getLogger("slurm_dsl")

MAX_RETRY = 100  # --retry's bound (run.keyed refuses more)

_OP_HELP = {
    Op.HOLD: "hold jobs (scontrol hold): pending jobs stay pending, running jobs keep running at priority 0",
    Op.RELEASE: "release held jobs (scontrol release), wrapped and deadline-guarded",
    Op.REQUEUE: "requeue jobs: set Requeue=1, scontrol requeue, then clear Requeue=0 again",
    Op.RESTORE: "clear a job's Requeue flag (scontrol update Requeue=0)",
    Op.OPEN: "release jobs with a direct, unwrapped scontrol release under the same deadline guard",
    Op.REQUEUE_HOLD: "requeue jobs into hold (requeue --hold): set Requeue=1, scontrol requeuehold, then clear"
    " Requeue=0 again; the jobs come back PENDING and held until released",
}

_LEDGER_FAILED = """\
  If the ledger fails part-way, every job whose script started is still printed, no further
  job starts, the jobs not started are listed on stderr, and the exit status is the worst
  printed result, and at least 1.
"""

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

# Where --timeout may also come from (after TIMEOUT_HELP, which says what it means).
_TIMEOUT_FROM = (
    " Without --timeout, the config file's timeout is the deadline, else"
    f" {DEFAULT_TIMEOUT:g} s (slurm-dsl config shows which)."
)


def _op_examples(op: Op) -> str:
    return (
        "examples:\n"
        f"  slurm-dsl {op.value} 1234                      # the default deadline: see --timeout\n"
        f"  slurm-dsl {op.value} 1234 1235 1236 --timeout 10 --json\n"
        f"  squeue -h -p maint -o %A | xargs slurm-dsl {op.value} --timeout 10 --parallel 8\n\n"
        "when the result is unknown (--settle, --retry, --key):\n"
        "  An unknown result may or may not have happened; the job's record can say later whether it did.\n"
        "  With --settle (or --retry), each row gains effect: present, absent, gone or undecidable, and\n"
        "  exits by it: present as 0, gone as 11, absent and undecidable as 15; a requeue present whose\n"
        "  Requeue flag was not cleared exits 14 (bit_set) until the sweep restores it.\n"
        "  A verdict reads the job's state, not its cause: present if the record shows the effect, whoever\n"
        "  made it (another admin's requeue counts too); absent if it does not now (another admin may have\n"
        "  undone it). A requeue whose RestartCnt rose by more than one is undecidable, never re-run.\n"
        "  What a key buys: a run that can simply be repeated. After a crash, a deadline or a takeover, the\n"
        "  same command with the same key acts only on the jobs whose effect is absent; a job an earlier\n"
        "  run did prints that run's row instead.\n"
        f"  slurm-dsl {op.value} - --key nightly-42 --retry 2 --timeout 120 < ids\n\n"
    )


def _retries(text: str) -> int:
    value = whole_number(text, 0, MAX_RETRY)
    if value is None:
        raise argparse.ArgumentTypeError(f"--retry takes a whole number from 0 to {MAX_RETRY}, not {shown(text, 40)!r}")
    return value


def _settling_options(parser: argparse.ArgumentParser, op: Op) -> None:
    """``--settle``, ``--retry N``, ``--key KEY`` and ``--settle-delay`` of an op (docs/contract.md §12)."""
    again = ("only when its effect is absent, never when it may have happened (a job is never requeued twice)"
             if op.requeues else "when its effect is absent (a repeated one changes nothing)")
    group = parser.add_argument_group("when the result is unknown (see below)")
    group.add_argument(
        "--settle", action="store_true",
        help="settle each unknown result before exiting: look at once, and again once the settle delay has passed",
    )
    group.add_argument(
        "--retry", type=_retries, default=0, metavar="N",
        help=f"re-run a job whose effect is absent, at most N times (implies --settle): {again}",
    )
    group.add_argument(
        "--key", type=refusing(check_key), metavar="KEY",
        help="an idempotency key naming this logical operation across runs: a job an earlier run with the same"
        " key did (or that settles as present) is not acted on again, its row says so; one that may still be"
        " running waits (or expires at the deadline). 1-128 letters, digits and . _ : @ / + = -",
    )
    settle_delay_option(group)
    parser.add_argument(
        "--durable", action="store_true",
        help="return only once slurmctld has saved the changes (docs/contract.md §13.5): slurmctld answers"
        " before it writes its state, at most once per 5 s, and a crash before then undoes what it acknowledged;"
        " a row not known saved by the deadline says so, and exits 15 (give --timeout room for one save window)",
    )


# The selectors (docs/contract.md §10.3): option, Selection field, what it takes (squeue's options for
# them are core.select.Selection.filters').
_SELECTORS = (
    ("--node", "node", "NODES", "jobs on these nodes (a hostlist: node[01-04],gpu1)"),
    ("--partition", "partition", "P", "jobs in these partitions (comma list)"),
    ("--user", "user", "U", "jobs of these users (comma list)"),
    ("--account", "account", "A", "jobs charged to these accounts (comma list)"),
    ("--state", "state", "STATES", "jobs in these states (comma list: PENDING, RUNNING, PD, R...; default:"
     " squeue's, every state but the finished ones)"),
    ("--name", "name", "N", "jobs with these names (comma list)"),
    ("--reservation", "reservation", "R", "jobs in this reservation"),
    ("--pending-reason", "pending_reason", "TEXT", "jobs whose squeue reason is TEXT (any case), e.g."
     " 'launch failed requeued held' or JobHeldAdmin"),
)


def _selector_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "select jobs (AND-ed with each other and with the ids given; one squeue listing)",
        "An array's own JobId is never selected (a call on it reaches every task): its tasks not yet"
        " split off are named on stderr. A selection that matches nothing exits 0 and says so. With"
        " --key, the jobs the key's first run selected are the key's: a rerun acts on that set again.",
    )
    for option, dest, metavar, text in _SELECTORS:
        check = check_states if dest == "state" else functools.partial(check_value, what=option)
        group.add_argument(option, dest=f"select_{dest}", type=refusing(check), metavar=metavar, help=text)


def selection_of(args: argparse.Namespace) -> Selection:
    """The selectors of a parsed command line (each checked by its option's type)."""
    return Selection(**{dest: getattr(args, f"select_{dest}", None) or "" for _, dest, _, _ in _SELECTORS})


def add(sub: argparse._SubParsersAction, name: str) -> None:  # type: ignore[type-arg]
    op = Op(name)
    p = sub.add_parser(
        op.value,
        help=_OP_HELP[op],
        description=_OP_HELP[op] + ". Each job gets its own script and result, under the command's one deadline."
        + ("" if op is Op.RESTORE else _ARRAY_NOTE)
        + (_REQUEUE_NOTE if op.requeues else ""),
        epilog=_op_examples(op) + RESULT_EPILOG + _LEDGER_FAILED,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "job_ids", nargs="*", type=job_id_or_stdin, metavar="JOBID",
        help="plain decimal job id(s), or - to read whitespace-separated ids from stdin; or select jobs"
        " (below), or both",
    )
    _selector_options(p)
    p.add_argument(
        "--one-by-one", action="store_true",
        help="one script per job (default with several ids: the bulk path, one scontrol per chunk and call)",
    )
    p.add_argument(
        "--timeout", type=positive_seconds, metavar="SECONDS",
        help=TIMEOUT_HELP + _TIMEOUT_FROM,
    )
    output_options(p, "one JSON object per job on stdout")
    p.add_argument("--squeue", metavar="PATH", type=given,
                   help=SQUEUE_HELP + "; it checks the ids for whole arrays first")
    rate_option(p)
    p.add_argument(
        "--parallel", type=parallel, default=1, metavar="N",
        help=f"run up to N jobs at once (default 1, at most {MAX_PARALLEL}); results are printed in the"
        " order given",
    )
    _settling_options(p, op)
    p.add_argument(
        "--hold", action="store_true",
        help="requeue into hold (scontrol requeuehold): the job comes back PENDING and held (Priority 0,"
        " reason job_requeued_in_held_state) until released; the same three calls; settled present only when"
        " RestartCnt rose by one and the job is held" if op is Op.REQUEUE else argparse.SUPPRESS,
    )
    p.add_argument(
        "--reason", type=refusing(check_reason), metavar="TEXT",
        help="why: kept with each operation in the ledger (slurm-dsl history shows it, with who ran it and"
        " where), in the system log, and in --json rows (admin_reason); 1-1024 characters, no control"
        " characters",
    )
    p.add_argument(
        "--admin-comment", action="store_true",
        help="with --reason: after each job's operation took effect, also write the reason to the job's"
        " AdminComment (scontrol update JobId=J AdminComment='slurm-dsl OP: TEXT', which its owner sees in"
        " scontrol show job; it replaces what was there), a call of its own whose result is shown beside the"
        " row (admin_comment in --json) and never changes it",
    )
    p.add_argument(
        "--dry-run", action="store_true",
        help="look before acting: look the jobs up and print, per job, the calls a run would make and the result"
        " its record predicts; nothing is run or recorded (exit 0 unless the input is bad or the jobs cannot be"
        " looked up)",
    )
    common_options(p)
    p.set_defaults(handler="op", op=op)


def emit(outcomes: Iterable[Outcome], as_json: bool, out: IO[str], kept: Optional[List[Outcome]] = None,
         admin_reason: Optional[str] = None) -> int:
    """Write each outcome's row (or JSON) as it comes, kept in ``kept`` if given; return the worst exit status."""
    from .. import render as show

    code = EXIT_OK
    for outcome in outcomes:
        out.write(show.outcome_text(outcome, as_json, admin_reason))
        out.flush()
        if kept is not None:
            kept.append(outcome)
        code = max(code, EXIT_CODES[outcome.exits_as])  # a settled row exits by its effect (§12)
    return code


def summarize(outcomes: Sequence[Outcome], out: IO[str]) -> None:
    """On a terminal, end a run of many jobs with its rows folded into one line (``render.summary_line``)."""
    from .. import render as show

    if len(outcomes) < 2:
        return
    line = show.summary_line(outcomes)
    try:
        line.encode(getattr(out, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):  # a terminal that cannot show the middle dot
        line = show.summary_line(outcomes, sep=" | ")
    out.write(line + "\n")


def run(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    # The whole command's one deadline (TIMEOUT_HELP), from when it starts: reading the ids and
    # opening the ledger count, and every chunk, job and call below keeps this same instant.
    deadline = resolve_deadline(args.timeout, None)  # the flag's, else the configured one (cli._apply_config)
    if getattr(args, "hold", False):
        if not args.op.requeues:
            raise UsageError(f"{args.op.value}: --hold is requeue's (scontrol requeuehold); to hold jobs:"
                             " slurm-dsl hold")
        args.op = Op.REQUEUE_HOLD
    if args.admin_comment and args.reason is None:
        raise UsageError(f"{args.op.value}: --admin-comment writes the --reason: give --reason TEXT")
    selection = selection_of(args)
    if not args.job_ids and not selection:
        raise UsageError(f"{args.op.value}: give job ids, or select jobs (--node, --partition, --user, ...)")
    # Each validated once, by the parser's type and ``job_ids``: nothing below checks them again.
    given = checked_already(job_ids(args.job_ids)) if args.job_ids else None
    scontrol = find_scontrol(args.scontrol)
    squeue = args.squeue  # the effective setting (``cli._apply_config``), as ``Tracker`` gets it
    keyed = args.key is not None or args.settle or args.retry
    tracker: Optional[Tracker] = None
    if selection:
        if args.key is not None and not args.dry_run:  # the key's set is kept in its ledger
            from ...run.tracked import Tracker

            tracker = Tracker(args.ledger, scontrol=scontrol, squeue=squeue, configuration=args.configuration)
        ids = _selected(args, selection, given, deadline, scontrol, tracker, err)
        if not ids:
            if tracker is not None:
                tracker.close()
            return EXIT_OK
    else:
        assert given is not None
        ids = given
    if args.dry_run:
        return dry_run(args, ids, deadline, scontrol, out)
    bulk = not args.one_by_one and len(ids) > 1
    looking: Optional[Callable[[], LookupAnswer]] = None
    if not keyed:
        # The array check first (docs/contract.md §9.4), for one job or many, in a thread: its
        # squeue runs while the driver and the ledger load and the ledger opens; ``drive`` waits
        # for it before the first intent.  Only a lookup: if the ledger then fails, nothing ran.
        # (A keyed run looks back first, and looks its ids up with that: ``run.keyed``.)
        from ...run.arrays import look_up
        from ...run.background import Background

        op = args.op
        looking = Background(lambda: look_up(op, ids, deadline, squeue=squeue, scontrol=scontrol, clock=steady),
                             "slurm-dsl array check").result
    from ...run.driver import Stopped
    from ...run.flow import Asked, Saved, operate
    from ...run.tracked import Tracker

    if tracker is None:
        tracker = Tracker(args.ledger, scontrol=scontrol, squeue=squeue, configuration=args.configuration)
    asked = Asked(key=args.key, settle=args.settle, retry=args.retry, settle_delay=args.settle_delay,
                  one_by_one=not bulk, parallel=args.parallel, durable=args.durable, reason=args.reason,
                  admin_comment=args.admin_comment)
    progress = Progress(err) if bulk and err.isatty() else None
    code = EXIT_OK
    try:
        flow = operate(tracker, args.op, ids, deadline, asked, progress=progress, looking=looking)
    except InvalidInput as exc:  # a --timeout too short for --settle: nothing ran
        tracker.close()
        raise UsageError(str(exc)) from None
    # On a terminal, the rows of many jobs end with one folded line (docs/contract.md §10).
    shown: Optional[List[Outcome]] = [] if len(ids) > 1 and not args.json and out.isatty() else None
    with tracker, contextlib.closing(flow) as events:
        try:
            # Results print as they come, in the order given, so a long run shows its progress;
            # with --durable, once their save is confirmed.
            for event in events:
                if isinstance(event, Stopped):
                    code = max(code, _ledger_failed(event.error, event.not_started, err))
                elif isinstance(event, Saved):
                    if event.outcome.saved is False:
                        log.warning("%s %s: %s", event.outcome.op.value, event.outcome.job_id, event.outcome.detail)
                    code = max(code, emit([event.outcome], args.json, out, shown, args.reason))
                else:
                    if event.recorded:  # one that was not is logged already, as not recorded
                        _log_outcome(event.outcome)
                    said = event.outcome.comment
                    if said is not None and said.result is not Result.OK:
                        log.warning("%s: AdminComment not written: %s (%s)", event.outcome.job_id,
                                    said.result.value, said.detail)
                    if not args.durable:
                        code = max(code, emit([event.outcome], args.json, out, shown, args.reason))
        finally:
            if progress is not None:
                progress.close()
    if shown is not None:
        summarize(shown, out)
    return code


def _selected(args: argparse.Namespace, selection: Selection, given: Optional[JobIds], deadline: float,
              scontrol: str, tracker: Optional[Tracker], err: IO[str]) -> JobIds:
    """The jobs the selectors choose (``run.select.resolve``), what was left out said on stderr."""
    from ...run.select import resolve

    try:
        resolved = resolve(selection, given, args.op, deadline, squeue=args.squeue, scontrol=scontrol, clock=steady,
                           ledger=tracker.ledger() if tracker is not None else None, key=args.key,
                           actor=tracker.actor if tracker is not None else None)
    except (InvalidInput, UsageError) as exc:  # a selector Slurm does not know, a key's other selectors
        if tracker is not None:
            tracker.close()
        raise UsageError(str(exc)) from None
    except BaseException:
        if tracker is not None:
            tracker.close()
        raise
    for note in resolved.notes():
        err.write(f"{PROG}: {note}\n")
    if resolved.recorded:
        log.info("key %s: acting on the %d jobs its first run selected", args.key, len(resolved.job_ids))
    if not resolved.job_ids:
        err.write(f"{PROG}: no job matches {selection.text()}: nothing to do\n")
    return resolved.job_ids


def dry_run(args: argparse.Namespace, ids: JobIds, deadline: float, scontrol: str, out: IO[str]) -> int:
    """``--dry-run``: one lookup of every id, then per job what a run would call and what its record predicts."""
    from ...core.predict import predict
    from ...run.arrays import look_up
    from .. import render as show

    mixed = [flag for flag, on in (("--key", args.key is not None), ("--settle", args.settle),
                                   ("--retry", args.retry), ("--durable", args.durable)) if on]
    if mixed:
        raise UsageError(f"--dry-run only looks: it takes no {' or '.join(mixed)}")
    looked = look_up(args.op, ids, deadline, squeue=args.squeue, scontrol=scontrol, clock=steady, restore_too=True,
                     in_control=False)
    if looked.started is None:
        raise LookupFailed("the deadline passed before the jobs could be looked up: nothing predicted")
    for job in ids:
        info = looked.infos.get(job)
        out.write(show.prediction_text(args.op, job, info, predict(args.op, job, info), args.json))
    return EXIT_OK


def _log_outcome(outcome: Outcome) -> None:
    # Logged for the journal; the result itself goes to stdout.  Only the outcomes an admin
    # must act on are warnings.
    level = logging.WARNING if outcome.result in (Result.UNKNOWN, Result.BIT_SET) else logging.INFO
    if log.isEnabledFor(level):  # described only when written: at the default level, an ok row is not
        log.log(level, "%s", describe(outcome))


def _ledger_failed(error: LedgerError, not_started: Sequence[str], err: IO[str]) -> int:
    skipped = f"; not started: {' '.join(not_started)}" if not_started else ""
    err.write(f"{PROG}: ledger error: {shown(str(error), None)}{skipped}\n")
    return EXIT_ERROR


class Progress:
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


COMMAND = Command(add, {"op": run})
