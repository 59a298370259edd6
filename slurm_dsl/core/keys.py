"""Idempotency keys and retries: what a keyed command does with a job, from the earlier operations of
the same op and key (docs/contract.md §12, "Idempotency keys, the rules": done, wait, stop, act).
Pure: the caller reads the ledger, settles and keeps the clock.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from .model import CallOutcome, InvalidInput, Op, Result, Verdict
from .plain import described

MAX_KEY = 128
_KEY = re.compile(rf"[A-Za-z0-9._:@/+=-]{{1,{MAX_KEY}}}")


def check_key(key: object) -> str:
    """``key`` as a plain ``str``, or ``InvalidInput`` saying what a key may be."""
    if isinstance(key, str) and _KEY.fullmatch(key) and key.isascii():
        return str.__str__(key)
    raise InvalidInput(
        f"a key is 1-{MAX_KEY} letters, digits and . _ : @ / + = -, not {described(key)}"
    )


MAX_REASON = 1024  # characters of ``--reason`` (the ledger's column holds this many)


def check_reason(reason: object) -> str:
    """``--reason`` (docs/contract.md §10.4): 1 to ``MAX_REASON`` characters, no control character; else
    ``InvalidInput``."""
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput(f"a reason is some text (1-{MAX_REASON} characters), not {described(reason)}")
    if len(reason) > MAX_REASON:
        raise InvalidInput(f"a reason is at most {MAX_REASON} characters, not {len(reason)}")
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in reason):
        raise InvalidInput("a reason may not hold control characters (a newline, a tab, an escape)")
    return str.__str__(reason)


def took_effect(op: Op, result: Optional[Result], calls: Sequence[CallOutcome]) -> Optional[bool]:
    """What an operation's own calls say of its effect: True, False, or None (``unknown``, or ``result``
    None: unfinished).  ``calls[1]`` is call 2: a requeue's ``bit_set`` happened exactly when it succeeded."""
    op = Op(op)
    if result is None or result is Result.UNKNOWN:
        return None
    if result is Result.OK:
        return True
    if result is Result.BIT_SET:
        if not op.requeues:
            raise InvalidInput(f"bit_set is a requeue's result, not a {op.value}'s")
        return len(calls) > 1 and calls[1] is CallOutcome.SUCCESS
    return False


@dataclass(frozen=True)
class Earlier:
    """One earlier operation of the same op and key on the job, as ``decide`` reads it."""

    op_id: int
    result: Optional[Result]  # None: unfinished
    took_effect: Optional[bool]  # ``took_effect`` of its calls
    verdict: Optional[Verdict]  # its settlement (docs/contract.md §12), None if it has none yet
    running: bool  # unfinished and its lease not lapsed: it may still act


class Step(str, enum.Enum):
    """What a keyed command does with one job."""

    ACT = "act"
    DONE = "done"
    WAIT = "wait"
    STOP = "stop"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Decision:
    step: Step
    because: Optional[int]  # the earlier operation that decided (None for ACT)
    detail: str


def decide(op: Op, earlier: Sequence[Earlier]) -> Decision:
    """The rules of docs/contract.md §12 (done, wait, stop, act) over ``earlier``, oldest first."""
    op = Op(op)
    rows: Tuple[Earlier, ...] = tuple(_checked(e) for e in earlier)
    for e in rows:
        if e.took_effect is True or e.verdict is Verdict.PRESENT:
            how = "took effect" if e.took_effect is True else "was settled present"
            return Decision(Step.DONE, e.op_id, f"operation {e.op_id} with this key {how}: not run again")
    for e in rows:
        if e.running:
            return Decision(Step.WAIT, e.op_id, f"operation {e.op_id} with this key may still be running")
        if e.took_effect is None and e.verdict is None:
            return Decision(Step.WAIT, e.op_id, f"operation {e.op_id} with this key is not settled yet")
    if op.requeues:
        for e in rows:
            if e.took_effect is None and e.verdict in (Verdict.UNDECIDABLE, Verdict.GONE):
                return Decision(
                    Step.STOP, e.op_id,
                    f"requeue {e.op_id} with this key may have happened (settled {e.verdict.value}):"
                    " never requeued twice",
                )
    return Decision(Step.ACT, None, "")


def _checked(e: object) -> Earlier:
    if not isinstance(e, Earlier):
        raise InvalidInput(f"earlier operations must be Earlier values, not {described(e)}")
    if e.result is not None and not isinstance(e.result, Result):
        raise InvalidInput(f"an earlier operation's result must be a Result or None, not {described(e.result)}")
    if e.verdict is not None and not isinstance(e.verdict, Verdict):
        raise InvalidInput(f"an earlier operation's verdict must be a Verdict or None, not {described(e.verdict)}")
    if e.running and e.result is not None:
        raise InvalidInput(f"operation {e.op_id} has a result, so it is not running")
    if e.took_effect is not None and e.result in (None, Result.UNKNOWN):
        raise InvalidInput(f"operation {e.op_id}'s calls cannot say it took effect: its result is {e.result}")
    return e
