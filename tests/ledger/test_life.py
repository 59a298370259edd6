"""The operation's life table (slurm_dsl/core/life.py) walked through a real ledger, both backends.

Every transition of ``life.TRANSITIONS`` is made with the ledger's own calls from an operation
brought to its ``before`` stage, and the stage read back from the ledger must be its ``after``;
every event the table has no step for is refused by the ledger or changes nothing; the ledger's
reading queries select exactly the stages the table says they serve; docs/contract.md §9.6 is
the table's text.  The stage is read here from the rows (result, settlement, sweep mark), not
with ``life.stage``.
"""

from __future__ import annotations

import importlib
import itertools
from collections import deque
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from slurm_dsl.core import life
from slurm_dsl.core.life import Event, Stage
from slurm_dsl.core.model import LedgerError, Op, Outcome, RequeueBit, Result, Verdict
from slurm_dsl.ledger.base import LedgerStore
from slurm_dsl.ledger.choose import open_ledger
from tests.ledger_ops import begin_operation, finish_operation

NONCE = "0123456789abcdef0123456789abcdef"
ROOT = Path(__file__).resolve().parents[2]
_jobs = itertools.count(7000)

# The events the ledger can be sent, each a call of its own.
EVENTS: Tuple[Event, ...] = (
    Event("begin"),
    *(Event("finish", r.value) for r in Result),
    *(Event("verdict", v.value) for v in Verdict),
    Event("saved"),
)
BIT = {Result.BIT_SET: RequeueBit.SET, Result.UNKNOWN: RequeueBit.MAY_BE_SET}


def read_stage(ledger: LedgerStore, job: str, op_id: int) -> Optional[Stage]:
    """The stage as the contract words it, from what the ledger holds (None: no row)."""
    entry = next((e for e in ledger.history(job) if e.id == op_id), None)
    if entry is None:
        return None
    if entry.settlement is not None:
        return Stage.SETTLED
    if entry.result is None:
        return Stage.BEGUN
    if entry.result is Result.UNKNOWN:
        return Stage.UNKNOWN
    if entry.result in (Result.OK, Result.BIT_SET):
        last = ledger.last_sweep()
        mark = 1 if last is None else int(last.summary.get("acknowledged_from", 1))
        return Stage.SAVED if op_id < mark else Stage.ACKNOWLEDGED
    return Stage.UNCHANGED


class Walked:
    """One requeue on a job of its own, moved by the ledger's calls."""

    def __init__(self, ledger: LedgerStore) -> None:
        self.ledger, self.job, self.op_id = ledger, str(next(_jobs)), 0
        self.now = 100.0

    def send(self, event: Event) -> None:
        self.now += 1.0
        if event.kind == "begin":
            self.op_id = begin_operation(self.ledger, self.job, Op.REQUEUE, NONCE, self.now, ends_by=self.now + 30)
        elif event.kind == "finish":
            result = Result(event.value)
            outcome = Outcome(Op.REQUEUE, self.job, result, BIT.get(result, RequeueBit.CLEAR))
            finish_operation(self.ledger, self.op_id, outcome, b"", self.now)
        elif event.kind == "verdict":
            self.ledger.add_settlements([(self.op_id, Verdict(event.value), self.now, None, "walked")], self.now,
                                        by="test")
        else:  # saved: a sweep whose mark is past the operation
            self.ledger.record_sweep(self.now, self.now, {"acknowledged_from": self.op_id + 1})

    def stage(self) -> Optional[Stage]:
        return read_stage(self.ledger, self.job, self.op_id) if self.op_id else None


def paths() -> Dict[Optional[Stage], List[Event]]:
    """A shortest list of events from no row to each stage the table reaches."""
    found: Dict[Optional[Stage], List[Event]] = {None: []}
    todo: deque[Optional[Stage]] = deque([None])
    while todo:
        at = todo.popleft()
        for t in life.TRANSITIONS:
            if t.before is at and t.after not in found:
                found[t.after] = found[at] + [t.event]
                todo.append(t.after)
    return found


def at_stage(ledger: LedgerStore, stage: Optional[Stage]) -> Walked:
    op = Walked(ledger)
    for event in paths()[stage]:
        op.send(event)
    assert op.stage() is stage
    return op


def test_every_stage_is_reached_and_every_rule_is_used() -> None:
    assert set(paths()) == {None, *Stage}
    used = {r for t in life.TRANSITIONS for r in t.rules}
    assert used <= set(life.RULES)
    for name, rule in life.RULES.items():  # each rule names code that exists
        module, attr = rule.where.rsplit(".", 1)
        assert hasattr(importlib.import_module("slurm_dsl." + module), attr), name


def test_every_transition_through_the_ledger(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        for t in life.TRANSITIONS:
            op = at_stage(ledger, t.before)
            op.send(t.event)
            assert op.stage() is t.after, t


def test_every_step_the_table_lacks_is_refused_or_changes_nothing(ledger_location: str) -> None:
    with open_ledger(ledger_location) as ledger:
        for before, event in itertools.product([None, *Stage], EVENTS):
            if event.kind == "begin" or life.step(before, event) is not None:
                continue
            op = at_stage(ledger, before)
            try:
                op.send(event)
            except LedgerError:
                pass
            assert op.stage() is before, (before, event)


def test_the_reading_queries_select_what_the_table_says(ledger_location: str) -> None:
    """``unsettled`` reads the stages that take any verdict; ``acknowledged`` those that take
    only the verdicts of a loss, and the begun ones, from the sweep's mark on."""
    present, absent = Event("verdict", "present"), Event("verdict", "absent")
    any_verdict = {s for s in Stage if life.step(s, present)}
    lost_only = {s for s in Stage if life.step(s, absent) and not life.step(s, present)}
    assert any_verdict == {Stage.BEGUN, Stage.UNKNOWN} and lost_only == {Stage.ACKNOWLEDGED, Stage.SAVED}
    with open_ledger(ledger_location) as ledger:
        ops = {s: at_stage(ledger, s) for s in Stage}
        now = max(op.now for op in ops.values()) + 1
        mark = min(op.op_id for op in ops.values())  # a mark at the first: the saved one is past it too
        unsettled = {p.id for p in ledger.unsettled(now)}
        again = {r.id for r in ledger.acknowledged(mark, 0.0)}
        for s, op in ops.items():
            assert (op.op_id in unsettled) == (s in any_verdict), s
            assert (op.op_id in again) == (s in lost_only | {Stage.BEGUN}), s


def test_the_code_takes_its_result_sets_from_the_table() -> None:
    from slurm_dsl.core import settle
    from slurm_dsl.run import tracked

    assert set(settle.SETTLED_RESULTS) == {None, Result.UNKNOWN, Result.OK, Result.BIT_SET}
    assert set(tracked.CHANGED) == {Result.UNKNOWN, Result.OK, Result.BIT_SET}
    for result in (None, *Result):  # the ledger's check is the table's
        for verdict in Verdict:
            lost = verdict in (Verdict.ABSENT, Verdict.GONE) and result in (Result.OK, Result.BIT_SET)
            assert life.verdict_allowed(result, verdict) == (result in (None, Result.UNKNOWN) or lost)


def test_the_contract_shows_the_table() -> None:
    text = (ROOT / "docs" / "contract.md").read_text()
    start, end = "<!-- life.markdown() -->\n", "<!-- end -->"
    assert start in text, "docs/contract.md §9.6 lacks the table"
    shown = text.split(start, 1)[1].split(end, 1)[0]
    assert shown == life.markdown(), "docs/contract.md §9.6 is not core.life.markdown(): paste it again"

