"""Resolving selectors into job ids before an operation (docs/contract.md §10.3; ``core.select``'s rules).

One squeue listing, arrays looked up again whole; a key's rerun takes its first run's set.  Acts on no job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..core.jobid import JobIds, checked_already
from ..core.model import InvalidInput, LookupFailed, Op, UsageError
from ..core.select import Selection, chosen, missing
from ..host import process
from ..host.binaries import find_scontrol, find_squeue
from ..ledger.base import LedgerStore
from ..lookups.sight import Sight, sight
from ..lookups.squeue import MAX_LISTED, SQUEUE_TIMEOUT, SqueueLookup, _describe_failure
from .deadlines import Clock, wall

_NAMED = {"partition": re.compile(rb"^PartitionName=(\S+)", re.MULTILINE),
          "reservation": re.compile(rb"^ReservationName=(\S+)", re.MULTILINE)}


@dataclass(frozen=True)
class Resolved:
    """The jobs a selection chose, in the listing's order, the arrays left out, and whether the set is a key's."""

    job_ids: JobIds
    arrays_left: Dict[str, int]
    recorded: bool = False
    unseen: Optional[Sight] = None  # the listing's account, which may not see every job (else None)

    def notes(self) -> List[str]:
        """What the selection left out, and an account that may not see every job (§10.3)."""
        found = [f"array {array}: not selected: a call on its JobId reaches its {tasks} tasks, not one (address"
                 " a task by its own JobId)" for array, tasks in self.arrays_left.items()]
        if self.unseen is not None:
            found.append(self.unseen.selection_note())
        return found


def resolve(
    selection: Selection, given: Optional[JobIds], op: Op, deadline: float, *, squeue: Optional[str],
    scontrol: Optional[str], clock: Clock, ledger: Optional[LedgerStore] = None, key: Optional[str] = None,
    actor: Optional[str] = None,
) -> Resolved:
    """The jobs ``selection`` (AND ``given`` ids, if any) chooses for ``op`` by ``deadline``;
    ``InvalidInput`` for a selector Slurm does not know, ``LookupFailed`` if it could not ask."""
    scontrol = find_scontrol(scontrol)
    text = selection.text()
    if key is not None and ledger is not None:
        kept = ledger.selection(key, op)
        if kept is not None:
            return Resolved(checked_already(_same(kept, text, key)), {}, recorded=True)
    for what, names in (("partition", selection.partitions()), ("reservation", selection.reservations())):
        if names:
            absent = missing(names, _known(what, scontrol, _left(deadline, clock)))
            if absent is not None:
                raise InvalidInput(f"--{what}: no {what} {absent!r} in slurmctld (scontrol show {what})")
    program = find_squeue(squeue, scontrol)
    lookup = SqueueLookup(program, timeout=min(SQUEUE_TIMEOUT, _left(deadline, clock)), many=MAX_LISTED)
    listed = lookup.select(selection.filters(), given or ())
    # An account that may not see every job lists only those it can (PrivateData=jobs): said, not refused.
    seen = sight(scontrol, timeout=max(deadline - clock(), 0.0))
    unseen = None if seen.every_job or seen.hides_jobs is False else seen
    picked = chosen(selection, listed)
    arrays_left = dict(picked.arrays_left)
    own = [j for j in picked.job_ids if listed[j].array_job_id == j]
    if own:  # an array's own JobId: is it the array's last task, or does it reach others unlisted?
        lookup.timeout = min(SQUEUE_TIMEOUT, _left(deadline, clock))
        whole = {j: i.array_tasks for j, i in lookup.jobs(own).items() if i is not None and i.whole_array}
        arrays_left.update(whole)
    ids = [j for j in picked.job_ids if j not in arrays_left]
    if key is not None and ledger is not None:
        recorded_text, ids = ledger.select_once(key, op, text, ids, wall(), actor)
        _same((recorded_text, ids), text, key)  # a run of the same key that got there first
    return Resolved(checked_already(ids), arrays_left, unseen=unseen)


def _same(kept: Tuple[str, List[str]], text: str, key: str) -> List[str]:
    if kept[0] != text:
        raise UsageError(f"key {key!r} chose its jobs by {kept[0]} at its first run: give the same selectors"
                         " to act on that set again (or a new key)")
    return kept[1]


def _left(deadline: float, clock: Clock) -> float:
    left = deadline - clock()
    if left <= 0:
        raise LookupFailed("the deadline passed before the selectors could be resolved: nothing ran")
    return left


def _known(what: str, scontrol: str, timeout: float) -> List[str]:
    """The names ``scontrol show partition|reservation -o`` lists (one RPC)."""
    done = process.run_argv((scontrol, "-o", "show", what), timeout=min(timeout, SQUEUE_TIMEOUT), cap=16 << 20)
    if done.timed_out or done.truncated or done.pipes_held or done.returncode != 0:
        raise LookupFailed(_describe_failure(done, "scontrol"))
    return [m.decode("utf-8", "backslashreplace") for m in _NAMED[what].findall(done.stdout)]
