"""Which scontrol and squeue to run: the configured path (read by ``run.config.configure``, never here),
PATH, or Debian's (docs/contract.md §10).  Each is resolved once to an absolute path and then fixed,
so a later change of PATH cannot swap the program under a running operation."""

from __future__ import annotations

import os
from typing import Optional

from ..core.plain import not_empty, plain_str
from ..core.script import check_scontrol_path

DEFAULT_SCONTROL = "/usr/bin/scontrol"
DEFAULT_SQUEUE = "/usr/bin/squeue"


def _on_path(name: str) -> Optional[str]:
    """The first executable ``name`` on $PATH, as ``shutil.which`` finds it; written out, as importing
    shutil cost every command line about 3 ms."""
    search = os.environ.get("PATH")
    if search is None:
        search = os.defpath
    if not search:
        return None
    for folder in search.split(os.pathsep):
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


def find_scontrol(configured: Optional[str] = None) -> str:
    """The absolute scontrol path: the configured one, else the first on PATH, else /usr/bin/scontrol."""
    if configured is not None:
        # A str subclass's methods never run; an empty path is refused, never taken as none given.
        configured = not_empty(plain_str(os.fspath(configured), "scontrol path"), "the scontrol path")
    path = configured or _on_path("scontrol") or DEFAULT_SCONTROL
    return check_scontrol_path(os.path.abspath(path))


def where_looked(name: str, configured: Optional[str], found: str) -> str:
    """How ``found`` was chosen, for doctor: as configured, the first ``name`` on PATH, or the default."""
    if configured:
        return "as configured"
    search = os.environ.get("PATH", os.defpath)
    first = _on_path(name)
    if first is not None and found == os.path.abspath(first):
        return f"the first {name} on PATH={search}"
    return f"the default: no {name} on PATH={search}"


def find_squeue(configured: Optional[str] = None, scontrol: Optional[str] = None) -> str:
    """The absolute squeue path: the configured one, else beside the scontrol in use, else on PATH, else
    /usr/bin/squeue."""
    path = None if configured is None else not_empty(plain_str(os.fspath(configured), "squeue path"), "the squeue path")
    if not path and scontrol:
        sibling = os.path.join(os.path.dirname(find_scontrol(scontrol)), "squeue")
        path = sibling if os.access(sibling, os.X_OK) else None
    path = path or _on_path("squeue") or DEFAULT_SQUEUE
    return check_scontrol_path(os.path.abspath(path))
