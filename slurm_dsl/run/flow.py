"""An operation command's one flow, for ``admin.commands.ops`` and ``api`` alike (docs/contract.md
§10.0, §10.4, §11-§13.5): the reason audited, the driver or the keyed path, ``--durable``'s confirmation."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Generator, List, Optional, Union

from ..core.jobid import JobIds
from ..core.model import Op, Outcome
from ..core.settle import DEFAULT_SETTLE_DELAY
from .driver import Ran, Stopped, drive
from .tracked import Tracker

if TYPE_CHECKING:
    from .arrays import LookupAnswer


@dataclass(frozen=True)
class Asked:
    """What an operation command asks beyond its op, ids and deadline (its flags)."""

    key: Optional[str] = None
    settle: bool = False
    retry: int = 0
    settle_delay: float = DEFAULT_SETTLE_DELAY  # the configured one, given by both callers
    one_by_one: bool = False
    parallel: int = 1
    durable: bool = False
    reason: Optional[str] = None
    admin_comment: bool = False  # the reason copied to each job's AdminComment after its op (run.comment)

    @property
    def settling(self) -> bool:
        return self.key is not None or self.settle or self.retry > 0


@dataclass(frozen=True)
class Saved:
    """With ``--durable``, a job's row once its save is confirmed (or not), after every ``Ran``."""

    outcome: Outcome


Flow = Generator[Union[Ran, Stopped, Saved], None, None]


def operate(tracker: Tracker, op: Op, ids: JobIds, deadline: float, asked: Asked, *,
            progress: Optional[Callable[[int, int], None]] = None,
            looking: Optional[Callable[[], LookupAnswer]] = None) -> Flow:
    """Run ``op`` on ``ids`` until ``deadline``: ``Ran`` events, a ``Stopped``, and with ``asked.durable``
    each row again as ``Saved``.  What refuses the run is raised here, not at the first event."""
    if asked.settling:
        from .keyed import run_settled

        events = run_settled(tracker, op, ids, deadline, key=asked.key, settle=asked.settle, retry=asked.retry,
                             settle_delay=asked.settle_delay, one_by_one=asked.one_by_one, parallel=asked.parallel)
    else:
        events = drive(tracker, op, ids, deadline, one_by_one=asked.one_by_one, parallel=asked.parallel,
                       progress=progress, looking=looking)
    return _flow(tracker, op, ids, deadline, asked, events)


def _flow(tracker: Tracker, op: Op, ids: JobIds, deadline: float, asked: Asked,
          events: Generator[Union[Ran, Stopped], None, None]) -> Flow:
    kept = tracker.admin_reason  # a caller's Tracker gets its own back
    try:
        if asked.reason is not None:
            tracker.admin_reason = asked.reason
            tracker.audit(op, ids, asked.key)
        held: List[Outcome] = []
        for event in events:
            if asked.admin_comment and asked.reason is not None and isinstance(event, Ran):
                from .comment import write

                said = write(tracker, event.outcome, asked.reason, deadline)
                if said is not None:
                    event = replace(event, outcome=replace(event.outcome, comment=said))
            yield event
            if asked.durable and isinstance(event, Ran):
                held.append(event.outcome)
        if held:
            from .durable import confirm_saved

            yield from (Saved(o) for o in confirm_saved(tracker, held, deadline, asked.key))
    finally:
        events.close()
        tracker.admin_reason = kept

