"""Selectors: the jobs ``--node``, ``--partition``, ... mean (docs/contract.md §10.3); sans-IO.
Rule 1: each value is checked where it comes in.  Rule 2: AND-ed, resolved by one squeue listing
(``filters``, ``picks``).  Rule 3: an array's own JobId reaching other tasks is never selected
(``chosen``).  Rule 4: with ``--key``, the set the key's first run chose is every rerun's.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from .jobinfo import JobInfo
from .model import InvalidInput

MAX_VALUE = 1024  # characters of one selector's value

# squeue's job states (its -t, 22.05's own list) and their short forms; ``all`` is squeue's too.
STATES: Mapping[str, str] = {
    "PD": "PENDING", "R": "RUNNING", "S": "SUSPENDED", "CD": "COMPLETED", "CA": "CANCELLED",
    "F": "FAILED", "TO": "TIMEOUT", "NF": "NODE_FAIL", "PR": "PREEMPTED", "BF": "BOOT_FAIL",
    "DL": "DEADLINE", "OOM": "OUT_OF_MEMORY", "CG": "COMPLETING", "CF": "CONFIGURING",
    "RS": "RESIZING", "RD": "RESV_DEL_HOLD", "RQ": "REQUEUED", "RF": "REQUEUE_FED",
    "RH": "REQUEUE_HOLD", "RV": "REVOKED", "SI": "SIGNALING", "SE": "SPECIAL_EXIT",
    "SO": "STAGE_OUT", "ST": "STOPPED",
}
_NAMES = frozenset(STATES.values()) | {"ALL"}


def check_value(text: str, what: str = "a selector") -> str:
    """A selector's value: 1 to ``MAX_VALUE`` characters, no control character, not an option."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"{what} takes a value: an empty one selects nothing anyone means")
    if len(text) > MAX_VALUE:
        raise InvalidInput(f"{what}: at most {MAX_VALUE} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InvalidInput(f"{what}: control characters are refused")
    if text.startswith("-"):
        raise InvalidInput(f"{what}: a value may not start with '-' ({text[:40]!r})")
    return str(text)


def check_states(text: str) -> str:
    """``--state``'s comma list as squeue's names (short forms, any case), or ``InvalidInput``."""
    names: List[str] = []
    for word in check_value(text, "--state").split(","):
        name = STATES.get(word.strip().upper(), word.strip().upper())
        if name not in _NAMES:
            raise InvalidInput(
                f"--state: unknown job state {word.strip()[:40]!r} (one of {', '.join(sorted(_NAMES))},"
                " or their short forms such as PD and R)"
            )
        names.append(name)
    return ",".join(dict.fromkeys(names))


@dataclass(frozen=True)
class Selection:
    """The selectors given (each checked: ``check_value``, ``check_states``); "" when not given."""

    node: str = ""
    partition: str = ""
    user: str = ""
    account: str = ""
    state: str = ""
    name: str = ""
    reservation: str = ""
    pending_reason: str = ""

    @classmethod
    def of(cls, given: Mapping[str, str]) -> Selection:
        """The selectors a library caller names, each checked (Rule 1); ``InvalidInput`` if bad or none."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise InvalidInput(f"unknown selector {unknown[0][:40]!r} (one of {', '.join(names)})")
        if not given:
            raise InvalidInput("select= names no selector: give at least one, or job ids alone")
        checked = {name: check_states(text) if name == "state" else check_value(text, "--" + name.replace("_", "-"))
                   for name, text in given.items()}
        return cls(**checked)

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def text(self) -> str:
        """The selectors as a command line gives them, in one order: what a key's set records."""
        return " ".join(f"--{f.name.replace('_', '-')} {getattr(self, f.name)!r}" for f in fields(self)
                        if getattr(self, f.name))

    def filters(self) -> Tuple[str, ...]:
        """squeue's options for them (Rule 2); ``--pending-reason`` has none (``picks``)."""
        flags = (("-w", self.node), ("-p", self.partition), ("-u", self.user), ("-A", self.account),
                 ("-t", self.state), ("-n", self.name), ("-R", self.reservation))
        return tuple(part for flag, value in flags if value for part in (flag, value))

    def picks(self, info: JobInfo) -> bool:
        """Whether a listed record is selected by ``--pending-reason`` (squeue's Reason, any case)."""
        return not self.pending_reason or info.reason.casefold() == self.pending_reason.casefold()

    def partitions(self) -> List[str]:
        return [p for p in self.partition.split(",") if p]

    def reservations(self) -> List[str]:
        return [r for r in self.reservation.split(",") if r]


@dataclass(frozen=True)
class Chosen:
    """The JobIds chosen, in the listing's order; each array left out (Rule 3) with its tasks' count."""

    job_ids: Tuple[str, ...]
    arrays_left: Dict[str, int]


def chosen(selection: Selection, listed: Mapping[str, JobInfo]) -> Chosen:
    """Rules 2 and 3 on a listing."""
    ids: List[str] = []
    left: Dict[str, int] = {}
    for job_id, info in listed.items():
        if not selection.picks(info):
            continue
        if info.whole_array:
            left[job_id] = info.array_tasks
            continue
        ids.append(job_id)
    return Chosen(tuple(ids), left)


def missing(asked: Iterable[str], known: Iterable[str]) -> Optional[str]:
    """The first of ``asked`` that is not ``known`` (a partition or reservation Slurm lacks), or None."""
    have = set(known)
    return next((name for name in asked if name not in have), None)
