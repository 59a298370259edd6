"""slurm-dsl(1) is the command line's own ``--help``, every subcommand's, escaped for roff.

The expected texts come from argparse directly (each parser's ``format_help``), and roff's
reading of the page is undone by a naive unescape written here, so a help text that the page
drops, cuts or mangles fails; groff, where installed, reads the page without a warning.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl.admin import manpage
from slurm_dsl.admin.parser import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]


def unescape(line: str) -> str:
    """What roff prints for one line of a no-fill block, for the three escapes the page uses."""
    if line.startswith("\\&"):
        line = line[2:]
    return line.replace("\\-", "-").replace("\\e", "\\")


def blocks(page: str) -> List[str]:
    """The page's no-fill blocks, unescaped, in order."""
    found: List[str] = []
    current: List[str] = []
    inside = False
    for line in page.split("\n"):
        if line == ".nf":
            inside, current = True, []
        elif line == ".fi":
            inside = False
            found.append("\n".join(current))
        elif inside:
            current.append(unescape(line))
    return found


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    return manpage.render("2026-12-01")


def subcommands(parser: argparse.ArgumentParser) -> List[argparse.ArgumentParser]:
    """Every parser under ``parser``, found apart from ``manpage.commands``."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += [sub, *subcommands(sub)]
    return found


def test_every_help_text_is_in_the_page_as_printed(page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    parser = build_parser()
    expected = [parser.format_help().rstrip()] + [p.format_help().rstrip() for p in subcommands(parser)]
    assert len(expected) > len(COMMANDS)  # the nested ledger commands are there too
    got = blocks(page)
    for text in expected:
        assert text in got


def test_every_command_has_its_section(page: str) -> None:
    sections = re.findall(r"^\.SS (.*)$", page, re.M)
    named = [unescape(s) for s in sections]
    for command in COMMANDS:
        assert f"slurm-dsl {command}" in named
    assert "slurm-dsl ledger status" in named and "slurm-dsl ledger prune" in named
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "FILES", "ENVIRONMENT", "SEE ALSO"):
        assert f".SH {heading}" in page.split("\n")


def test_the_page_is_dated_and_versioned_and_builds_the_same_twice(page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import slurm_dsl

    first = page.split("\n")[0]
    assert first.startswith('.TH SLURM\\-DSL 1 "2026-12-01" ')
    assert unescape(slurm_dsl.__version__) in unescape(first)
    monkeypatch.setenv("COLUMNS", "80")
    assert manpage.render("2026-12-01") == page


@given(st.text(alphabet=st.sampled_from(list(".'\\-x \n\t")), max_size=40))
def test_escape_keeps_every_character_and_starts_no_request(text: str) -> None:
    escaped = manpage.escape(text)
    lines = escaped.split("\n")
    assert "\n".join(unescape(line) for line in lines) == text
    for line in lines:
        assert not line.startswith((".", "'"))
        # no backslash but the three escapes
        assert re.fullmatch(r"(?:\\&)?(?:[^\\]|\\-|\\e)*", line)


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
def test_groff_reads_the_page_without_a_warning(page: str) -> None:
    done = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", "-z"], input=page.encode(), capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0
    assert done.stderr == b""


def test_contrib_manpage_writes_the_same_page(page: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "contrib" / "manpage"), "--date", "2026-12-01"],
        capture_output=True, timeout=60, check=True, env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.decode() == page
