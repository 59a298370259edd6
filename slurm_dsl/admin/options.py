"""What the ``slurm-dsl`` commands share on the command line (docs/contract.md §10): value types, the
options several commands take, the reading of job ids (``-``: stdin), and ``Command``, what every
module of ``admin/commands/`` registers.  A value the parser refuses is an ``argparse.ArgumentTypeError``."""

from __future__ import annotations

import argparse
import sys
from typing import IO, TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Sequence, TypeVar

from ..core.jobid import SHOWN_TOKEN, token, validate_job_id
from ..core.jobinfo import LOOKUP_KINDS
from ..core.model import InvalidInput, UsageError
from ..core.numbers import seconds, whole_number
from ..core.settle import DEFAULT_SETTLE_DELAY, MIN_SETTLE_DELAY, check_settle_delay
from ..core.shown import shown
from ..run.deadlines import MAX_TIMEOUT, MIN_TIMEOUT, timeout_of
from ..run.pace import DEFAULT_RATE, rate_of

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

PROG = "slurm-dsl"
T = TypeVar("T")
V = TypeVar("V")

# What a command's handler is given: the parsed command line (its settings already resolved,
# ``cli._apply_config``), stdout, stderr; it returns the exit status.
Handler = Callable[[argparse.Namespace, IO[str], IO[str]], int]


def the_ledger(args: argparse.Namespace) -> Sequence[str]:
    """The ledger locations most commands open: ``--ledger``'s (resolved)."""
    return (args.ledger,)


def no_ledger(args: argparse.Namespace) -> Sequence[str]:
    """For a command that opens no ledger (``config``, ``script``, ``read``)."""
    return ()


class Command:
    """What a module of ``admin/commands/`` gives ``parser.REGISTRY``: ``add`` (a subparser that sets
    ``handler``, a key of ``handlers``), its ``handlers``, and the ``ledgers`` a parsed command line opens."""

    __slots__ = ("add", "handlers", "ledgers")

    def __init__(
        self,
        add: Callable[[SubParsers, str], None],
        handlers: Dict[str, Handler],
        ledgers: Callable[[argparse.Namespace], Sequence[str]] = the_ledger,
    ) -> None:
        self.add, self.handlers, self.ledgers = add, handlers, ledgers

    def __repr__(self) -> str:
        return f"Command({sorted(self.handlers)!r})"


# What an operation's exit status says (hold, release, ..., and read, which exits as one would).
RESULT_EPILOG = """\
exit status:
  0 ok   10 rejected   11 not_found   12 expired   13 not_run   14 bit_set   15 unknown
  2 usage error (nothing ran)   1 any other error
  With several jobs, the worst result decides (15 is worst, 0 best).
"""


def positive_seconds(text: str) -> float:
    # The one timeout rule (deadlines.timeout_of): its bounds, core.numbers' ASCII digits.
    value = timeout_of(text)
    if value is None:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds, at least {MIN_TIMEOUT:g} and at most {MAX_TIMEOUT:g} (one day), in ASCII"
            f" digits: {shown(text, 40)!r}"
        )
    return value


def rate_option(parser: argparse.ArgumentParser) -> None:
    """``--rate``: calls a second to slurmctld at most (docs/contract.md §10.5; the config file's ``rate``)."""

    def rate(text: str) -> float:
        try:
            return rate_of(text) or 0.0
        except InvalidInput as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parser.add_argument(
        "--rate", type=rate, metavar="CALLS",
        help="send slurmctld at most CALLS calls a second, over every job (0: unpaced; default: the config file's"
        f" rate, else {DEFAULT_RATE:g}); root is exempt from slurmctld's own rate limiting, so this is what spares"
        " it. A job whose calls could not start by the deadline is expired, nothing done",
    )


def given(text: str) -> str:
    """A path or location option's value; an empty one is refused (core.plain.not_empty)."""
    if text == "":
        raise argparse.ArgumentTypeError(
            "an empty value is refused: give one, or leave the option out to take the environment's, the config"
            " file's or the built-in one (slurm-dsl config shows which)"
        )
    return text


def refusing(check: Callable[[V], T]) -> Callable[[V], T]:
    """``check`` (a core rule that raises ``InvalidInput``) as an option's type, its refusal a usage error."""

    def checked(value: V) -> T:
        try:
            return check(value)
        except InvalidInput as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return checked


job_id = refusing(validate_job_id)


def job_id_or_stdin(text: str) -> str:
    return text if text == "-" else job_id(text)


def settle_delay(text: str) -> float:
    # At most a day, as the config file's settle_delay; its floor is check_settle_delay's, which says so.
    value = seconds(text, 0.0, MAX_TIMEOUT)
    if value is None:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds from {MIN_SETTLE_DELAY:g} to {MAX_TIMEOUT:g}, in ASCII digits:"
            f" {shown(text, 40)!r}"
        )
    return refusing(check_settle_delay)(value)


def _whole(what: str, high: int) -> Callable[[str], int]:
    """The type of an option taking a whole number from 1 to ``high``; ``what`` names it in the message."""

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
days = _whole("a whole number of days", MAX_DAYS)
count = _whole("a whole number", MAX_COUNT)
parallel = _whole("a whole number of jobs at once", MAX_PARALLEL)


def common_options(parser: argparse.ArgumentParser, top: bool = False) -> None:
    """Options accepted both before and after the command; below the top level their default is SUPPRESS,
    so a subcommand does not overwrite what was given before it."""
    default = {} if top else {"default": argparse.SUPPRESS}
    parser.add_argument(
        "--scontrol",
        metavar="PATH",
        type=given,
        help="scontrol to run (default: $SLURM_DSL_SCONTROL, else the config file's scontrol, else the first on"
        " PATH, else /usr/bin/scontrol)",
        **default,  # type: ignore[arg-type]
    )
    parser.add_argument(
        "--ledger",
        metavar="PATH|URL",
        type=given,
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
    _config_option(parser, top)


def _config_option(parser: argparse.ArgumentParser, top: bool) -> None:
    """``--config``, accepted before and after the command as ``--ledger`` is."""
    parser.add_argument(
        "--config", metavar="PATH", type=given,
        help="the config file (default: $SLURM_DSL_CONFIG, else /etc/slurm-dsl/slurm-dsl.conf if there is one);"
        " see 'slurm-dsl config --help'",
        **({} if top else {"default": argparse.SUPPRESS}),  # type: ignore[arg-type]
    )


def output_options(parser: argparse.ArgumentParser, objects: str = "one JSON object") -> None:
    """``--json``, for every subcommand that has it; ``objects`` says what its JSON is."""
    parser.add_argument("--json", action="store_true", help=objects)


SQUEUE_HELP = (
    "squeue to run (default: $SLURM_DSL_SQUEUE, else the config file's squeue, else the squeue beside the"
    " scontrol in use, else the first on PATH, else /usr/bin/squeue)"
)


def lookup_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--squeue", metavar="PATH", type=given, help=SQUEUE_HELP)
    parser.add_argument(
        "--lookup", choices=LOOKUP_KINDS,
        help="how sweeps look jobs up: squeue, pyslurm (an error if no pyslurm matching the running Slurm"
        " imports), or auto: pyslurm when usable, else squeue (default: $SLURM_DSL_LOOKUP, else the config"
        " file's lookup, else auto)",
    )


def settle_delay_option(parser: Any) -> None:
    parser.add_argument(
        "--settle-delay", type=settle_delay, metavar="SECONDS",
        help="an operation reads absent only from a lookup made at least SECONDS after it ended, its processes"
        f" killed (at least {MIN_SETTLE_DELAY:g}; default: the config file's settle_delay, else"
        f" {DEFAULT_SETTLE_DELAY:g}, slurmctld's default MessageTimeout: a request that reached slurmctld just"
        " before its client died may still be applied)",
    )


def job_ids(given: Sequence[str]) -> List[str]:
    """The ids in the order given, ``-`` replaced by stdin's, each validated (a usage error) and given once."""
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
    """``stream``'s whitespace-separated words, read a piece at a time; one past ``_LONGEST_WORD`` is cut and last."""
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
