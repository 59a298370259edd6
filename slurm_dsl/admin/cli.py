"""The ``slurm-dsl`` command line (docs/contract.md §10): the only module that prints.

``main`` runs the handler a command's module gives (``parser.REGISTRY``) and is the one place a
library error becomes an exit status (``EXIT_OF_ERROR``); anything that is not a ``DSLError`` is a
bug, left to crash with its traceback."""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import signal
import sys
from typing import IO, Callable, Dict, Optional, Sequence, Tuple, Type

from ..core.model import DSLError, SweepBusy, UsageError
from ..core.shown import shown
from ..run import config
from ..run.config import ConfigFileError
from .account import become_ledger_owner
from .exits import EXIT_CODES as EXIT_CODES
from .exits import EXIT_ERROR, EXIT_USAGE
from .exits import EXIT_SWEEP_BUSY as EXIT_SWEEP_BUSY
from .options import PROG
from .parser import command, parse_args

# What only the sweep, doctor and the admin's view need (the sweep, the lookup choice, pyslurm's
# adapter, a thread pool) is imported by their handlers: an operation, the common case run on
# every job, does not pay their start-up time.

# The exit status of a library error, decided here only (in ``main``): the first class that
# matches wins, so the more specific come first.  Not an error at all: EXIT_CODES (docs/contract.md §10).
EXIT_OF_ERROR: Tuple[Tuple[Type[DSLError], int], ...] = (
    (UsageError, EXIT_USAGE),  # a bad flag or value, an array's own JobId: nothing ran
    (ConfigFileError, EXIT_USAGE),  # a bad line in the config file: nothing ran (unreadable: 1, exit_status_of)
    (SweepBusy, EXIT_SWEEP_BUSY),  # another sweep is running: nothing done
    (DSLError, EXIT_ERROR),  # configuration, ledger, lookup, files...
)

log = logging.getLogger("slurm_dsl")


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time (tests and callers may swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            # A traceback after the message keeps its lines; anything else is escaped (below).
            sys.stderr.write(shown(self.format(record), None, lines=True) + "\n")
        except Exception:
            self.handleError(record)


class _EscapingFormatter(logging.Formatter):
    """Escapes a record's message whole, newlines too, so no record can forge another line (docs/contract.md §10.1)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return shown(super().formatMessage(record), None)


_handler: Optional[_StderrHandler] = None


def _setup_logging(verbose: int, base: str = "warning") -> None:
    """Log at ``base`` (a config.LOG_LEVELS word) raised one level per ``verbose``, to stderr; only here."""
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


# Each setting that a flag gives: its attribute on the parsed command line, and the type the
# command takes it in (config.SETTINGS says both: the flag, and whether it is seconds).
_SETTING_ARGS: Dict[str, Tuple[str, Callable[[str], object]]] = {
    s.key: (s.flag[2:].replace("-", "_"), float if s.number else str) for s in config.SETTINGS if s.flag
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
    """Put each setting's effective value into ``args``, the whole reading into ``args.configuration``;
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


def _ledgers_used(args: argparse.Namespace) -> Sequence[str]:
    """The ledger locations a command will open (none for ``config``, ``script``, ``read``)."""
    return command(args.command).ledgers(args)


def exit_status_of(error: DSLError) -> int:
    """The exit status for a library error: the first row of ``EXIT_OF_ERROR`` it is an instance of."""
    if isinstance(error, ConfigFileError) and error.unreadable:
        return EXIT_ERROR  # missing, refused or unreadable: not a usage error
    return next(code for cls, code in EXIT_OF_ERROR if isinstance(error, cls))


def main(argv: Optional[Sequence[str]] = None, out: Optional[IO[str]] = None) -> int:
    """Run the command line; return its exit status.  Anything but a ``DSLError``, EPIPE (quiet, 1) or
    Ctrl-C (130) propagates: it is a bug."""
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
        return int(command(args.command).handlers[args.handler](args, out, sys.stderr))
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
    """The console script: ``main``, then ``os._exit`` at once (``sys.exit`` would spend ~15 ms freeing every
    object); import-time objects are frozen so the collector skips them."""
    gc.freeze()
    # Threads that mostly wait for a process (the array check's lookup, started while this thread
    # imports and opens the ledger) get the interpreter back within half a millisecond when their
    # process answers or they need it to start one, not the default 5 ms, which they would pay at
    # every step while this thread runs Python (docs/benchmarks.md §2).
    sys.setswitchinterval(0.0005)
    status = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # ``slurm-dsl ... | head``: quiet, as in ``main``
        status = max(status, EXIT_ERROR)
    with contextlib.suppress(OSError, ValueError):  # ValueError: ``main`` closed stderr on EPIPE
        sys.stderr.flush()
    logging.shutdown()
    os._exit(status)
