"""bash completion offers exactly what the parser accepts: commands, options, choices.

The expected words come from argparse's own objects, walked here apart from the module; the
script is run by a real bash with COMP_WORDS set as bash sets them at a TAB.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from slurm_dsl.admin import completion
from slurm_dsl.admin.parser import build_parser

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


def levels() -> Dict[Tuple[str, ...], argparse.ArgumentParser]:
    found: Dict[Tuple[str, ...], argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, path: Tuple[str, ...]) -> None:
        found[path] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))

    walk(build_parser(), ())
    return found


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("completion") / "slurm-dsl"
    path.write_text(completion.render())
    return path


def complete(script: Path, *words: str) -> List[str]:
    """What bash offers at a TAB after ``slurm-dsl WORDS...`` (the last word is the one typed)."""
    test = 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _slurm_dsl; printf "%s\\n" "${COMPREPLY[@]}"'
    done = subprocess.run(
        ["bash", "--norc", "-c", test, "bash", str(script), "slurm-dsl", *words],
        capture_output=True, text=True, timeout=30, check=True, cwd="/",
    )
    return [w for w in done.stdout.split("\n") if w]


def test_every_command_path_offers_its_commands_and_options(script: Path) -> None:
    for path, parser in levels().items():
        options = sorted(o for a in parser._actions for o in a.option_strings)
        assert sorted(complete(script, *path, "-")) == options, path
        subs = [n for a in parser._actions if isinstance(a, argparse._SubParsersAction) for n in a.choices]
        assert complete(script, *path, "") == subs, path


def test_a_value_is_never_taken_for_a_command(script: Path) -> None:
    # "hold" as the ledger's file name: the command is still to come.
    assert "history" in complete(script, "--ledger", "hold", "hi")
    assert complete(script, "--ledger", "/tmp/x", "ledger", "p") == ["prune"]
    assert complete(script, "hold", "--timeout", "") == []  # a number: nothing to guess
    assert complete(script, "hold", "123", "") == []  # job ids are never guessed


def test_choices_and_files(script: Path, tmp_path: Path) -> None:
    assert complete(script, "sweep", "--lookup", "") == ["auto", "squeue", "pyslurm"]
    (tmp_path / "ledger.sqlite3").write_text("")
    assert complete(script, "--ledger", str(tmp_path / "led")) == [str(tmp_path / "ledger.sqlite3")]


def test_a_name_that_is_not_a_plain_word_is_refused() -> None:
    with pytest.raises(ValueError, match="plain word"):
        completion._word("x'; rm -rf /; '")


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_shellcheck_reads_the_script_without_a_word(script: Path) -> None:
    done = subprocess.run(["shellcheck", "-s", "bash", str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
