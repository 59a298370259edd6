"""``man slurm-dsl``: the manual page, made from ``admin.parser.build_parser`` (docs/packaging.md).

Every ``--help`` goes in a no-fill block as printed, escaped for roff: a backslash as ``\\e``, a
hyphen as ``\\-`` (searchable), a line starting with ``.`` or ``'`` behind ``\\&``."""

from __future__ import annotations

import argparse
from typing import Iterator, List, Tuple

from .. import __version__
from ..run.config import SETTINGS
from .options import PROG
from .parser import build_parser

_NAME = "safe, deadline-wrapped Slurm job control (hold, release, requeue, restore, open) for automation"

_FILES = (
    ("/var/lib/slurm-dsl/ledger.sqlite3", "the default ledger (SQLite): root's (or the service account's), in a"
     " directory of mode 0700; --ledger or $SLURM_DSL_LEDGER names another, or a mariadb:// URL"),
    ("/etc/slurm-dsl/slurm-dsl.conf", "the config file every command reads (slurm-dsl config shows it): the"
     " ledger, scontrol, squeue, lookup, timeout, settle_delay, metrics_file, log_level; --config or"
     " $SLURM_DSL_CONFIG names another"),
    ("/etc/slurm-dsl/ledger.cnf", "the MariaDB option file of a mariadb:// ledger (credentials are read"
     " from it only)"),
    ("/usr/share/slurm-dsl/job_submit.lua", "the job_submit.lua companion"),
)

# Every setting an environment variable may give (config.SETTINGS), then the config file's own.
_ENVIRONMENT = (
    *((s.env, s.env_help) for s in SETTINGS if s.env is not None),
    ("SLURM_DSL_CONFIG", "the config file, when --config is not given; it must exist"),
)


def escape(text: str) -> str:
    """``text`` as roff reads it in a no-fill block: every character as printed."""
    lines = []
    for line in text.replace("\\", "\\e").replace("-", "\\-").split("\n"):
        lines.append("\\&" + line if line.startswith((".", "'")) else line)
    return "\n".join(lines)


Named = Tuple[Tuple[str, ...], argparse.ArgumentParser]


def commands(parser: argparse.ArgumentParser, path: Tuple[str, ...] = ()) -> Iterator[Named]:
    """Every subcommand of ``parser``, depth first as ``--help`` lists them, with the words that name it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from commands(sub, (*path, name))


def render(date: str) -> str:
    """The manual page, slurm-dsl(1), dated ``date`` (``YYYY-MM-DD``, for a page that builds the same twice)."""
    parser = build_parser()
    out: List[str] = [
        f'.TH SLURM\\-DSL 1 "{date}" "slurm\\-dsl {escape(__version__)}" "slurm\\-dsl manual"',
        ".SH NAME",
        f"{PROG} \\- {escape(_NAME)}",
        ".SH SYNOPSIS",
        ".nf",
        escape(parser.format_usage().strip()),
        ".fi",
        ".SH DESCRIPTION",
        "Every command below is shown with its own",
        ".B \\-\\-help",
        "text, as",
        ".B slurm\\-dsl COMMAND \\-\\-help",
        "prints it.",
        ".PP",
        ".nf",
        escape(parser.format_help().rstrip()),
        ".fi",
        ".SH COMMANDS",
    ]
    for words, sub in commands(parser):
        out += [f".SS {escape(' '.join((PROG, *words)))}", ".nf", escape(sub.format_help().rstrip()), ".fi"]
    out.append(".SH FILES")
    for path, what in _FILES:
        out += [".TP", f".I {escape(path)}", escape(what)]
    out.append(".SH ENVIRONMENT")
    for name, what in _ENVIRONMENT:
        out += [".TP", f".B {name}", escape(what)]
    out += [
        ".SH SEE ALSO",
        ".BR scontrol (1),",
        ".BR squeue (1),",
        ".BR slurm.conf (5);",
        "/usr/share/doc/slurm\\-dsl/README.md and /usr/share/doc/slurm\\-dsl/docs/contract.md",
        "(the behaviour contract).",
        "",
    ]
    return "\n".join(out)
