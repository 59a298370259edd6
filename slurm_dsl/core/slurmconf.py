"""slurm.conf read as slurmctld reads it (docs/contract.md §13.8), for the few keys slurm-dsl needs.
Pure: the caller reads the files (``include``).  Beyond §13.8 (src/common/parse_config.c, 25.11): keys
are case-insensitive, several to a line; a line ending in an odd number of ``\\`` continues, and a
``#`` after an even number starts a comment; ``%c`` is ClusterName in lower case.  An include that
cannot be read, one nested deeper than ``MAX_DEPTH``, or a ``%c`` before any ClusterName makes the
whole reading ``unreadable``.
"""

from __future__ import annotations

import re
from typing import Callable, List, NamedTuple, Optional, Tuple, Union

MAX_DEPTH = 8  # includes within includes, at most: deeper is a loop, or not a layout worth reading
_PAIR = re.compile(r'\s*([A-Za-z0-9_.]+)\s*[-*+/]?=\s*(?:"([^"]*)"|(\S+))(?:\s|$)')
_ESCAPE = re.compile(r"\\(.)")


class SlurmConf(NamedTuple):
    """The settings in the order slurmctld reads them, keys in lower case; or why not (``unreadable``)."""

    settings: Tuple[Tuple[str, str], ...] = ()
    unreadable: Optional[str] = None

    def last(self, key: str) -> Optional[str]:
        """The value of ``key`` as slurmctld keeps it: its last setting (None: never set)."""
        key = key.lower()
        return next((v for k, v in reversed(self.settings) if k == key), None)

    def every(self, key: str) -> List[str]:
        """Each value of ``key``, in order (a key set once per line, such as ``SlurmctldHost``)."""
        key = key.lower()
        return [v for k, v in self.settings if k == key]


class Unreadable(NamedTuple):
    """What ``read``'s ``include`` returns for a file it could not read: why."""

    why: str


def logical_lines(text: str) -> List[str]:
    """The lines as slurmctld reads them: continued lines joined, comments cut, escapes undone."""
    out: List[str] = []
    pending = ""
    for raw in text.splitlines():
        line = pending + raw
        pending = ""
        stripped = line.rstrip()
        backslashes = len(stripped) - len(stripped.rstrip("\\"))
        if backslashes % 2 == 1:
            pending = stripped[:-1]
            continue
        out.append(_ESCAPE.sub(r"\1", _uncommented(line)))
    if pending:
        out.append(_ESCAPE.sub(r"\1", _uncommented(pending)))
    return out


def _uncommented(line: str) -> str:
    slashes = 0
    for i, ch in enumerate(line):
        if ch == "#" and slashes % 2 == 0:
            return line[:i]
        slashes = slashes + 1 if ch == "\\" else 0
    return line


def read(text: str, include: Callable[[str], Union[str, Unreadable]], *, depth: int = 0,
         so_far: Tuple[Tuple[str, str], ...] = ()) -> SlurmConf:
    """The settings of slurm.conf's ``text``, each ``Include`` read by ``include`` (the name, ``%c`` expanded:
    its text, or ``Unreadable``); ``so_far``: the settings read before this text."""
    settings = list(so_far)
    for line in logical_lines(text):
        if line[:7].lower() == "include" and line[7:8].isspace() and line[7:].strip():
            name = line[7:].split()[0]
            if "%c" in name:
                cluster = SlurmConf(tuple(settings)).last("ClusterName")
                if cluster is None:
                    return SlurmConf(unreadable=f"Include {name}: %c with no ClusterName before it")
                name = name.replace("%c", cluster.lower())
            if "*" in name:
                continue  # slurmctld skips a glob, saying so in its log
            if depth >= MAX_DEPTH:
                return SlurmConf(unreadable=f"Include {name}: includes nested deeper than {MAX_DEPTH}")
            inner = include(name)
            if isinstance(inner, Unreadable):
                return SlurmConf(unreadable=f"Include {name}: {inner.why}")
            found = read(inner, include, depth=depth + 1, so_far=tuple(settings))
            if found.unreadable is not None:
                return found
            settings = list(found.settings)
            continue
        at = 0
        while True:
            match = _PAIR.match(line, at)
            if match is None:
                break
            settings.append((match.group(1).lower(), match.group(2) if match.group(2) is not None else match.group(3)))
            at = match.end()
    return SlurmConf(tuple(settings))
