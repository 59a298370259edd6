"""The ``slurm-dsl`` command line's grammar (docs/contract.md §10): the top level, and ``REGISTRY``,
one module of ``admin/commands/`` per command, from which the parser, the manual page and the
completion take them.  A command line naming its command is parsed with that command's grammar
alone (docs/benchmarks.md §7).  A bad command line is a ``UsageError``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, NoReturn, Optional, Sequence, Tuple

from .. import __version__
from ..core.model import Op, UsageError
from ..core.shown import shown
from .options import PROG, RESULT_EPILOG, Command, common_options

# Every command: the words it adds under COMMAND (in the order ``--help`` lists them) and its module
# of admin/commands/.  A module is imported only when its grammar is built (``command``): an
# operation, the command run on every job, does not load the others' at every start
# (docs/benchmarks.md §7).  A new command is a module there and its line here.
REGISTRY: Tuple[Tuple[Tuple[str, ...], str], ...] = (
    (tuple(op.value for op in Op), "ops"),
    (("sweep",), "sweep"),
    (("settle",), "settle"),
    (("doctor",), "doctor"),
    (("script",), "script"),
    (("read",), "read"),
    (("history",), "history"),
    (("ledger",), "ledger"),
    (("config",), "config"),
)
COMMANDS = tuple(name for names, _ in REGISTRY for name in names)


def command(name: str) -> Command:
    """What the module of the command ``name`` gives (``options.Command``), imported on first use."""
    module = next(module for names, module in REGISTRY if name in names)
    found: Command = importlib.import_module(f".commands.{module}", __package__).COMMAND
    return found

# Which account (admin/account.py): said once, at the top.
_ACCOUNT_NOTE = (
    " Run it as root or as slurm.conf's SlurmUser, who may act on every user's job. Root's commands on"
    " an SQLite ledger in a directory of the service account's (the package's /var/lib/slurm-dsl is slurm's,"
    " which the units run as) run as that account, so that the ledger's files stay its own; the service"
    " account is the config file's service_account, else slurm.conf's SlurmUser (scontrol show config)."
    " A ledger directory of any other account is refused: root never becomes an account that could have"
    " written the ledger it would trust."
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
    """The width argparse's formatter takes when given none (``shutil.get_terminal_size()``, less 2)."""
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


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The whole grammar; with ``only`` (a command's name), the top level and that command alone."""

    def wanted(name: str) -> bool:
        return only is None or name == only

    parser = _Parser(
        prog=PROG,
        description="Safe, deadline-wrapped Slurm job control. Every call's outcome is read strictly:"
        " a result is ok or rejected only when it certainly is; anything else is unknown." + _ACCOUNT_NOTE,
        epilog=RESULT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        if wanted(name):
            command(name).add(sub, name)
    return parser


# The top level's options that take a value (``--scontrol PATH``, ``--scontrol=PATH``).
_TOP_VALUED = ("--scontrol", "--ledger", "--config")


def command_named(argv: Sequence[str]) -> Optional[str]:
    """The command ``argv`` names when that is certain without argparse; else None (the whole grammar parses it)."""
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
    """The command line as a Namespace with a ``handler``; ``UsageError`` if it is not one."""
    words = sys.argv[1:] if argv is None else list(argv)
    args, extra = build_parser(command_named(words)).parse_known_args(words)
    # argparse binds positionals before the options that follow them, so the FILE
    # of "read OP JOBID --nonce N --exit-status S FILE" arrives here.
    if extra and getattr(args, "handler", None) == "read" and args.file is None and len(extra) == 1:
        args.file = extra.pop()
    if extra:
        raise UsageError(shown(f"unrecognized arguments: {' '.join(extra)}", _USAGE_CAP))
    return args
