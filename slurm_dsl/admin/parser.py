"""The ``slurm-dsl`` command line's grammar (docs/contract.md §10): every subcommand, option and
help text, and the reading of the job ids (``-``: from stdin).  Nothing here runs or prints.

Strategy: each subcommand names its handler by a key (``handler``: ``op``, ``sweep``, ``ledger
status``...), which ``cli`` maps to its function, so the grammar imports nothing that acts.
Options that several subcommands share are defined once: ``_common_options`` (``--scontrol``,
``--ledger``, ``-v``, accepted before and after the command), ``_lookup_options`` (``--squeue``,
``--lookup``) and ``_output_options`` (``--json``, each subcommand saying what its objects are).
A bad command line is a ``UsageError`` (``_Parser.error``), its message capped and escaped.
A command line that names its command (``command_named``) is parsed by the top level and that
command's grammar alone, the same parse without building a dozen other subcommands at every start;
anything unsure gets the whole grammar (docs/benchmarks.md §7).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import IO, Any, Callable, Iterable, List, NoReturn, Optional, Sequence

from .. import __version__
from ..core.jobid import SHOWN_TOKEN, token, validate_job_id
from ..core.jobinfo import LOOKUP_KINDS
from ..core.keys import check_key
from ..core.model import InvalidInput, Op, UsageError
from ..core.numbers import seconds, whole_number
from ..core.settle import DEFAULT_SETTLE_DELAY, MIN_SETTLE_DELAY, check_settle_delay
from ..core.shown import shown
from ..run.deadlines import MAX_TIMEOUT, TIMEOUT_HELP

PROG = "slurm-dsl"
MAX_RETRY = 100  # --retry's bound (run.keyed refuses more)
# run.settling's: the parser imports no wing that acts (a test holds them equal).
DEFAULT_SETTLE_LIMIT = 10_000
SINCE_DAYS = 7

_EPILOG = """\
exit status:
  0 ok   10 rejected   11 not_found   12 expired   13 not_run   14 bit_set   15 unknown
  2 usage error (nothing ran)   1 any other error
  With several jobs, the worst result decides (15 is worst, 0 best).
"""

# Which account (admin/account.py): said once, at the top.
_ACCOUNT_NOTE = (
    " Run it as root or as slurm.conf's SlurmUser, who may act on every user's job. Root's commands on"
    " an SQLite ledger in a directory of the service account's (the package's /var/lib/slurm-dsl is slurm's,"
    " which the units run as) run as that account, so that the ledger's files stay its own; the service"
    " account is the config file's service_account, else slurm.conf's SlurmUser (scontrol show config)."
    " A ledger directory of any other account is refused: root never becomes an account that could have"
    " written the ledger it would trust."
)

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
        "when the result is unknown (--settle, --retry, --key):\n"
        "  An unknown result may or may not have happened; the job's record can say later whether it did.\n"
        "  With --settle (or --retry), each row gains effect: present, absent, gone or undecidable, and\n"
        "  exits by it: present as 0, gone as 11, absent and undecidable as 15; a requeue present whose\n"
        "  Requeue flag was not cleared exits 14 (bit_set) until the sweep restores it.\n"
        "  A verdict reads the job's state, not its cause: present if the record shows the effect, whoever\n"
        "  made it (another admin's requeue counts too); absent if it does not now (another admin may have\n"
        "  undone it). A requeue whose RestartCnt rose by more than one is undecidable, never re-run.\n"
        "  What a key buys: a run that can simply be repeated. After a crash, a deadline or a failover, the\n"
        "  same command with the same key acts only on the jobs whose effect is absent; a job an earlier\n"
        "  run did prints that run's row instead.\n"
        f"  slurm-dsl {op.value} - --key nightly-42 --retry 2 --timeout 120 < ids\n\n"
    )


# argparse's own messages quote the argument they refuse whole ("invalid int value: '...'",
# "invalid choice: ..."): an argument may be 128 KiB, so a usage error is capped (and escaped).
_USAGE_CAP = 500


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(shown(message, _USAGE_CAP))

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse makes a formatter for every option it adds; given no width, each imports
        # shutil (and with it bz2, lzma, zlib: ~3 ms at every start) for the terminal's width.
        return self.formatter_class(prog=self.prog, width=_help_width())  # type: ignore[call-arg]

    def add_subparsers(self, **kwargs: Any) -> Any:  # type: ignore[override, unused-ignore]
        # Python 3.14 works out the subcommands' prog with a formatter of its own, made without a
        # width (shutil again); given the prog it makes none.  This is 3.11-3.13's own computation,
        # through the formatter above, without colour (3.14: no ANSI codes kept in a prog).
        if kwargs.get("prog") is None:
            formatter = self._get_formatter()
            set_color = getattr(formatter, "_set_color", None)
            if set_color is not None:
                set_color(False)
            formatter.add_usage(None, self._get_positional_actions(), self._mutually_exclusive_groups, "")
            kwargs["prog"] = formatter.format_help().strip()
        return super().add_subparsers(**kwargs)


def _help_width() -> int:
    """The width argparse's formatter takes when given none: ``shutil.get_terminal_size()``'s
    columns (``$COLUMNS`` if a positive whole number, else stdout's terminal, else 80), less 2."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns if stdout is not None else 0
        except (AttributeError, ValueError, OSError):  # no stdout, closed, detached, not a terminal
            columns = 0
        columns = columns or 80
    return columns - 2


def _positive_seconds(text: str) -> float:
    # deadlines.MAX_TIMEOUT: the runner's poll() could not wait much longer.  core.numbers' ASCII
    # rule: no 1_0, no Arabic-Indic digits, no inf or nan.
    value = seconds(text, 0.0, MAX_TIMEOUT)
    if value is None or value == 0:
        raise argparse.ArgumentTypeError(
            f"must be a positive number of seconds, at most {MAX_TIMEOUT:g} (one day), in ASCII digits:"
            f" {shown(text, 40)!r}"
        )
    return value


def _given(text: str) -> str:
    """A path or location option's value: an empty one (a script's unset variable) is refused,
    never taken as given nor as not given (core.plain.not_empty, the library's rule too)."""
    if text == "":
        raise argparse.ArgumentTypeError(
            "an empty value is refused: give one, or leave the option out to take the environment's, the config"
            " file's or the built-in one (slurm-dsl config shows which)"
        )
    return text


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
        type=_given,
        help="scontrol to run (default: $SLURM_DSL_SCONTROL, else the config file's scontrol, else the first on"
        " PATH, else /usr/bin/scontrol)",
        **default,  # type: ignore[arg-type]
    )
    parser.add_argument(
        "--ledger",
        metavar="PATH|URL",
        type=_given,
        help="the object ledger: an SQLite file, or mariadb://HOST[:PORT]/DATABASE (credentials from"
        " /etc/slurm-dsl/ledger.cnf; see contrib/README.md) (default: $SLURM_DSL_LEDGER, else the config file's"
        " ledger, else /var/lib/slurm-dsl/ledger.sqlite3); run as root, an SQLite ledger in the service account's"
        " directory (the package's is slurm's) makes the command run as that account, and one in any other"
        " account's is refused",
        **default,  # type: ignore[arg-type]
    )
    parser.add_argument(
        "-v", "--verbose", action="count", help="more log output on stderr than the config file's log_level"
        " (default warning): -v one level more, -vv two",
        **({"default": 0} if top else default),
    )
    _config_options(parser, top)


def _config_options(parser: argparse.ArgumentParser, top: bool) -> None:
    """``--config``, accepted before and after the command as ``--ledger`` is: the config file
    every setting not given by a flag or the environment comes from (run/config.py)."""
    parser.add_argument(
        "--config", metavar="PATH", type=_given,
        help="the config file (default: $SLURM_DSL_CONFIG, else /etc/slurm-dsl/slurm-dsl.conf if there is one);"
        " see 'slurm-dsl config --help'",
        **({} if top else {"default": argparse.SUPPRESS}),  # type: ignore[arg-type]
    )


def _output_options(parser: argparse.ArgumentParser, objects: str = "one JSON object") -> None:
    """What a subcommand prints: ``--json``, for every subcommand that has it; ``objects`` says
    what its JSON is (render.py writes it)."""
    parser.add_argument("--json", action="store_true", help=objects)


_SQUEUE_HELP = (
    "squeue to run (default: $SLURM_DSL_SQUEUE, else the config file's squeue, else the squeue beside the"
    " scontrol in use, else the first on PATH, else /usr/bin/squeue)"
)


def _lookup_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--squeue", metavar="PATH", type=_given, help=_SQUEUE_HELP)
    parser.add_argument(
        "--lookup", choices=LOOKUP_KINDS,
        help="how sweeps look jobs up: squeue, pyslurm (an error if no pyslurm matching the running Slurm"
        " imports), or auto: pyslurm when usable, else squeue (default: $SLURM_DSL_LOOKUP, else the config"
        " file's lookup, else auto)",
    )


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The whole grammar; with ``only`` (a command's name), the top level and that command alone:
    what parsing a command line that names it needs (``command_named``)."""

    def wanted(name: str) -> bool:
        return only is None or name == only

    parser = _Parser(
        prog=PROG,
        description="Safe, deadline-wrapped Slurm job control. Every call's outcome is read strictly:"
        " a result is ok or rejected only when it certainly is; anything else is unknown." + _ACCOUNT_NOTE,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _common_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for op in Op:
        if not wanted(op.value):
            continue
        p = sub.add_parser(
            op.value,
            help=_OP_HELP[op],
            description=_OP_HELP[op] + ". Each job gets its own script and result, under the command's one deadline."
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
            "--timeout", type=_positive_seconds, metavar="SECONDS",
            help=TIMEOUT_HELP + _TIMEOUT_FROM,
        )
        _output_options(p, "one JSON object per job on stdout")
        p.add_argument("--squeue", metavar="PATH", type=_given,
                       help=_SQUEUE_HELP + "; it checks the ids for whole arrays first")
        p.add_argument(
            "--parallel", type=_parallel, default=1, metavar="N",
            help=f"run up to N jobs at once (default 1, at most {MAX_PARALLEL}); results are printed in the"
            " order given",
        )
        _settling_options(p, op)
        _common_options(p)
        p.set_defaults(handler="op", op=op)
    if wanted("sweep"):
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
        p.add_argument("--limit", type=_count, metavar="N", help="settle at most N objects (oldest first)")
        _output_options(p, "one JSON object per line, each with a kind: job (one per object looked at), orphan (with"
                        " --orphans), then summary")
        p.add_argument("--metrics-file", metavar="PATH", type=_given,
                       help="write a Prometheus textfile (atomically) (default:"
                       " the config file's metrics_file, else none)")
        p.add_argument("--orphans", action="store_true",
                       help="also list jobs showing Requeue=1 that the ledger does not track")
        p.add_argument("--fix", action="store_true", help="with --orphans: run RestoreRequeueBit on them too")
        p.add_argument("--restore-timeout", type=_positive_seconds, default=15.0, metavar="SECONDS",
                       help="deadline of each RestoreRequeueBit (default 15)")
        _settle_delay_option(p)
        p.add_argument("--settle-limit", type=_count, default=DEFAULT_SETTLE_LIMIT, metavar="N",
                       help="settle at most N unknown operations of the last 7 days, newest first (default"
                       f" {DEFAULT_SETTLE_LIMIT:,}); the rest wait for the next sweep")
        _lookup_options(p)
        _common_options(p)
        p.set_defaults(handler="sweep")
    if wanted("settle"):
        p = sub.add_parser(
            "settle",
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
        p.add_argument("job_ids", nargs="*", type=_job_id, metavar="JOBID",
                       help="plain decimal job id(s) (default: every unsettled operation of the last --since days)")
        p.add_argument("--since", type=_days, metavar="DAYS",
                       help="without JOBIDs: settle the operations started in the last DAYS days (default"
                       f" {SINCE_DAYS}, as every sweep does); with JOBIDs their operations are settled, whatever"
                       " their age")
        _settle_delay_option(p)
        _output_options(p, "one JSON object per operation (kind settle)")
        _lookup_options(p)
        _common_options(p)
        p.set_defaults(handler="settle")
    if wanted("doctor"):
        p = sub.add_parser(
            "doctor",
            help="check that this machine is ready for slurm-dsl",
            description="Check the scontrol to run, the deadline wrapper's tools, slurmctld, the Slurm version and"
            " lookup, the lookup helper slurm-dsl-jobinfo, JobRequeue and the job_submit companion, the ledger, and"
            " who is asking. Exit 0 unless a check fails (warnings do not).",
        )
        _output_options(p, "one JSON object per check")
        _lookup_options(p)
        _common_options(p)
        p.set_defaults(handler="doctor")
    if wanted("script"):
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
        p.set_defaults(handler="script")
    if wanted("read"):
        p = sub.add_parser(
            "read", help="read a script's captured stderr and print its outcome",
            description="Read the captured stderr of an operation's script (from FILE, or stdin) with its nonce"
            " and exit status, and print the outcome as the operation would have. Exits as the operation would.",
            epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument("op", choices=[o.value for o in Op], metavar="OP",
                       help="hold, release, requeue, restore or open")
        p.add_argument("job_id", type=_job_id, metavar="JOBID")
        p.add_argument("--nonce", metavar="HEX", help="the script's nonce (not used for open)")
        p.add_argument("--exit-status", required=True, metavar="S", help="the script's exit status")
        p.add_argument("file", nargs="?", metavar="FILE", help="captured stderr (default: stdin)")
        _output_options(p)
        _common_options(p)
        p.set_defaults(handler="read")
    _admin_parsers(sub, wanted)
    _config_parser(sub, wanted)
    return parser


# Where --timeout may also come from (after TIMEOUT_HELP, which says what it means).
_TIMEOUT_FROM = (
    " Without --timeout, the config file's timeout is the deadline; a command given neither is a usage"
    " error (nothing runs)."
)

_CONFIG_EPILOG = """The file (/etc/slurm-dsl/slurm-dsl.conf, else --config PATH or $SLURM_DSL_CONFIG), every key
optional; a flag beats the environment, which beats the file, which beats the built-in default:

  [slurm-dsl]
  # an SQLite file, or mariadb://HOST[:PORT]/DATABASE
  ledger = /var/lib/slurm-dsl/ledger.sqlite3
  scontrol = /usr/bin/scontrol
  squeue = /usr/bin/squeue
  # auto, squeue or pyslurm
  lookup = auto
  # the deadline of commands given no --timeout
  timeout = 30
  settle_delay = 10
  metrics_file = /var/lib/prometheus/node-exporter/slurm_dsl.prom
  # error, warning, info or debug
  log_level = warning
  # root's commands on a ledger in its directory run as it (unset: slurm.conf's SlurmUser)
  service_account = slurm

A comment is a whole line starting with # or ; (never after a value). The file must be a regular file (not a
symlink), root's or the account's that runs slurm-dsl, and neither group- nor world-writable.

exit status:
  0 printed   2 a bad line in the file (its path, line and key are named)
  1 the file cannot be read or is refused (a symlink, another account's, group/world-writable)
"""


def _config_parser(sub: argparse._SubParsersAction, wanted: Callable[[str], bool]) -> None:  # type: ignore[type-arg]
    """``config``: every setting's effective value and where it came from."""
    if wanted("config"):
        p = sub.add_parser(
            "config", help="print every setting's effective value and where it came from",
            description="Read the config file as every command does and print each setting (ledger, scontrol,"
            " squeue, lookup, timeout, settle_delay, metrics_file, log_level, service_account): its effective"
            " value, or unset,"
            " and where it came from (a flag, an environment variable, the file and its line, or built in),"
            " then the file that was read, or that there was none. Runs nothing.",
            epilog=_CONFIG_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _output_options(p, "one JSON object: the file, whether it was read, and every setting with its source")
        _lookup_options(p)
        p.add_argument("--timeout", type=_positive_seconds, metavar="SECONDS", help="show it as the effective timeout")
        _settle_delay_option(p)
        p.add_argument("--metrics-file", metavar="PATH", type=_given, help="show it as the effective metrics_file")
        _common_options(p)
        p.set_defaults(handler="config")


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


def _settle_delay(text: str) -> float:
    # At most a day, as the config file's settle_delay; its floor is check_settle_delay's, which says so.
    value = seconds(text, 0.0, MAX_TIMEOUT)
    if value is None:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds from {MIN_SETTLE_DELAY:g} to {MAX_TIMEOUT:g}, in ASCII digits:"
            f" {shown(text, 40)!r}"
        )
    try:
        return check_settle_delay(value)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _key(text: str) -> str:
    try:
        return check_key(text)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _retries(text: str) -> int:
    value = whole_number(text, 0, MAX_RETRY)
    if value is None:
        raise argparse.ArgumentTypeError(f"--retry takes a whole number from 0 to {MAX_RETRY}, not {shown(text, 40)!r}")
    return value


def _settling_options(parser: argparse.ArgumentParser, op: Op) -> None:
    """``--settle``, ``--retry N``, ``--key KEY`` and ``--settle-delay`` of an op (docs/contract.md §12)."""
    again = ("only when its effect is absent, never when it may have happened (a job is never requeued twice)"
             if op is Op.REQUEUE else "when its effect is absent (a repeated one changes nothing)")
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
        "--key", type=_key, metavar="KEY",
        help="an idempotency key naming this logical operation across runs: a job an earlier run with the same"
        " key did (or that settles as present) is not acted on again, its row says so; one that may still be"
        " running waits (or expires at the deadline). 1-128 letters, digits and . _ : @ / + = -",
    )
    _settle_delay_option(group)
    parser.add_argument(
        "--durable", action="store_true",
        help="return only once slurmctld has saved the changes (docs/contract.md §13.5): slurmctld answers"
        " before it writes its state, at most once per 5 s, and a crash before then undoes what it acknowledged;"
        " a row not known saved by the deadline says so, and exits 15 (give --timeout room for one save window)",
    )


def _settle_delay_option(parser: Any) -> None:
    parser.add_argument(
        "--settle-delay", type=_settle_delay, metavar="SECONDS",
        help="an operation reads absent only from a lookup made at least SECONDS after it ended, its processes"
        f" killed (at least {MIN_SETTLE_DELAY:g}; default: the config file's settle_delay, else"
        f" {DEFAULT_SETTLE_DELAY:g}, slurmctld's default MessageTimeout: a request that reached slurmctld just"
        " before its client died may still be applied)",
    )


def _whole(what: str, high: int) -> Callable[[str], int]:
    """The type of an option taking a whole number from 1 to ``high`` (core.numbers' ASCII rule);
    ``what`` names it in the message ("a whole number of days")."""

    def check(text: str) -> int:
        value = whole_number(text, 1, high)
        if value is None:
            raise argparse.ArgumentTypeError(f"must be {what} from 1 to {high}, in ASCII digits: {shown(text, 40)!r}")
        return value

    return check


# The bounds of the whole numbers the command line takes, each far beyond any use, and each small
# enough for what the number feeds: a cutoff date the ledger can write (a prune of 9999999 days
# went back past year 1: a traceback), an SQL LIMIT (SQLite's is a 64-bit integer: a traceback
# above it), threads and scontrol processes on this host.
MAX_DAYS = 36_500  # a century: older than any ledger
MAX_COUNT = 1_000_000_000  # objects or operations: more than any ledger holds
MAX_PARALLEL = 1_000  # jobs at once, each a thread and a process of this host's
_days = _whole("a whole number of days", MAX_DAYS)
_count = _whole("a whole number", MAX_COUNT)
_parallel = _whole("a whole number of jobs at once", MAX_PARALLEL)


def _admin_parsers(sub: argparse._SubParsersAction, wanted: Callable[[str], bool]) -> None:  # type: ignore[type-arg]
    """``history`` and ``ledger status|prune``: the admin's view of the ledger."""
    if wanted("history"):
        p = sub.add_parser(
            "history", help="what every recorded operation did to jobs, and who ran it",
            description="Print each job's object (its requeue bit, since when and why) and every operation the"
            " ledger recorded on it, oldest first: when, op, result, requeue bit, the bit before and after, each"
            " call's status and message, and who ran it. Reads the ledger; runs nothing.",
            epilog=_HISTORY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument("job_ids", nargs="+", type=_job_id, metavar="JOBID", help="plain decimal job id(s)")
        _output_options(p, "one JSON object per line: the job's object (kind object), then each operation (kind"
                        " operation); kind no_record for a job never seen")
        _common_options(p)
        p.set_defaults(handler="history")
    if wanted("ledger"):
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
        _output_options(p)
        _common_options(p)
        p.set_defaults(handler="ledger status")
        p = below.add_parser(
            "prune", help="remove history older than DAYS of settled jobs, then checkpoint",
            description="Remove history rows that finished more than DAYS days ago, of objects whose bit is clear.",
            epilog=_PRUNE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument("--older-than", required=True, type=_days, metavar="DAYS",
                       help=f"remove rows that finished more than DAYS days ago (a whole number from 1 to {MAX_DAYS})")
        p.add_argument("--dry-run", action="store_true", help="count what would be removed, remove nothing")
        _output_options(p)
        _common_options(p)
        p.set_defaults(handler="ledger prune")
        p = below.add_parser(
            "migrate", help="copy a ledger into another: SQLite to MariaDB, MariaDB to SQLite, or file to file",
            description="Copy every object (bit, why, since when, lookup back-off), every history row (all"
            " columns, unfinished rows unfinished, in their order) and the last sweep from one ledger into"
            " another. The source is only read. Leases are not copied. The target must be empty unless --merge.",
            epilog=_MIGRATE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument("--from", dest="source", required=True, metavar="LOCATION", type=_given,
                       help="the ledger to copy: PATH, sqlite:PATH or mariadb://HOST[:PORT]/DATABASE[?option_file=PATH]"
                       " (it must exist; it is never written)")
        p.add_argument("--to", dest="target", required=True, metavar="LOCATION", type=_given,
                       help="the ledger to copy into, in the same forms (an SQLite file is created if need be; a"
                       " MariaDB database must exist)")
        p.add_argument("--merge", action="store_true",
                       help="copy into a ledger that already holds records: an object in both keeps the less clear"
                       " bit (set > may_be_set > clear), a history row already there is skipped; running it twice"
                       " changes nothing the second time")
        _output_options(p)
        _common_options(p)
        p.set_defaults(handler="ledger migrate")


def job_ids(given: Sequence[str]) -> List[str]:
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


# The top level's options that take a value (``--scontrol PATH``, ``--scontrol=PATH``), and the
# commands (``build_parser`` adds them in this order).
_TOP_VALUED = ("--scontrol", "--ledger", "--config")
COMMANDS = (*(op.value for op in Op), "sweep", "settle", "doctor", "script", "read", "history", "ledger", "config")


def command_named(argv: Sequence[str]) -> Optional[str]:
    """The command ``argv`` names, when that is certain without argparse: the first word that is
    not one of the top level's own options (``-v``..., ``--verbose``, ``--scontrol``/``--ledger``
    with their value) is a command's exact name.  Anything else (``--help``, ``--version``, an
    abbreviated option, ``--``, an unknown word) is None: the whole grammar parses it, so what
    it says of a bad command line never changes."""
    words = iter(argv)
    for word in words:
        if word in _TOP_VALUED:
            if next(words, None) is None:
                return None
        elif word.startswith(tuple(f"{option}=" for option in _TOP_VALUED)) or word == "--verbose":
            continue
        elif word.startswith("-"):
            if len(word) < 2 or word.strip("v") != "-":  # -v, -vv...: counted, no value
                return None
        else:
            return word if word in COMMANDS else None
    return None


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """The command line as a Namespace with a ``handler`` (the key of its command function in
    ``cli``); ``UsageError`` if it is not one.

    Only the named command's part of the grammar is built when ``command_named`` is sure of it:
    the same parse, without adding a dozen subcommands' options at every start of a hold
    (docs/benchmarks.md §7)."""
    words = sys.argv[1:] if argv is None else list(argv)
    args, extra = build_parser(command_named(words)).parse_known_args(words)
    # argparse binds positionals before the options that follow them, so the FILE
    # of "read OP JOBID --nonce N --exit-status S FILE" arrives here.
    if extra and getattr(args, "handler", None) == "read" and args.file is None and len(extra) == 1:
        args.file = extra.pop()
    if extra:
        raise UsageError(shown(f"unrecognized arguments: {' '.join(extra)}", _USAGE_CAP))
    return args
