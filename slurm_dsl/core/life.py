"""An operation's life as data: ``TRANSITIONS`` and ``RULES`` (docs/contract.md §9.6 is ``markdown()``'s text)."""

from __future__ import annotations

import enum
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Tuple

from .model import Result, Verdict


class Stage(str, enum.Enum):
    """Where an operation is, read from its history row, its settlement and the sweep's mark."""

    BEGUN = "begun"  # intent committed under the job's lease: its calls may be on their way
    UNCHANGED = "unchanged"  # finished rejected, not_found, expired or not_run: nothing happened
    UNKNOWN = "unknown"  # finished unknown: it may have happened
    ACKNOWLEDGED = "acknowledged"  # finished ok or bit_set: slurmctld replied, a crash may still lose it
    SAVED = "saved"  # acknowledged, and a sweep found it present after saves that prove it (or undecidable)
    SETTLED = "settled"  # a verdict is recorded: final

    def __str__(self) -> str:
        return self.value


ACKNOWLEDGED_RESULTS: FrozenSet[Result] = frozenset({Result.OK, Result.BIT_SET})
_STAGE_OF_RESULT: Dict[Result, Stage] = {
    Result.OK: Stage.ACKNOWLEDGED,
    Result.BIT_SET: Stage.ACKNOWLEDGED,
    Result.UNKNOWN: Stage.UNKNOWN,
    Result.REJECTED: Stage.UNCHANGED,
    Result.NOT_FOUND: Stage.UNCHANGED,
    Result.EXPIRED: Stage.UNCHANGED,
    Result.NOT_RUN: Stage.UNCHANGED,
}


def stage(result: Optional[Result], *, settled: bool = False, saved: bool = False) -> Stage:
    """The stage of a history row (``result`` None: unfinished; ``saved``: the sweep's mark is past it)."""
    if settled:
        return Stage.SETTLED
    if result is None:
        return Stage.BEGUN
    found = _STAGE_OF_RESULT[Result(result)]
    return Stage.SAVED if saved and found is Stage.ACKNOWLEDGED else found


class Event(NamedTuple):
    """What moves an operation: ``kind`` begin, finish (``value`` a result), verdict (a verdict) or saved."""

    kind: str
    value: str = ""

    def __str__(self) -> str:
        return f"{self.kind} {self.value}".strip()


class Rule(NamedTuple):
    """One rule: what it decides, in one line, the clock its decision reads, and where it lives."""

    says: str
    clock: str
    where: str
    section: str


# The clocks a decision may read; "none" decides from values and the order one observer saw them in.
NONE, LEDGER, BOOT, MONO = "none", "ledger's (one clock)", "boot (one host, one boot)", "monotonic (one process)"

RULES: Dict[str, Rule] = {
    "L1": Rule("intent first: a requeue's object is may_be_set, committed, before its script starts", NONE,
               "core.ledger_rules.intent", "§9.2"),
    "L2": Rule("the bit after: the object holds next_bit of the bit before the operation", NONE,
               "core.ledger_rules.after", "§9.2"),
    "L3": Rule("a failed lookup is retried after a back-off doubling to a cap", LEDGER,
               "core.ledger_rules.backoff", "§9.5"),
    "L4": Rule("prune removes only old finished rows of clear unleased objects, never the newest", LEDGER,
               "core.ledger_rules.may_prune", "§9.1"),
    "L5": Rule("a merge keeps the less clear of two objects", NONE, "core.ledger_rules.less_clear", "§9.1.2"),
    "L6": Rule("the sweep holding the lock reclaims dead sweeps' leases, never an operation's", NONE,
               "core.ledger_rules.sweep_owned", "§9.5"),
    "L7": Rule("a late finish never makes the object's bit clearer", NONE, "core.ledger_rules.after", "§9.2"),
    "L8": Rule("a clear by a call keeps the object may_be_set, watched until the clear is saved", NONE,
               "core.ledger_rules.after", "§13.3"),
    "D1": Rule("a save is a new job_state file: seen files compared for equality only", NONE,
               "core.durable.Look", "§13.2"),
    "D2": Rule("saved needs two replacements after a look, seen by one observer in order", NONE,
               "core.durable.looks_needed", "§13.2"),
    "D3": Rule("a change is saved once D2 holds and a lookup after those looks still shows it", NONE,
               "run.settling.reread", "§13.2"),
    "D4": Rule("acknowledged operations are read again until saved or settled; the sweep keeps its mark", LEDGER,
               "core.durable.next_acknowledged_from", "§13.4"),
    "D5": Rule("a hand-back may happen unless slurm.conf names one controller", NONE,
               "core.durable.may_hand_back", "§13.6"),
    "D6": Rule("no request is held back once a heartbeat after the end is seen and no controller before it listens",
               NONE, "core.durable.may_be_held", "§13.6"),
    "D7": Rule("the heartbeat's writer must be in control longer than a request could wait", BOOT,
               "core.durable.may_be_held", "§13.6"),
    "D8": Rule("gone clears an object or settles gone only once the purge is saved (D2 from the first gone)", NONE,
               "run.settling.confirm_gone", "§13.8"),
    "S1": Rule("a lookup that could not ask decides nothing", NONE, "core.settle.verdict", "§12"),
    "S2": Rule("a job slurmctld no longer knows is gone, whatever the op", NONE, "core.settle.verdict", "§12"),
    "S3": Rule("each op's effect is read from its fields of the record (one; a requeue into hold's two)", NONE,
               "core.settle.verdict", "§12"),
    "S4": Rule("a requeue without a baseline, or with RestartCnt below it or over it by more than one, is undecidable;"
               " so is a requeue into hold one up but not held", NONE, "core.settle.verdict", "§12"),
    "S5": Rule("present may be read from any lookup", NONE, "core.settle.verdict", "§12"),
    "S6": Rule("absent only from a lookup at least the settle delay after the operation's end", BOOT,
               "core.settle.verdict", "§12"),
    "S7": Rule("the settle delay is finite and at least 2 s (default 10 s)", NONE, "core.settle.verdict", "§12"),
    "S8": Rule("a settled unknown row exits by its effect; others by their result", NONE,
               "core.settle.exits_as", "§12"),
    "S9": Rule("the end: finished_at, else ends_by, else started_at plus the longest run", LEDGER,
               "core.settle.operation_end", "§12"),
    "S10": Rule("after a later operation on the same field, only that one's baseline speaks for this one", BOOT,
                "core.settle.settle_operation", "§12"),
    "S11": Rule("only an unknown, unfinished or acknowledged operation is settled", NONE,
                "core.settle.settle_operation", "§12"),
    "S12": Rule("an acknowledged operation read absent or gone is recorded acknowledged, then lost", NONE,
                "core.settle.settle_operation", "§13.4"),
    "S13": Rule("a call that may have been sent during a hand-back waits CONTROL_TIMEOUT more", NONE,
                "core.settle.delay_of", "§13.6"),
    "S14": Rule("no absent while a controller may hold a request back (D6, D7)", NONE,
                "core.settle.settle_operation", "§13.6"),
    "S15": Rule("the time since the end: one boot clock's, else the least of the ledger's and this host's", BOOT,
                "core.settle.settle_operation", "§13.7"),
    "S16": Rule("a requeue at its baseline's RestartCnt is absent only if no restart or takeover may have undone"
                " the baseline: the controller that gave it acknowledged the calls, or answered the record", NONE,
                "core.settle.stands", "§12"),
    "R1": Rule("an unfinished operation whose run is known alive is still running: nobody settles it", BOOT,
               "run.settling.still_running", "§13.7"),
}


class Transition(NamedTuple):
    """One way an operation moves: from a stage, on an event, to a stage, under rules."""

    before: Optional[Stage]  # None: no row yet
    event: Event
    after: Stage
    rules: Tuple[str, ...]
    by: str  # who makes it happen


_FINISH = {r: Event("finish", r.value) for r in Result}
_VERDICT = {v: Event("verdict", v.value) for v in Verdict}
LOST_VERDICTS = (Verdict.ABSENT, Verdict.GONE)  # S12: the only verdicts recorded on an acknowledged operation

TRANSITIONS: Tuple[Transition, ...] = (
    Transition(None, Event("begin"), Stage.BEGUN, ("L1",), "the operation, under its job's lease"),
    *(Transition(Stage.BEGUN, _FINISH[r], s, ("L2", "L7", "L8"), "the operation") for r, s in _STAGE_OF_RESULT.items()),
    *(Transition(Stage.BEGUN, _VERDICT[v], Stage.SETTLED, ("R1", "S1", "S2", "S3", "S4", "S5", "S6", "S9", "S10",
                                                            "S13", "S14", "S15", "S16", "D8"),
                 "a sweep, settle or keyed run") for v in Verdict),
    *(Transition(Stage.UNKNOWN, _VERDICT[v], Stage.SETTLED, ("S1", "S2", "S3", "S4", "S5", "S6", "S10", "S13",
                                                              "S14", "S15", "S16", "D8"),
                 "a sweep, settle or keyed run") for v in Verdict),
    *(Transition(Stage.ACKNOWLEDGED, _VERDICT[v], Stage.SETTLED, ("S12", "S6", "S10", "S14", "S15", "S16", "D8"),
                 "a sweep, settle or keyed run: acknowledged, then lost") for v in LOST_VERDICTS),
    Transition(Stage.ACKNOWLEDGED, Event("saved"), Stage.SAVED, ("D2", "D3", "D4"), "a sweep"),
    # Saved is not for ever: another admin, or a later loss of slurmctld's state, can still undo it.
    *(Transition(Stage.SAVED, _VERDICT[v], Stage.SETTLED, ("S12", "S6", "S10", "S14", "S15", "S16", "D8"),
                 "settle given its job, or a keyed run: acknowledged, then lost") for v in LOST_VERDICTS),
    # A late finish (L7): a run whose row was settled while it was frozen records its result beside the verdict.
    *(Transition(Stage.SETTLED, _FINISH[r], Stage.SETTLED, ("L7",), "the operation, late") for r in Result),
)

_STEPS: Dict[Tuple[Optional[Stage], Event], Stage] = {(t.before, t.event): t.after for t in TRANSITIONS}


def step(before: Optional[Stage], event: Event) -> Optional[Stage]:
    """The stage ``event`` moves an operation at ``before`` to; None: the table has no such step."""
    return _STEPS.get((before, event))


def verdict_allowed(result: Optional[Result], verdict: Verdict) -> bool:
    """Whether a verdict may be recorded on an unsettled operation whose result is ``result``."""
    return step(stage(result), _VERDICT[Verdict(verdict)]) is not None


def _results(*stages: Stage) -> Tuple[Optional[Result], ...]:
    return tuple(r for r in (None, *Result) if stage(r) in stages)


# The results of the stages a verdict may be recorded on (S11), and of those whose calls may have
# changed the job (what a look after them is for, D2).
SETTLEABLE: Tuple[Optional[Result], ...] = tuple(
    r for r in (None, *Result) if any(t.before is stage(r) and t.event.kind == "verdict" for t in TRANSITIONS))
MAY_HAVE_CHANGED: Tuple[Optional[Result], ...] = _results(Stage.ACKNOWLEDGED, Stage.UNKNOWN)


def markdown() -> str:
    """docs/contract.md §9.6: the diagram, the transitions and the rules, as Markdown."""
    seen: Dict[Tuple[Optional[Stage], str, Stage, Tuple[str, ...], str], List[str]] = {}
    for t in TRANSITIONS:  # one line per (from, kind, to, rules): the values of an event folded
        seen.setdefault((t.before, t.event.kind, t.after, t.rules, t.by), []).append(t.event.value)
    folded = [(b, f"{k} {', '.join(v for v in vs if v)}".strip(), a, rules, by)
              for (b, k, a, rules, by), vs in seen.items()]
    lines = ["```mermaid", "stateDiagram-v2"]
    lines += [f"    {b or '[*]'} --> {a}: {event}" for b, event, a, _, _ in folded]
    lines += ["```", "", "| from | event | to | rules | by |", "|---|---|---|---|---|"]
    lines += [f"| {b or '(none)'} | {event} | {a} | {' '.join(rules)} | {by} |" for b, event, a, rules, by in folded]
    lines += ["", "| rule | says | clock | where | contract |", "|---|---|---|---|---|"]
    lines += [f"| {k} | {r.says} | {r.clock} | `{r.where}` | {r.section} |" for k, r in RULES.items()]
    return "\n".join(lines) + "\n"
