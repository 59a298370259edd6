"""A command registered once, a setting declared once (issue 34 item 5): what the registry and
``run/config.py``'s ``SETTINGS`` give, every other list of the commands and settings takes.

The registry (``parser.REGISTRY``) names each command and its module; the grammar, ``COMMANDS``,
the handlers and the ledgers a command opens come from it.  A setting's one row gives its flag's
attribute, its place in ``slurm-dsl config``'s help (the key list and a line of the sample file,
which the config file's own reader accepts), and its environment variable in the manual page."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Set

from slurm_dsl.admin import cli, manpage
from slurm_dsl.admin.parser import COMMANDS, REGISTRY, build_parser, command
from slurm_dsl.run import config


def handler_keys(parser: argparse.ArgumentParser) -> Set[str]:
    """The ``handler`` every command path of the grammar sets (its leaves: ``ledger`` has none)."""
    keys = set()
    for _, sub in manpage.commands(parser):
        handler = sub.get_default("handler")
        if handler is not None:
            keys.add(handler)
    return keys


def test_every_command_of_the_grammar_is_a_registered_one_and_has_its_handler() -> None:
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert tuple(top.choices) == COMMANDS == tuple(name for names, _ in REGISTRY for name in names)
    assert handler_keys(parser) == {key for name in COMMANDS for key in command(name).handlers}
    for name in COMMANDS:  # the grammar of one command alone (command_named) sets its own
        assert handler_keys(build_parser(name)) == set(command(name).handlers), name


def test_the_ledgers_a_command_opens_come_from_its_module() -> None:
    parse = build_parser().parse_args
    assert cli._ledgers_used(parse(["config"])) == ()
    assert cli._ledgers_used(parse(["script", "hold", "7", "--timeout", "5"])) == ()
    assert cli._ledgers_used(parse(["ledger", "migrate", "--from", "/a", "--to", "/b"])) == ("/a", "/b")
    assert cli._ledgers_used(parse(["history", "7", "--ledger", "/l"])) == ("/l",)


def test_every_setting_s_flag_is_the_attribute_the_command_line_reads() -> None:
    dests: Dict[str, Set[str]] = {}
    for _, sub in manpage.commands(build_parser()):
        for action in sub._actions:
            for option in action.option_strings:
                dests.setdefault(option, set()).add(action.dest)
    flagged = [s for s in config.SETTINGS if s.flag is not None]
    assert [s.key for s in flagged] == list(cli._SETTING_ARGS)
    for s in flagged:
        assert dests[s.flag or ""] == {cli._SETTING_ARGS[s.key][0]}, s.key
        assert cli._SETTING_ARGS[s.key][1] is (float if s.number else str)


def test_config_s_help_lists_every_setting_and_its_sample_is_a_config_file() -> None:
    sub = dict(manpage.commands(build_parser()))[("config",)]
    assert f"({', '.join(s.key for s in config.SETTINGS)})" in (sub.description or "")
    epilog = sub.epilog or ""
    sample = epilog[epilog.index("  [slurm-dsl]\n"):epilog.index("\n\n", epilog.index("  [slurm-dsl]\n"))]
    read = config.parse("\n".join(line.strip() for line in sample.splitlines()).encode(), "sample")
    assert {key: value for key, (value, _) in read.items()} == {s.key: s.example for s in config.SETTINGS}


def test_every_environment_variable_is_in_the_manual_page() -> None:
    page = manpage.render("2026-01-01")
    for s in config.SETTINGS:
        if s.env is not None:
            assert f".B {s.env}\n{manpage.escape(s.env_help)}\n" in page, s.key


def test_every_command_module_is_registered_and_on_the_map() -> None:
    folder = Path(manpage.__file__).parent / "commands"
    present = {path.stem for path in folder.glob("*.py")} - {"__init__"}
    assert {module for _, module in REGISTRY} == present
    wings = (folder.parents[2] / "docs" / "wings.md").read_text()
    assert {name for name in present if f"`commands/{name}.py`" not in wings} == set()
