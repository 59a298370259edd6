"""``slurm-dsl config``: every setting's effective value and where it came from (docs/contract.md §10.2)."""

from __future__ import annotations

import argparse
from typing import IO

from ...run.config import SETTINGS
from .. import render as show
from ..exits import EXIT_OK
from ..options import (
    Command,
    common_options,
    given,
    lookup_options,
    no_ledger,
    output_options,
    positive_seconds,
    settle_delay_option,
)

# The help's epilog: the file's grammar around a sample of every setting (``_sample``).
_FILE_HELP = """The file (/etc/slurm-dsl/slurm-dsl.conf, else --config PATH or $SLURM_DSL_CONFIG), every key
optional; a flag beats the environment, which beats the file, which beats the built-in default:

  [slurm-dsl]
"""
_EXIT_HELP = """
A comment is a whole line starting with # or ; (never after a value). The file must be a regular file (not a
symlink), root's or the account's that runs slurm-dsl, and neither group- nor world-writable.

exit status:
  0 printed   2 a bad line in the file (its path, line and key are named)
  1 the file cannot be read or is refused (a symlink, another account's, group/world-writable)
"""


def _sample() -> str:
    """A config file giving every setting of config.SETTINGS, in its order, each note as a comment."""
    return "".join((f"  # {s.note}\n" if s.note else "") + f"  {s.key} = {s.example}\n" for s in SETTINGS)


def add(sub: argparse._SubParsersAction, name: str) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        name, help="print every setting's effective value and where it came from",
        description="Read the config file as every command does and print each setting ("
        + ", ".join(s.key for s in SETTINGS) + "): its effective value, or unset,"
        " and where it came from (a flag, an environment variable, the file and its line, or built in),"
        " then the file that was read, or that there was none. Runs nothing.",
        epilog=_FILE_HELP + _sample() + _EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    output_options(p, "one JSON object: the file, whether it was read, and every setting with its source")
    lookup_options(p)
    p.add_argument("--timeout", type=positive_seconds, metavar="SECONDS", help="show it as the effective timeout")
    settle_delay_option(p)
    p.add_argument("--metrics-file", metavar="PATH", type=given, help="show it as the effective metrics_file")
    common_options(p)
    p.set_defaults(handler="config")


def run(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    configured = args.configuration
    report = show.config_json(configured.file, configured.found, [e.to_json() for e in configured.settings.values()])
    out.write(show.config_text(report, args.json))
    return EXIT_OK


COMMAND = Command(add, {"config": run}, no_ledger)
