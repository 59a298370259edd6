"""bash completion for ``slurm-dsl``, made from ``admin.parser.build_parser`` (docs/packaging.md).

Static bash: per command path its options and their choices, file names for a PATH, FILE or URL
value.  Job ids are never guessed (listing the queue at each TAB is what the package exists not to
do); every name is checked to be a plain word before it is written into the script."""

from __future__ import annotations

import argparse
import re
from typing import Dict, List, Tuple

from .manpage import commands
from .options import PROG
from .parser import build_parser

_WORD = re.compile(r"-{0,2}[A-Za-z0-9][A-Za-z0-9_-]*")
_FILE_METAVARS = ("PATH", "FILE", "URL", "DIR")


def _word(text: str) -> str:
    if not _WORD.fullmatch(text):
        raise ValueError(f"not a plain word for the completion script: {text!r}")
    return text


def _level(parser: argparse.ArgumentParser) -> Tuple[List[str], List[str], Dict[str, List[str]], List[str]]:
    """(options, those taking a value, the choices of those that have some, those taking a file)."""
    options: List[str] = []
    valued: List[str] = []
    choices: Dict[str, List[str]] = {}
    files: List[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or not action.option_strings:
            continue
        names = [_word(o) for o in action.option_strings]
        options += names
        if action.nargs == 0:
            continue
        valued += names
        metavar = str(action.metavar or action.dest).upper()
        for name in names:
            if action.choices is not None:
                choices[name] = [_word(str(c)) for c in action.choices]
            elif any(kind in metavar for kind in _FILE_METAVARS):
                files.append(name)
    return options, valued, choices, files


def _patterns(path: str, words: List[str]) -> str:
    """The case patterns of ``words`` after the command path ``path``: ``'hold:--timeout'|...``."""
    return "|".join(f"'{path}:{word}'" for word in words)


def _reply(words: str) -> str:
    """The case branch's body that offers ``compgen WORDS`` for the word typed, and stops."""
    return f'mapfile -t COMPREPLY < <(compgen {words} -- "$cur"); return ;;'


def _subcommands(parser: argparse.ArgumentParser) -> List[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return [_word(name) for name in action.choices]
    return []


def render() -> str:
    """The bash completion script for ``slurm-dsl``."""
    top = build_parser()
    levels = [("", top), *((" ".join(words), sub) for words, sub in commands(top))]
    function = "_" + PROG.replace("-", "_")
    out = [
        f"# bash completion for {PROG}, made from its own parser (slurm_dsl/admin/completion.py): do not edit.",
        f"{function}() {{",
        '    local cur=${COMP_WORDS[COMP_CWORD]} prev="" path="" word i expect=""',
        '    [[ $COMP_CWORD -gt 0 ]] && prev=${COMP_WORDS[COMP_CWORD-1]}',
        "    # The command path so far, skipping options and the values of those that take one.",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        "        word=${COMP_WORDS[i]}",
        '        if [[ -n $expect ]]; then expect=""; continue; fi',
        '        case "$path:$word" in',
    ]
    table = [(name, *_level(parser), _subcommands(parser)) for name, parser in levels]
    for name, _, valued, _, _, _ in table:
        if valued:
            out.append(f"            {_patterns(name, valued)}) expect=1; continue ;;")
    for name, _, _, _, _, subs in table:
        out += [f"            '{name}:{sub}') path='{f'{name} {sub}'.strip()}'; continue ;;" for sub in subs]
    out += ["        esac", "    done", '    case "$path:$prev" in']
    for name, _, valued, choices, files, _ in table:
        for option, values in choices.items():
            out.append(f"        '{name}:{option}') {_reply('-W ' + repr(' '.join(values)))}")
        out += [f"        '{name}:{option}') {_reply('-f')}" for option in files]
        rest = [v for v in valued if v not in choices and v not in files]
        if rest:
            out.append(f"        {_patterns(name, rest)}) COMPREPLY=(); return ;;")
    out += ["    esac", '    local words=""', '    case "$path" in']
    for name, options, _, _, _, subs in table:
        listed = f"words='{' '.join(options)}'; else words='{' '.join(subs)}'"
        out += [f"        '{name}')", f"            if [[ $cur == -* ]]; then {listed}; fi ;;"]
    out += [
        "    esac",
        '    mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")',
        "}",
        f"complete -F {function} {PROG}",
        "",
    ]
    return "\n".join(out)
