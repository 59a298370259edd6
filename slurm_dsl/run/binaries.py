"""Which scontrol and squeue to run: an explicit path, the environment, PATH, or Debian's.

Each is resolved once to an absolute path and then fixed, so a later change of PATH
cannot swap the program under a running operation.
"""

from __future__ import annotations

import os
from typing import Optional

from ..core.plain import plain_str
from ..core.script import check_scontrol_path

DEFAULT_SCONTROL = "/usr/bin/scontrol"
DEFAULT_SQUEUE = "/usr/bin/squeue"


def _on_path(name: str) -> Optional[str]:
    """The first executable file ``name`` on $PATH, as ``shutil.which`` finds it (an empty entry
    is the current directory; no PATH at all is ``os.defpath``).  Written out: importing shutil
    (and with it bz2, lzma, fnmatch) cost every run of the command line about 3 ms."""
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


def find_scontrol(explicit: Optional[str] = None) -> str:
    """The absolute scontrol path: explicit, else $SLURM_DSL_SCONTROL, else the
    first on the caller's PATH, else /usr/bin/scontrol.  Resolved once, then fixed."""
    if explicit is not None:
        explicit = plain_str(os.fspath(explicit), "scontrol path")  # a str subclass's methods never run
    path = explicit or os.environ.get("SLURM_DSL_SCONTROL") or _on_path("scontrol") or DEFAULT_SCONTROL
    return check_scontrol_path(os.path.abspath(path))


def find_squeue(explicit: Optional[str] = None, scontrol: Optional[str] = None) -> str:
    """The absolute squeue path: explicit, else $SLURM_DSL_SQUEUE, else the squeue beside the
    scontrol in use (one Slurm install), else the first on the caller's PATH, else /usr/bin/squeue."""
    path = explicit or os.environ.get("SLURM_DSL_SQUEUE")
    if not path and scontrol:
        sibling = os.path.join(os.path.dirname(find_scontrol(scontrol)), "squeue")
        path = sibling if os.access(sibling, os.X_OK) else None
    path = path or _on_path("squeue") or DEFAULT_SQUEUE
    return check_scontrol_path(os.path.abspath(path))
