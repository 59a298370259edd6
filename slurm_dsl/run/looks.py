"""Looking at slurmctld's saves (docs/contract.md §13.2), read by ``core.durable`` Rule 2; looks are compared
only within one observer (this host, this boot, one StateSaveLocation), in the order the ledger took them."""

from __future__ import annotations

import hashlib
import logging
import os
from typing import Callable, Dict, NamedTuple, Optional

from ..core.durable import Look, looks_needed
from ..host import world
from ..host.files import FILE_TIMEOUT
from ..host.runs import boot_id, this_run
from ..ledger.base import LedgerStore, Looks
from ..lookups import saves
from .deadlines import steady

log = logging.getLogger("slurm_dsl")

POLL = 0.2  # seconds between two looks of a wait for a save
# Seconds a wait sees no save before it takes slurmctld for idle: its save window (SAVE_MAX_WAIT,
# 5 s: a change is saved within it) and a second.
IDLE_AFTER = 6.0


def observer(location: str) -> str:
    """Who looks: this host in this boot at ``location`` (its name, a digest of the path)."""
    where = hashlib.sha256(os.fsencode(location)).hexdigest()[:12]
    here = this_run()
    return f"{here.host}:{boot_id()}:{where}"


class Place(NamedTuple):
    """Where a process looks: its observer and the StateSaveLocation (None: unknown, ``why`` says why)."""

    observer: str
    location: Optional[str]
    why: str = ""


def place(location: Optional[str] = None) -> Place:
    """Where this process looks (``location``, else slurm.conf's StateSaveLocation)."""
    where = location or saves.state_save_location()
    if where is None:
        return Place("", None, "where slurmctld saves its state cannot be told (slurm.conf cannot be read whole)")
    return Place(observer(where), where)


def seen(at: Place, timeout: float = FILE_TIMEOUT) -> saves.Seen:
    """What a look at ``at``'s job_state sees now (``lookups.saves.look_at_save``)."""
    if at.location is None:
        return saves.Seen(None, "job_state", at.why)
    return saves.look_at_save(at.location, timeout)


def look(at: Place, timeout: float = FILE_TIMEOUT) -> Optional[Look]:
    """One look at ``at``'s job_state now (None: nothing could be seen)."""
    found = seen(at, timeout)
    return None if found.identity is None else Look(at.observer, str(found.identity))


class Watch:
    """One process's looks through ``ledger``, each in its write lock; ``keep`` False (a dry run): not kept."""

    def __init__(self, ledger: LedgerStore, at: Optional[Place] = None, timeout: float = FILE_TIMEOUT,
                 *, keep: bool = True) -> None:
        self.ledger = ledger
        self.at = place() if at is None else at
        self.timeout = timeout
        self.keep = keep
        self.looks: Optional[Looks] = None
        self.why: Optional[str] = self.at.why or None
        self.idle = False  # a wait saw no save for a save window: no more waits (``wait``)

    def look(self) -> Looks:
        """Take one look into the ledger; the looks as they stand after it."""
        why: Dict[str, str] = {}

        def taken() -> Optional[str]:
            found = seen(self.at, self.timeout)
            if found.identity is None:
                why["why"] = f"{found.path}: {found.why}"
                return None
            return str(found.identity) if self.keep else None

        self.looks = self.ledger.look_at_saves(self.at.observer or "unknown", taken)
        self.why = why.get("why")
        return self.looks

    def own(self) -> Optional[str]:
        """A look taken now, not kept in the ledger: the one an anchor made now keeps as its own."""
        seen = look(self.at, self.timeout) if self.keep else None
        return None if seen is None else str(seen)

    def needed(self, mark: Optional[int], own: Optional[str]) -> int:
        """``core.durable.looks_needed`` of an anchor from this watch's last look (3 before any)."""
        chain = () if self.looks is None else self.looks.chain
        return looks_needed(mark, Look.parse(own), self.at.observer, chain)

    def saved(self, mark: Optional[int], own: Optional[str]) -> bool:
        """Whether what was acknowledged before the anchor is known saved by the looks so far (Rule 2)."""
        return self.looks is not None and self.needed(mark, own) == 0

    def wait(self, done: Callable[[], bool], seconds: float, clock: Callable[[], float] = steady) -> None:
        """Look every ``POLL`` s, up to ``seconds``, until ``done()``; no save in ``IDLE_AFTER``: idle, wait no more."""
        start = clock()
        until, idle_at = start + seconds, start + IDLE_AFTER
        first = None if self.looks is None else self.looks.seen
        while not self.idle and not done() and self.why is None and clock() + POLL <= until:
            world.sleep(POLL)
            now = look(self.at, self.timeout)
            if now is None or self.looks is None or self.looks.seen != now.seen:
                self.look()
            if clock() >= idle_at and (self.looks is None or self.looks.seen == first):
                self.idle = True
