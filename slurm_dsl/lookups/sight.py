"""Who may read "gone" (docs/contract.md §9.3, "Who may read gone").

A "gone" counts only from an account that sees every job; asked only when an answer says gone, once
per process and account.  Anything that cannot be read counts as "may not see every job"."""

from __future__ import annotations

import os
import re
import threading
from typing import Dict, Mapping, NamedTuple, Optional, Tuple

from ..core.jobinfo import JobInfo
from ..host import process, world

ASK_TIMEOUT = 10.0  # seconds for `scontrol show config` and for sacctmgr
OPERATOR_LEVELS = ("operator", "administrator")  # sacctmgr's AdminLevel words at or above Operator


class Sight(NamedTuple):
    """Whether the account sees every job, who it is, what decided it, and which account to run as instead."""

    every_job: bool
    who: str
    why: str
    run_as: str = ""
    # Whether slurm.conf's PrivateData hides other users' jobs from such an account (None: not read).
    hides_jobs: Optional[bool] = None
    kept: bool = True  # an answer asked to the end (kept for the process), not cut short by a timeout

    def gone_note(self, count: int) -> str:
        """What to say of ``count`` "gone" answers this account may not trust."""
        return (f"{count} job(s) read as gone by {self.who}, which may not see every job ({self.why}): not trusted,"
                f" nothing cleared or settled as gone; run it as {self.run_as}")

    def selection_note(self) -> str:
        """What to say of a selection listed by this account, which may not see every job."""
        private = ("slurm.conf's PrivateData hides other users' jobs" if self.hides_jobs
                   else "slurm.conf's PrivateData could not be read")
        return (f"{self.who} may not see every job ({self.why}; {private}): the selection holds only the jobs"
                f" it can see; run it as {self.run_as} to select them all")


def parse_config(text: str) -> Dict[str, str]:
    """``scontrol show config`` lines ``Key = value`` as a dict."""
    config: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            config[key.strip()] = value.strip()
    return config


def slurm_user(config: Mapping[str, str]) -> Optional[Tuple[str, int]]:
    """slurm.conf's SlurmUser as ``show config`` prints it (``slurm(64030)``): its name and uid."""
    found = re.fullmatch(r"(.*)\(([0-9]+)\)", config.get("SlurmUser", ""))  # ASCII digits, as every number read
    return None if found is None else (found.group(1), int(found.group(2)))


def accounting_on(config: Mapping[str, str]) -> bool:
    """Whether slurmctld has accounting: 22.05 prints ``accounting_storage/none`` without it, 23.11+ ``(null)``."""
    return config.get("AccountingStorageType", "") not in ("", "(null)", "accounting_storage/none")


def operator_level(sacctmgr_output: str) -> bool:
    """Whether ``sacctmgr -n -P show user NAME format=adminlevel`` says Operator or Administrator."""
    lines = [line.strip().lower() for line in sacctmgr_output.splitlines() if line.strip()]
    return len(lines) == 1 and lines[0] in OPERATOR_LEVELS


def _name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "?"


def hides_jobs(config: Mapping[str, str]) -> bool:
    """Whether ``show config``'s PrivateData hides other users' jobs (``jobs``, or ``all``)."""
    words = {w.strip().lower() for w in config.get("PrivateData", "").split(",")}
    return bool(words & {"jobs", "all"})


def _ask(scontrol: str, euid: int, timeout: float) -> Sight:
    who = f"uid {euid} ({_name(euid)})"
    if euid == 0:
        return Sight(True, who, "root")
    until = world.monotonic() + timeout
    done = process.run_argv((scontrol, "show", "config"), timeout=max(min(timeout, ASK_TIMEOUT), 0.0))
    if done.returncode != 0 or done.pipes_held:
        return Sight(False, who, "scontrol show config could not be read", "root or slurm.conf's SlurmUser",
                     kept=not done.timed_out)
    config = parse_config(done.stdout.decode("utf-8", "replace"))
    user = slurm_user(config)
    run_as = "root" if user is None or user[1] == 0 else f"root or {user[0]}"
    hidden = hides_jobs(config)
    if user is not None and user[1] == euid:
        return Sight(True, who, f"slurm.conf's SlurmUser, {user[0]}", hides_jobs=hidden)
    if not accounting_on(config):
        return Sight(False, who, "neither root nor the SlurmUser, and no accounting for an AdminLevel", run_as,
                     hidden)
    sacctmgr = os.path.join(os.path.dirname(scontrol), "sacctmgr")
    asked = process.run_argv((sacctmgr, "-n", "-P", "show", "user", _name(euid), "format=adminlevel"),
                            timeout=max(min(until - world.monotonic(), ASK_TIMEOUT), 0.0))
    if asked.returncode == 0 and not asked.pipes_held and operator_level(asked.stdout.decode("utf-8", "replace")):
        return Sight(True, who, "an operator by its AdminLevel", hides_jobs=hidden)
    return Sight(False, who, "neither root, the SlurmUser nor an operator by AdminLevel", run_as, hidden,
                 kept=not asked.timed_out)


_known: Dict[Tuple[str, int], Sight] = {}
_lock = threading.Lock()


def sight(scontrol: str, euid: Optional[int] = None, timeout: float = ASK_TIMEOUT) -> Sight:
    """Whether the account ``euid`` (default: this process's) sees every job, asked within ``timeout`` seconds.

    Kept once per process for each (scontrol, account), unless the asking was cut short."""
    uid = os.geteuid() if euid is None else euid
    with _lock:
        known = _known.get((scontrol, uid))
        if known is None:
            known = _ask(scontrol, uid, timeout)
            if known.kept:
                _known[(scontrol, uid)] = known
    return known


def trusted(
    answers: Dict[str, Optional[JobInfo]], scontrol: str
) -> Tuple[Dict[str, Optional[JobInfo]], Optional[Sight]]:
    """``answers`` without their "gone" when this process's account may not see every job, and its ``Sight``.

    An id left out is "could not ask" (``core.settle.looked_up``); ``Sight`` is None when nothing was left out."""
    if all(info is not None for info in answers.values()):
        return answers, None
    seen = sight(scontrol)
    if seen.every_job:
        return answers, None
    return {job: info for job, info in answers.items() if info is not None}, seen
