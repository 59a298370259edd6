"""What scontrol and squeue print while no controller is in control, during a takeover and during a
hand-back (docs/slurm-behaviour.md §6.1, docs/durability.md §2-§3): the exact bytes seen on
22.05.8, 24.11.5 and 26.05.5 read as unknown (a call) or could-not-ask (a lookup), never as a
refusal or "not found"; and the settle delay of an operation whose call printed them
(core.settle Rule 13, docs/contract.md §13.6): a request sent during a 24.11 hand-back is applied
up to ~28 s after its client exited 1, so ``absent`` waits ``CONTROL_TIMEOUT`` longer; and where a
backup may hand back, ``absent`` is read only when the controllers say nothing is held back (Rule 14)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import pytest

from slurm_dsl import Op, Reason, Result
from slurm_dsl.core.durable import UNREAD, Beat, Control
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import CallOutcome, LookupFailed, Verdict
from slurm_dsl.core.reader import read_outcome
from slurm_dsl.core.settle import (
    CONTROL_TIMEOUT,
    DEFAULT_SETTLE_DELAY,
    Recorded,
    delay_of,
    settle_operation,
)
from slurm_dsl.host.process import Completed
from slurm_dsl.lookups.squeue import SqueueLookup
from tests.ground import NONCE, UNEXPECTED, frame, plain, suspend

J = "4"
# docs/durability.md §2-§3, docs/slurm-24.11-26.05.md §2: the calls' stderr, byte for byte.
HOLD_DOWN = suspend(UNEXPECTED, J)  # 22.05.8, 24.11.5: "slurm_suspend error: Unexpected message received"
HOLD_DOWN_2605 = suspend(UNEXPECTED, J, space=False)  # 26.05.5: no space after the colon
UPDATE_DOWN = plain(UNEXPECTED, J)  # update JobId=J Requeue=0/1, requeue J
SQUEUE_TIMED_OUT = b"slurm_load_jobs error: Socket timed out on send/recv operation\n"  # 24.11 hand-back
SQUEUE_UNREACHABLE = b"slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"  # outage


@pytest.mark.parametrize(("op", "calls"), [
    ("hold", [(HOLD_DOWN, 1, 1)]),
    ("hold", [(HOLD_DOWN_2605, 1, 1)]),
    ("release", [(HOLD_DOWN, 1, 1)]),
    ("restore", [(UPDATE_DOWN, 1, 1)]),
    ("requeue", [(UPDATE_DOWN, 1, 1), (b"", 3, 0)]),  # call 1 (Requeue=1) during the hand-back
    ("requeue", [(b"", 1, 0), (UPDATE_DOWN, 2, 1), (b"", 3, 0)]),  # the requeue itself
    ("requeue", [(b"", 1, 0), (b"", 2, 0), (UPDATE_DOWN, 3, 1)]),  # the clear
])
def test_every_message_of_a_controller_not_in_charge_is_unknown_never_a_refusal(op: str, calls: list) -> None:  # type: ignore[type-arg]
    outcome = read_outcome(op, J, frame(NONCE, calls), calls[-1][2], NONCE)
    failed = [c for c in outcome.calls if c.status == 1]
    assert [c.outcome for c in failed] == [CallOutcome.UNKNOWN] and failed[0].message is None
    assert outcome.result is Result.UNKNOWN, outcome
    # A requeue's call 3 (the clear) is the bit's reason; its call 2 took effect (present, read from
    # RestartCnt), and the flag is the sweep's (may_be_set).
    clear = op in ("requeue", "requeuehold") and failed[0].number == 3
    assert outcome.reason is (Reason.CLEAR_FAILED if clear else Reason.UNRECOGNISED_STDERR), outcome


@pytest.mark.parametrize("stderr", [SQUEUE_TIMED_OUT, SQUEUE_UNREACHABLE])
@pytest.mark.parametrize("ids", [["4"], ["4", "5"]])
def test_a_lookup_during_an_outage_or_a_hand_back_could_not_ask(stderr: bytes, ids: Sequence[str]) -> None:
    def run(argv: Sequence[str], **kwargs: Any) -> Completed:
        if argv[0].endswith("sdiag"):
            return Completed(tuple(argv), 127, b"", b"sdiag: No such file or directory\n", False, False, started=False)
        return Completed(tuple(argv), 1, b"", stderr, False, False)

    with pytest.raises(LookupFailed) as failed:
        SqueueLookup("/usr/bin/squeue", 7.5, run=run).jobs(ids)
    assert stderr.decode().strip().split(": ", 1)[1] in failed.value.reason


END = 1000.0
NOT_HELD = JobInfo(J, "PENDING", False, 0, 4294901, "BeginTime")


def unknown_hold(reason: Optional[Reason]) -> Recorded:
    return Recorded(1, J, Op.HOLD, Result.UNKNOWN, END - 5.0, finished_at=END, reason=reason)


@pytest.mark.parametrize(("result", "reason", "expected"), [
    (Result.UNKNOWN, Reason.UNRECOGNISED_STDERR, DEFAULT_SETTLE_DELAY + CONTROL_TIMEOUT),
    # A requeue's calls 2 and 3 both cut off by the hand-back (the pair, docs/durability.md §4).
    (Result.UNKNOWN, Reason.CLEAR_FAILED, DEFAULT_SETTLE_DELAY + CONTROL_TIMEOUT),
    (Result.UNKNOWN, Reason.CLEAR_NOT_RUN, DEFAULT_SETTLE_DELAY + CONTROL_TIMEOUT),
    (Result.UNKNOWN, Reason.KILLED_BY_SIGNAL, DEFAULT_SETTLE_DELAY),  # cut off by its deadline
    (Result.UNKNOWN, None, DEFAULT_SETTLE_DELAY),
    (None, None, DEFAULT_SETTLE_DELAY),  # unfinished
    (Result.OK, None, DEFAULT_SETTLE_DELAY),  # acknowledged: it was applied, nothing waits
])
def test_the_settle_delay_is_longer_only_after_a_message_no_refusal_prints(
    result: Optional[Result], reason: Optional[Reason], expected: float
) -> None:
    assert delay_of(result, reason, DEFAULT_SETTLE_DELAY) == expected


@pytest.mark.parametrize(("result", "reason"), [
    (Result.UNKNOWN, Reason.KILLED_BY_SIGNAL), (Result.UNKNOWN, None), (None, None),
    (Result.UNKNOWN, Reason.UNRECOGNISED_STDERR),
])
def test_where_a_backup_may_hand_back_every_unknown_or_unfinished_op_waits_longer(
    result: Optional[Result], reason: Optional[Reason]
) -> None:
    assert delay_of(result, reason, DEFAULT_SETTLE_DELAY, hand_back=True) == DEFAULT_SETTLE_DELAY + CONTROL_TIMEOUT
    assert delay_of(Result.OK, None, DEFAULT_SETTLE_DELAY, hand_back=True) == DEFAULT_SETTLE_DELAY  # applied


def test_absent_after_a_hand_back_message_only_once_a_request_on_the_socket_would_have_been_applied() -> None:
    # 24.11.5: a hold whose client exited 1 at +4 s was applied at ~+28.5 s (docs/durability.md §2).
    # Looked at 11 s and 28 s after its end: no verdict (a killed call would be absent by now);
    # after the settle delay plus CONTROL_TIMEOUT, absent; present at any time.
    down = unknown_hold(Reason.UNRECOGNISED_STDERR)
    for after in (DEFAULT_SETTLE_DELAY + 1, 28.0, DEFAULT_SETTLE_DELAY + CONTROL_TIMEOUT - 0.1):
        assert settle_operation(down, [], NOT_HELD, END + after, no_ends_by_bound=60.0) is None
    assert settle_operation(unknown_hold(Reason.KILLED_BY_SIGNAL), [], NOT_HELD, END + DEFAULT_SETTLE_DELAY + 1,
                            no_ends_by_bound=60.0) is not None
    late = settle_operation(down, [], NOT_HELD, END + DEFAULT_SETTLE_DELAY + CONTROL_TIMEOUT, no_ends_by_bound=60.0)
    assert late is not None and late.verdict is Verdict.ABSENT
    held = JobInfo(J, "PENDING", False, 0, 0, "JobHeldAdmin")
    early = settle_operation(down, [], held, END + 1.0, no_ends_by_bound=60.0)
    assert early is not None and early.verdict is Verdict.PRESENT


def test_a_requeue_whose_call_failed_in_a_hand_back_is_not_absent_before_the_bound() -> None:
    # The requeue's calls 2 and 3 printed "Unexpected message received" (its reason: clear_failed);
    # its RestartCnt is still the baseline's 11 s later.  No verdict: a keyed --retry does not
    # requeue again (absent only).
    base = JobInfo(J, "RUNNING", True, 0, 4294901, "None")
    requeue = Recorded(1, J, Op.REQUEUE, Result.UNKNOWN, END - 5.0, finished_at=END, baseline=base,
                       baseline_at=END - 6.0, reason=Reason.CLEAR_FAILED, baseline_ctl=CTL)  # as the pair's run read it
    running = JobInfo(J, "RUNNING", True, 0, 4294901, "None")
    assert settle_operation(requeue, [], running, END + DEFAULT_SETTLE_DELAY + 1, no_ends_by_bound=60.0,
                            controller=CTL) is None
    requeued = JobInfo(J, "PENDING", True, 1, 4294901, "BeginTime")  # applied late: present, once
    found = settle_operation(requeue, [], requeued, END + 29.0, no_ends_by_bound=60.0, controller=CTL)
    assert found is not None and found.verdict is Verdict.PRESENT
    # Rule 16: another controller answered the lookup; the baseline may be undone: never absent.
    other = settle_operation(requeue, [], running, END + 300.0, no_ends_by_bound=60.0, controller="other#1")
    assert other is not None and other.verdict is Verdict.UNDECIDABLE and "Rule 16" in other.detail


# Rule 14, from docs/contract.md §13.6's words: where a backup may hand back, absent is read only from
# a lookup before which the controllers were read and no request sent before the end can still be
# held back; a later operation's record, read without such a reading, cannot say absent.
# Rules 6 and 7 (core.durable): the operation's end anchored at MARK; two heartbeat files seen after
# it, the second written after the end, its writer in control 40 s since on the boot clock.
MARK = 12
CTL = "2026-12-07T13:00:00#0"  # the controller in control, read before the baseline and after each lookup (Rule 16)


def beats(writer: int, *at: float) -> tuple:  # type: ignore[type-arg]
    """Looks at the heartbeat after the anchor, each another file, by ``writer``, at those boot times."""
    return tuple(Beat(MARK + 1 + n, f"file-{n}", writer, when) for n, when in enumerate(at))


PRIMARY_AFTER = Control(0, (), beats(0, 60.0, 100.0), 40.0, 140.0)  # in control 40 s since its heartbeat after the end
BACKUP_PRIMARY_LISTENS = Control(1, (True,), beats(1, 60.0, 100.0), 40.0, 140.0)  # a hand-back in progress
BACKUP_PRIMARY_DOWN = Control(1, (False,), beats(1, 60.0, 100.0), 40.0, 140.0)  # the primary refused the connection
PRIMARY_BEFORE = Control(0, (), (Beat(MARK - 1, "old", 0, 10.0),), 40.0, 140.0)  # nothing seen since the end
PRIMARY_JUST_NOW = Control(0, (), beats(0, 60.0, 100.0), 40.0, 100.0)  # its heartbeat after the end: just seen


@pytest.mark.parametrize("reason", [Reason.UNRECOGNISED_STDERR, Reason.KILLED_BY_SIGNAL, None])
@pytest.mark.parametrize(("control", "absent"), [
    (UNREAD, False), (PRIMARY_BEFORE, False), (BACKUP_PRIMARY_LISTENS, False), (PRIMARY_JUST_NOW, False),
    (PRIMARY_AFTER, True), (BACKUP_PRIMARY_DOWN, True),
])
def test_where_a_backup_may_hand_back_absent_needs_controllers_that_hold_nothing_back(
    reason: Optional[Reason], control: Control, absent: bool
) -> None:
    late = END + DEFAULT_SETTLE_DELAY + CONTROL_TIMEOUT + 60.0  # far past every bound
    found = settle_operation(unknown_hold(reason), [], NOT_HELD, late, no_ends_by_bound=60.0,
                             hand_back=True, control=control, mark=MARK)
    assert (found is not None and found.verdict is Verdict.ABSENT) is absent, found
    if not absent:
        assert found is None  # no verdict yet: look again later
    one = settle_operation(unknown_hold(reason), [], NOT_HELD, late, no_ends_by_bound=60.0, control=control)
    assert one is not None and one.verdict is Verdict.ABSENT  # one controller: the control is not read
    held = JobInfo(J, "PENDING", False, 0, 0, "JobHeldAdmin")
    present = settle_operation(unknown_hold(reason), [], held, late, no_ends_by_bound=60.0, hand_back=True,
                               control=control)
    assert present is not None and present.verdict is Verdict.PRESENT  # an effect shown is read at once


def test_a_requeue_retried_during_a_slow_hand_back_is_not_absent_until_the_primary_took_control() -> None:
    # The CI case (24.11.5 under load): calls 2 and 3 printed "Unexpected message received"; 32 s
    # after the end the backup still showed RestartCnt 0 while the restarted primary listened.
    base = JobInfo(J, "RUNNING", True, 0, 4294901, "None")
    requeue = Recorded(1, J, Op.REQUEUE, Result.UNKNOWN, END - 5.0, finished_at=END, baseline=base,
                       baseline_at=END - 6.0, reason=Reason.CLEAR_FAILED, baseline_ctl=CTL)
    running = JobInfo(J, "RUNNING", True, 0, 4294901, "None")
    for after in (32.0, 45.0, 300.0):
        assert settle_operation(requeue, [], running, END + after, no_ends_by_bound=60.0, hand_back=True,
                                control=Control(1, (True,), beats(1, 10.0, 20.0), 40.0, after), mark=MARK,
                                controller=CTL) is None
    requeued = JobInfo(J, "PENDING", True, 1, 4294901, "BeginTime")  # the primary took control: applied
    found = settle_operation(requeue, [], requeued, END + 46.0, no_ends_by_bound=60.0, hand_back=True,
                             control=Control(0, (), beats(0, 45.0), 40.0, 46.0), mark=MARK, controller=CTL)
    assert found is not None and found.verdict is Verdict.PRESENT


def test_a_requeue_is_not_absent_from_the_primarys_first_seconds_in_control() -> None:
    # CI, 24.11.5 under load (stop 37): the restarted primary's heartbeat was after the end, and a
    # lookup 32 s after the end still showed RestartCnt 0: the requeue that had waited on its socket
    # came later.  Rule 7: no absent until the primary has been in control for held_for.
    base = JobInfo(J, "RUNNING", True, 0, 4294901, "None")
    requeue = Recorded(1, J, Op.REQUEUE, Result.UNKNOWN, END - 5.0, finished_at=END, baseline=base,
                       baseline_at=END - 6.0, reason=Reason.CLEAR_FAILED, baseline_ctl=CTL)
    first = 31.0  # the boot clock when the look first saw its heartbeat written after the end
    for now in (first, first + 10, first + 32):
        assert settle_operation(requeue, [], base, END + 32.0 + now - first, no_ends_by_bound=60.0, hand_back=True,
                                control=Control(0, (), beats(0, 20.0, first), 33.0, now), mark=MARK,
                                controller=CTL) is None
    late = settle_operation(requeue, [], base, END + 66.0, no_ends_by_bound=60.0, hand_back=True,
                            control=Control(0, (), beats(0, 20.0, first), 33.0, first + 33), mark=MARK,
                            controller=CTL)
    assert late is not None and late.verdict is Verdict.ABSENT


def test_a_requeue_baselined_on_the_backup_is_not_undecidable_from_the_primarys_first_seconds() -> None:
    # CI, 24.11.5 (stop 53): the baseline read from the backup, calls 2 and 3 "Unexpected message
    # received", the record read from the primary just after it took control, still RestartCnt 0.
    # Rule 16 says undecidable only where absent would be read: until then, no verdict, since the
    # request that waited on the primary's socket may yet show the requeue.
    backup, primary = "2026-12-07T13:00:00#1", "2026-12-07T13:00:40#0"
    base = JobInfo(J, "RUNNING", True, 0, 4294901, "None")
    requeue = Recorded(1, J, Op.REQUEUE, Result.UNKNOWN, END - 5.0, finished_at=END, baseline=base,
                       baseline_at=END - 6.0, reason=Reason.CLEAR_FAILED, baseline_ctl=backup)
    first = 31.0
    for now in (first, first + 10, first + 32):
        assert settle_operation(requeue, [], base, END + 32.0 + now - first, no_ends_by_bound=60.0, hand_back=True,
                                control=Control(0, (), beats(0, 20.0, first), 33.0, now), mark=MARK,
                                controller=primary) is None
    too_soon = settle_operation(requeue, [], base, END + 1.0, no_ends_by_bound=60.0, controller=primary)
    assert too_soon is None  # one controller (no hand-back): too soon for absent, so for undecidable too
    applied = JobInfo(J, "PENDING", True, 1, 4294901, "BeginTime")
    found = settle_operation(requeue, [], applied, END + 40.0, no_ends_by_bound=60.0, hand_back=True,
                             control=Control(0, (), beats(0, 20.0, first), 33.0, first + 9), mark=MARK,
                             controller=primary)
    assert found is not None and found.verdict is Verdict.PRESENT
    late = settle_operation(requeue, [], base, END + 66.0, no_ends_by_bound=60.0, hand_back=True,
                            control=Control(0, (), beats(0, 20.0, first), 33.0, first + 33), mark=MARK,
                            controller=primary)
    assert late is not None and late.verdict is Verdict.UNDECIDABLE and "Rule 16" in late.detail, late


def test_a_later_operations_record_cannot_say_absent_where_a_backup_may_hand_back() -> None:
    hold = unknown_hold(Reason.UNRECOGNISED_STDERR)
    release = Recorded(2, J, Op.RELEASE, Result.OK, END + 100.0, finished_at=END + 101.0, baseline=NOT_HELD,
                       baseline_at=END + 99.0)
    one = settle_operation(hold, [release], NOT_HELD, END + 200.0, no_ends_by_bound=60.0)
    assert one is not None and one.verdict is Verdict.ABSENT and one.from_operation == 2
    two = settle_operation(hold, [release], NOT_HELD, END + 200.0, no_ends_by_bound=60.0, hand_back=True,
                           control=PRIMARY_AFTER)
    assert two is not None and two.verdict is Verdict.UNDECIDABLE and "hand-back" in two.detail, two
