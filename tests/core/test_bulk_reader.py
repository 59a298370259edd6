"""docs/contract.md §11: one list call read into one strict ``Call`` per id, never surer than one id alone.

Tables replay the real texts of docs/slurm-bulk.md §2-§5 (ids that are array tokens are left out
of the call's ids: they never share a list; their array-form lines stay in, as scontrol printed
them).  The properties synthesize what scontrol prints for random per-id behaviours and whole-call
fates, and compare each id's result with ``read_outcome`` of that id's own single script.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_dsl import InvalidInput, Op, Outcome, Reason, RequeueBit, Result
from slurm_dsl.core.bulk_reader import (
    UNEXPECTED,
    bulk_calls,
    combine_bulk,
    frame_list_output,
    plan_chunks,
    read_list_call,
    read_list_output,
    requeue_next_calls,
    unknown_list_call,
)
from slurm_dsl.core.model import Call, CallOutcome
from slurm_dsl.core.reader import read_outcome
from slurm_dsl.core.refusals import ALLOWED
from slurm_dsl.core.script import MAX_ARG_BYTES
from tests.examples import examples
from tests.ground import (
    ACCESS_DENIED,
    ALREADY_FINISHED,
    DISABLED,
    INVALID_JOB_ID,
    INVALID_USER_ID,
    NONCE,
    OTHER_NONCE,
    PENDING_EXECUTION,
    frame,
)

S, F, N = CallOutcome.SUCCESS, CallOutcome.REJECTED, CallOutcome.NOT_FOUND
U, X = CallOutcome.UNKNOWN, CallOutcome.EXPIRED
HOLD, RELEASE, REQUEUE, RESTORE, OPEN = Op.HOLD, Op.RELEASE, Op.REQUEUE, Op.RESTORE, Op.OPEN


def ids_of(text: str) -> List[str]:
    return text.split(",")


def outcomes(calls: Mapping[str, Call]) -> Dict[str, CallOutcome]:
    return {job: call.outcome for job, call in calls.items()}


# --- docs/slurm-bulk.md, replayed -------------------------------------------------------------------

Row = Tuple[str, Op, int, str, bytes, int, Dict[str, CallOutcome]]

TABLE: List[Row] = [
    # §2.3: two- and three-id lists, comma form (the form slurm-dsl sends).
    ("hold 192,999999", HOLD, 1, "192,999999",
     b"Invalid job id specified for job 999999\nslurm_suspend error: Invalid job id specified\n", 1,
     {"192": S, "999999": N}),
    ("hold 194,184", HOLD, 1, "194,184",
     b"Job has already finished for job 184\nslurm_suspend error: Job has already finished\n", 1,
     {"194": S, "184": F}),
    ("hold 195,999999,196", HOLD, 1, "195,999999,196",
     b"Invalid job id specified for job 999999\nslurm_suspend error: No error\n", 1,
     {"195": S, "999999": N, "196": S}),
    ("hold 184,189", HOLD, 1, "184,189",
     b"Job has already finished for job 184\nJob has already finished for job 189\n"
     b"slurm_suspend error: Job has already finished\n", 1,
     {"184": F, "189": F}),
    ("release 905,999999,906", RELEASE, 1, "905,999999,906",
     b"Invalid job id specified for job 999999\nslurm_suspend error: No error\n", 1,
     {"905": S, "999999": N, "906": S}),
    ("requeue 911,999999,912", REQUEUE, 2, "911,999999,912",
     b"Requested operation is presently disabled for job 911\nInvalid job id specified for job 999999\n"
     b"Requested operation is presently disabled for job 912\n", 1,
     {"911": F, "999999": N, "912": F}),
    ("update JobId=917,999999,918 Requeue=1", REQUEUE, 1, "917,999999,918",
     b"Invalid job id specified for job 999999\n", 1,
     {"917": S, "999999": N, "918": S}),
    ("update JobId=901,919,999999 Requeue=1", REQUEUE, 1, "901,919,999999",
     b"Job has already finished for job 901\nInvalid job id specified for job 999999\n", 1,
     {"901": F, "919": S, "999999": N}),
    ("update JobId=923,999999,924 Requeue=0 (restore)", RESTORE, 1, "923,999999,924",
     b"Invalid job id specified for job 999999\n", 1,
     {"923": S, "999999": N, "924": S}),
    ("update JobId=923,999999,924 Requeue=0 (requeue 3)", REQUEUE, 3, "923,999999,924",
     b"Invalid job id specified for job 999999\n", 1,
     {"923": S, "999999": N, "924": S}),
    # §2.1: the suspend line's text is the last RPC's errno, not any id's.
    ("hold 999999,898", HOLD, 1, "999999,898",
     b"Invalid job id specified for job 999999\nslurm_suspend error: No error\n", 1,
     {"999999": N, "898": S}),
    ("hold 898,999999", HOLD, 1, "898,999999",
     b"Invalid job id specified for job 999999\nslurm_suspend error: Invalid job id specified\n", 1,
     {"898": S, "999999": N}),
    ("hold 197,189,198", HOLD, 1, "197,189,198",
     b"Job has already finished for job 189\nslurm_suspend error: No error\n", 1,
     {"197": S, "189": F, "198": S}),
    ("hold 184,999999,199", HOLD, 1, "184,999999,199",
     b"Job has already finished for job 184\nInvalid job id specified for job 999999\nslurm_suspend error: No error\n",
     1, {"184": F, "999999": N, "199": S}),
    ("hold 999999,184", HOLD, 1, "999999,184",
     b"Invalid job id specified for job 999999\nJob has already finished for job 184\n"
     b"slurm_suspend error: Job has already finished\n", 1,
     {"999999": N, "184": F}),
    ("hold 184 999999 210 (separate arguments: a suspend line after each)", HOLD, 1, "184,999999,210",
     b"Job has already finished for job 184\nslurm_suspend error: Job has already finished\n"
     b"Invalid job id specified for job 999999\nslurm_suspend error: Invalid job id specified\n", 1,
     {"184": F, "999999": N, "210": S}),
    ("hold 206 999999 207 (separate arguments)", HOLD, 1, "206,999999,207",
     b"Invalid job id specified for job 999999\nslurm_suspend error: Invalid job id specified\n", 1,
     {"206": S, "999999": N, "207": S}),
    # An array line belongs to no id of the call: the silent ids are unknown, the others keep theirs
    # (999999 with a silent id beside it); one id alone is its single op, which reads that as unknown.
    ("hold 999999,742_9 (array line)", HOLD, 1, "999999,900",
     b"Invalid job id specified for job 999999\n742_9: Invalid job id specified\nslurm_suspend error: No error\n", 1,
     {"999999": N, "900": U}),
    ("hold 999999,742_9 (array line, one id)", HOLD, 1, "999999",
     b"Invalid job id specified for job 999999\n742_9: Invalid job id specified\nslurm_suspend error: No error\n", 1,
     {"999999": U}),
    ("hold 740,742_9 (array line, no suspend line)", HOLD, 1, "740",
     b"742_9: Invalid job id specified\n", 1,
     {"740": U}),
    # §2.4: the thirteen-id mix as root (244_3, 244_9 / 316_3, 316_9 left out of the ids).
    ("hold, 13-id mix", HOLD, 1, "238,239,240,241,242,229,232,236,999999,243,245",
     b"Job has already finished for job 229\nJob has already finished for job 232\n"
     b"Job has already finished for job 236\nInvalid job id specified for job 999999\n"
     b"244_9: Invalid job id specified\nslurm_suspend error: No error\n", 1,
     {"238": U, "239": U, "240": U, "241": U, "242": U, "229": F, "232": F, "236": F, "999999": N,
      "243": U, "245": U}),
    # The doc elides the ids between 310 and 317; the lines are verbatim.
    ("update Requeue=1, 13-id mix", REQUEUE, 1, "310,311,312,313,314,229,232,236,999999,315,317",
     b"Job has already finished for job 229\nJob has already finished for job 232\n"
     b"Job has already finished for job 236\nInvalid job id specified for job 999999\n"
     b"316_9: Invalid job id specified\n", 1,
     {"310": U, "311": U, "312": U, "313": U, "314": U, "229": F, "232": F, "236": F, "999999": N,
      "315": U, "317": U}),
    # §2.5: the ten-id lists as alice (368_3, 369_2 / 428_3, 429_2 / 444_3, 445_2 left out).
    ("hold as alice", HOLD, 1, "363,364,365,999999,358,366,367,370",
     b"Invalid user id for job 364\nInvalid job id specified for job 999999\nJob has already finished for job 358\n"
     b"367_1-4: Invalid user id\n368_3: Invalid user id\nInvalid user id for job 370\n"
     b"slurm_suspend error: Invalid user id\n", 1,
     {"363": U, "364": F, "365": U, "999999": N, "358": F, "366": U, "367": U, "370": F}),
    ("requeue as alice", REQUEUE, 2, "423,424,425,999999,358,426,427,430",
     b"Requested operation is presently disabled for job 423\nAccess/permission denied for job 424\n"
     b"Requested operation is presently disabled for job 425\nInvalid job id specified for job 999999\n"
     b"Access/permission denied for job 358\nRequested operation is presently disabled for job 426\n"
     b"427_1-4: Access/permission denied\n428_1-4: Access/permission denied\n"
     b"429_1-3: Requested operation is presently disabled\nAccess/permission denied for job 430\n", 1,
     {"423": F, "424": F, "425": F, "999999": N, "358": F, "426": F, "427": U, "430": F}),
    ("update Requeue=1 as alice", REQUEUE, 1, "439,440,441,999999,358,442,443,446",
     b"Invalid user id for job 440\nInvalid job id specified for job 999999\nJob has already finished for job 358\n"
     b"443_1-4: Invalid user id\n444_3: Invalid user id\nInvalid user id for job 446\n", 1,
     {"439": U, "440": F, "441": U, "999999": N, "358": F, "442": U, "443": U, "446": F}),
    # The same hold as alice without the array ids and their lines (what slurm-dsl would send):
    # the silent ids took effect (docs/slurm-bulk.md §3.1).
    ("hold as alice, plain ids only", HOLD, 1, "363,364,365,999999,358,366,370",
     b"Invalid user id for job 364\nInvalid job id specified for job 999999\nJob has already finished for job 358\n"
     b"Invalid user id for job 370\nslurm_suspend error: Invalid user id\n", 1,
     {"363": S, "364": F, "365": S, "999999": N, "358": F, "366": S, "370": F}),
    # §3.2: a duplicate sent twice prints two lines for one id; slurm-dsl deduplicates, so two
    # lines for one id are never its own answer (and no silent id is sure either).
    ("requeue 178,178: the line twice", REQUEUE, 2, "178,181",
     b"Requested operation is presently disabled for job 178\nRequested operation is presently disabled for job 178\n",
     1, {"178": U, "181": U}),
    ("requeue 895_2,895 (array lines)", REQUEUE, 2, "895",
     b"895_1: No error\n895_2: Job is pending execution\n", 1,
     {"895": U}),
    # §4: the controller unreachable: one line per id, never a refusal.
    ("hold 491,492,493, controller down", HOLD, 1, "491,492,493",
     b"Unexpected message received for job 491\nUnexpected message received for job 492\n"
     b"Unexpected message received for job 493\nslurm_suspend error: Unexpected message received\n", 1,
     {"491": U, "492": U, "493": U}),
    ("hold 491 492 493 (separate arguments), controller down", HOLD, 1, "491,492,493",
     b"Unexpected message received for job 491\nslurm_suspend error: Unexpected message received\n"
     b"Unexpected message received for job 492\nslurm_suspend error: Unexpected message received\n"
     b"Unexpected message received for job 493\nslurm_suspend error: Unexpected message received\n", 1,
     {"491": U, "492": U, "493": U}),
    ("hold 491,999999,492, controller down", HOLD, 1, "491,999999,492",
     b"Unexpected message received for job 491\nUnexpected message received for job 999999\n"
     b"Unexpected message received for job 492\nslurm_suspend error: Unexpected message received\n", 1,
     {"491": U, "999999": U, "492": U}),
    ("requeue 491,492,493, controller down", REQUEUE, 2, "491,492,493",
     b"Unexpected message received for job 491\nUnexpected message received for job 492\n"
     b"Unexpected message received for job 493\n", 1,
     {"491": U, "492": U, "493": U}),
    ("update Requeue=1 491,492,493, controller down", REQUEUE, 1, "491,492,493",
     b"Unexpected message received for job 491\nUnexpected message received for job 492\n"
     b"Unexpected message received for job 493\n", 1,
     {"491": U, "492": U, "493": U}),
    # Per id: a controller that answered the second RPC but not the first.
    ("controller back for the second id", REQUEUE, 1, "491,492",
     b"Unexpected message received for job 491\n", 1,
     {"491": U, "492": S}),
    # 25.05+: no space after the colon, and a bare line when the last RPC's errno is 0.
    ("hold 195,999999,196 on 25.05+ (bare suspend line)", HOLD, 1, "195,999999,196",
     b"Invalid job id specified for job 999999\nslurm_suspend error\n", 1,
     {"195": S, "999999": N, "196": S}),
    ("hold 898,999999 on 26.05 (no space)", HOLD, 1, "898,999999",
     b"Invalid job id specified for job 999999\nslurm_suspend error:Invalid job id specified\n", 1,
     {"898": S, "999999": N}),
    ("release 905,184 on 26.05 (no space)", RELEASE, 1, "905,184",
     b"Job has already finished for job 184\nslurm_suspend error:Job has already finished\n", 1,
     {"905": S, "184": F}),
    # §1: parse errors: nothing was sent, or nothing is sure.
    ("hold 178,x,180 (whole argument refused)", HOLD, 1, "178,180",
     b"Invalid job id specified for job 178,x,180\nslurm_suspend error: Invalid job id specified\n", 1,
     {"178": U, "180": U}),
    ("update Requeue=1 Requeue=yes", REQUEUE, 1, "181,182",
     b"scontrol: error: Invalid Requeue value: yes\n", 1, {"181": U, "182": U}),
    ("update JobId=181 182 Requeue=1", REQUEUE, 1, "181,182",
     b"Update of this parameter is not supported: Requeue=1\nRequest aborted\n", 1, {"181": U, "182": U}),
    ("update JobId=181,182 (no changes)", RESTORE, 1, "181,182",
     b"No changes specified\n", 1, {"181": U, "182": U}),
    ("requeue Incomplete 740 '' (rc 1, no text)", REQUEUE, 2, "740", b"", 1, {"740": U}),
    ("status 1 with only a suspend line", HOLD, 1, "1,2", b"slurm_suspend error: No error\n", 1, {"1": U, "2": U}),
    # §1: rc 0 is every id done; a line with rc 0 is not what scontrol prints: nothing is sure.
    ("hold 178,179,180, rc 0", HOLD, 1, "178,179,180", b"", 0, {"178": S, "179": S, "180": S}),
    ("rc 0 with blank lines only", REQUEUE, 1, "178,179", b"\n  \n\t\n", 0, {"178": S, "179": S}),
    ("rc 0 with a refusal line", REQUEUE, 1, "178,179",
     b"Invalid job id specified for job 179\n", 0, {"178": U, "179": U}),
    ("rc 0 with a suspend line", HOLD, 1, "178,179", b"slurm_suspend error: No error\n", 0, {"178": U, "179": U}),
    # Lines the call's rules do not allow.
    ("update never prints a suspend line", RESTORE, 1, "923,999999",
     b"Invalid job id specified for job 999999\nslurm_suspend error: Invalid job id specified\n", 1,
     {"923": U, "999999": N}),
    ("a message not allowed for the call", HOLD, 1, "238,239",
     b"Requested operation is presently disabled for job 239\nslurm_suspend error: No error\n", 1,
     {"238": U, "239": U}),
    ("an id not in the call", HOLD, 1, "238,239",
     b"Job has already finished for job 2390\nslurm_suspend error: No error\n", 1, {"238": U, "239": U}),
    ("an id echoed with a leading zero", HOLD, 1, "900,999999",
     b"Invalid job id specified for job 0999999\nslurm_suspend error: Invalid job id specified\n", 1,
     {"900": U, "999999": U}),
    ("a torn last line", REQUEUE, 2, "12,123",
     b"Requested operation is presently disabled for job 12", 1, {"12": U, "123": U}),
    ("CRLF line ends", REQUEUE, 2, "12,13",
     b"Requested operation is presently disabled for job 12\r\n", 1, {"12": U, "13": U}),
    ("not the suspend line", HOLD, 1, "12,13",
     b"Job has already finished for job 12\nslurm_suspend errors: No error\n", 1, {"12": F, "13": U}),
    # Statuses at which scontrol never ran: the single reader's fixed outcome, whatever stderr says.
    ("expired", HOLD, 1, "1,2", b"", 75, {"1": X, "2": X}),
    ("not found", REQUEUE, 1, "1,2",
     b"timeout: failed to run command '/usr/bin/scontrol': No such file or directory\n", 127,
     {"1": CallOutcome.NOT_RUN, "2": CallOutcome.NOT_RUN}),
    ("not executable", RESTORE, 1, "1,2",
     b"timeout: failed to run command '/usr/bin/scontrol': Permission denied\n", 126,
     {"1": CallOutcome.NOT_RUN, "2": CallOutcome.NOT_RUN}),
    ("wrapper failed", HOLD, 1, "1,2", b"date: invalid date\n", 125, {"1": U, "2": U}),
]


@pytest.mark.parametrize(
    ("op", "number", "ids", "stderr", "status", "expected"), [r[1:] for r in TABLE], ids=[r[0] for r in TABLE]
)
def test_the_real_texts(
    op: Op, number: int, ids: str, stderr: bytes, status: int, expected: Dict[str, CallOutcome]
) -> None:
    got = read_list_call(op, number, ids_of(ids), stderr, status)
    assert list(got) == ids_of(ids)
    assert outcomes(got) == expected
    for job, call in got.items():
        assert call.number == number
        if call.outcome in (F, N):
            # A refusal is exactly its own line, and carries its message.
            assert call.message is not None
            assert call.stderr == f"{call.message} for job {job}\n".encode()
            assert (call.outcome is N) == (call.message == INVALID_JOB_ID)
            assert (call.status, call.status_text) == (1, "1")
        else:
            assert call.message is None
        if call.outcome is S:
            assert (call.status, call.status_text, call.stderr, call.reason) == (0, "0", b"", None)
        if call.outcome is U:
            assert call.reason is not None


def test_two_hundred_ids() -> None:
    """docs/slurm-bulk.md §3.1: 200 ids, five lines (481_3 at 150 printed none and is left out)."""
    ids = [str(5000 + i) for i in range(200)]
    ids[0], ids[57], ids[123], ids[199] = "479", "999999", "480", "999998"
    del ids[150]
    stderr = (
        b"Job has already finished for job 479\nInvalid job id specified for job 999999\n"
        b"Job has already finished for job 480\nInvalid job id specified for job 999998\n"
        b"slurm_suspend error: Invalid job id specified\n"
    )
    got = read_list_call("hold", 1, ids, stderr, 1)
    expected = {j: S for j in ids}
    expected.update({"479": F, "480": F, "999999": N, "999998": N})
    assert outcomes(got) == expected
    assert got["479"].message == ALREADY_FINISHED


def test_killed_part_way() -> None:
    """docs/slurm-bulk.md §5: the printed lines keep their verdict; every silent id is unknown."""
    ids = [str(7000 + i) for i in range(200)]
    ids[5], ids[15], ids[40] = "707", "999999", "999998"
    term = read_list_call("hold", 1, ids, b"Job has already finished for job 707\n", 124)
    assert term["707"] == Call(1, 1, "1", b"Job has already finished for job 707\n", F, ALREADY_FINISHED, None)
    silent = [term[j] for j in ids if j != "707"]
    assert {(c.outcome, c.reason, c.status, c.status_text) for c in silent} == {(U, Reason.TIMED_OUT, 124, "124")}
    kill = read_list_call(
        "hold", 1, ids, b"Job has already finished for job 707\nInvalid job id specified for job 999999\n", 137
    )
    assert (kill["707"].outcome, kill["999999"].outcome) == (F, N)
    assert {kill[j].reason for j in ids if j not in ("707", "999999")} == {Reason.KILLED_BY_SIGNAL}
    # Separate arguments: each line with its own suspend line.
    argv = read_list_call(
        "hold",
        1,
        ids,
        b"Job has already finished for job 707\nslurm_suspend error: Job has already finished\n"
        b"Invalid job id specified for job 999999\nslurm_suspend error: Invalid job id specified\n",
        124,
    )
    assert (argv["707"].outcome, argv["999999"].outcome, argv["999998"].outcome) == (F, N, U)
    # Unreadable: the same.
    lost = read_list_call("requeue", 3, ["1", "2"], b"Job has already finished for job 1\n", None)
    assert (lost["1"].outcome, lost["2"].outcome, lost["2"].reason) == (F, U, Reason.UNREADABLE_STATUS)
    # Garbage in a killed call changes nothing for the ids with their own refusal.
    mixed = read_list_call("requeue", 2, ["1", "2"], b"1_2: No error\nJob is pending execution for job 1\n", 124)
    assert (mixed["1"].outcome, mixed["1"].message, mixed["2"].outcome) == (F, PENDING_EXECUTION, U)


def test_the_lines_no_id_owns_are_the_calls_once_not_each_silent_ids() -> None:
    got = read_list_call(
        "requeue", 2, ["427", "430", "431"],
        b"427_1-4: Access/permission denied\nAccess/permission denied for job 430\n", 1,
    )
    assert (got["427"].outcome, got["427"].stderr, got["427"].reason) == (U, b"", Reason.UNRECOGNISED_STDERR)
    assert (got["431"].outcome, got["431"].stderr) == (U, b"")
    assert got.unowned == b"427_1-4: Access/permission denied\n"
    assert got["430"].stderr == b"Access/permission denied for job 430\n"
    assert got["430"].message == ACCESS_DENIED


def test_the_calls_are_what_the_single_reader_builds() -> None:
    """Same status, status text, outcome, message and reason as one id's script (its stderr: its own line)."""
    stderr = b"Invalid user id for job 364\nInvalid job id specified for job 999999\nslurm_suspend error: No error\n"
    got = read_list_call("hold", 1, ["363", "364", "999999"], stderr, 1)
    for job, step in (("363", (b"", 0)), ("364", (b"Invalid user id for job 364\n", 1)),
                      ("999999", (b"Invalid job id specified for job 999999\n", 1))):
        single = read_outcome("hold", job, frame(NONCE, [(step[0], 1, step[1])]), step[1], NONCE)
        assert single.calls == (got[job],)
        assert combine_bulk("hold", job, [got[job]]) == single


def test_bad_call_arguments_are_invalid_input() -> None:
    for bad_ids in (["1", "1"], ["1", 1], [], "12", ["0"], ["1_2"], ["1,2"], [True], [" 1"]):
        with pytest.raises(InvalidInput):
            read_list_call("hold", 1, bad_ids, b"", 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        read_list_call("hold", 2, ["1"], b"", 0)
    with pytest.raises(InvalidInput):
        read_list_call("requeue", 4, ["1"], b"", 0)
    with pytest.raises(InvalidInput):
        read_list_call("cancel", 1, ["1"], b"", 0)
    with pytest.raises(InvalidInput):
        read_list_output("hold", 1, ["1", "1"], b"", 0, NONCE)
    with pytest.raises(InvalidInput):
        read_list_output("hold", 2, ["1"], b"junk", 0, NONCE)
    with pytest.raises(InvalidInput):
        unknown_list_call(1, ["1"], "timed_out")  # type: ignore[arg-type]
    assert read_list_call("hold", 1, [7, "8"], b"", 0) == read_list_call("hold", 1, ["7", "8"], b"", 0)


def test_stderr_that_is_not_bytes_and_statuses_that_are_not_ints() -> None:
    got = read_list_call("hold", 1, ["1"], "Invalid job id specified for job 1\n", 1)
    assert (got["1"].outcome, got["1"].reason, got["1"].stderr) == (U, Reason.STDERR_NOT_BYTES, b"")
    for status, text in ((True, "<bool>"), (256, "256"), (-1, "-1"), ("01", "01"), (1.0, "<float>")):
        call = read_list_call("hold", 1, ["1"], b"", status)["1"]
        assert (call.outcome, call.reason, call.status, call.status_text) == (U, Reason.UNREADABLE_STATUS, None, text)
    assert read_list_call("hold", 1, ["1"], bytearray(b""), "0")["1"].outcome is S


# --- framing -----------------------------------------------------------------------------------------


def line(number: object = 1, status: object = 1, nonce: str = NONCE) -> bytes:
    return f"\x1eDSL {nonce} call {number} {status}\n".encode()


OWN = b"Invalid job id specified for job 999999\nslurm_suspend error: No error\n"

FRAMING: List[Tuple[str, object, object, object, int, Optional[Reason]]] = [
    ("exact", OWN + line(), 1, NONCE, 1, None),
    ("exact, exit status as text", OWN + line(), "1", NONCE, 1, None),
    ("RS right after text", b"x" + line(), 1, NONCE, 1, None),
    ("requeue call 3 on its own", line(3, 0), 0, NONCE, 3, None),
    ("not bytes", "x" + line().decode(), 1, NONCE, 1, Reason.STDERR_NOT_BYTES),
    ("no nonce", OWN + line(), 1, None, 1, Reason.NONCE_INVALID),
    ("empty nonce", OWN + line(), 1, "", 1, Reason.NONCE_INVALID),
    ("no newline", OWN + line()[:-1], 1, NONCE, 1, Reason.MALFORMED_STATUS_LINE),
    ("stray RS", b"\x1e" + OWN + line(), 1, NONCE, 1, Reason.MALFORMED_STATUS_LINE),
    ("two spaces", OWN + line().replace(b" call", b"  call"), 1, NONCE, 1, Reason.MALFORMED_STATUS_LINE),
    ("bad call number", OWN + line("01"), 1, NONCE, 1, Reason.MALFORMED_STATUS_LINE),
    ("foreign nonce", OWN + line(nonce=OTHER_NONCE), 1, NONCE, 1, Reason.FOREIGN_NONCE),
    ("the same call twice", line() + line(), 1, NONCE, 1, Reason.CALL_ORDER),
    ("no status line", OWN, 1, NONCE, 1, Reason.NO_STATUS_LINE),
    ("text after", line() + b"x", 1, NONCE, 1, Reason.TEXT_AFTER_LAST_LINE),
    ("blank after", line() + b"\n", 1, NONCE, 1, Reason.TEXT_AFTER_LAST_LINE),
    ("unreadable status", OWN + line(1, "01"), "01", NONCE, 1, Reason.UNREADABLE_STATUS),
    ("status 256", OWN + line(1, 256), 256, NONCE, 1, Reason.UNREADABLE_STATUS),
    ("unreadable exit status", OWN + line(), None, NONCE, 1, Reason.UNREADABLE_EXIT_STATUS),
    ("exit status a bool", OWN + line(), True, NONCE, 1, Reason.UNREADABLE_EXIT_STATUS),
    ("exit status mismatch", OWN + line(), 0, NONCE, 1, Reason.EXIT_STATUS_MISMATCH),
    ("another call", OWN + line(2), 1, NONCE, 1, Reason.WRONG_CALLS),
    ("two calls", line(1, 0) + line(2, 0), 0, NONCE, 1, Reason.WRONG_CALLS),
]


@pytest.mark.parametrize(
    ("stderr", "exit_status", "nonce", "number", "reason"), [r[1:] for r in FRAMING], ids=[r[0] for r in FRAMING]
)
def test_framing(stderr: object, exit_status: object, nonce: object, number: int, reason: Optional[Reason]) -> None:
    own, status, got = frame_list_output(stderr, exit_status, nonce, number)
    assert got == reason
    if reason is None:
        assert isinstance(stderr, bytes)
        assert own == stderr[: stderr.index(b"\x1e")]
        assert status == int(str(exit_status))
        calls = read_list_output("hold", 1, ["7"], stderr, exit_status, nonce) if number == 1 else None
        if calls is not None:
            assert calls == read_list_call("hold", 1, ["7"], own, status)
    else:
        assert status is None
        ids = ["999999", "7"]
        many = read_list_output("hold", 1, ids, stderr, exit_status, nonce) if number == 1 else {}
        for call in many.values():
            assert (call.outcome, call.reason, call.status) == (U, reason, None)
        # The single reader says the same of the same fault.
        single = read_outcome("hold", "999999", stderr, exit_status, nonce)
        assert (single.result, single.reason) == (Result.UNKNOWN, reason)


# --- combining per id -----------------------------------------------------------------------------------


def call(number: int, outcome: CallOutcome, status: Optional[int], message: Optional[str] = None) -> Call:
    reason = Reason.UNRECOGNISED_STDERR if outcome is U else None
    return Call(number, status, "" if status is None else str(status), b"", outcome, message, reason)


def test_requeue_sends_each_id_to_the_calls_the_script_would() -> None:
    first = read_list_call(
        "requeue", 1, ["1", "2", "3", "4"],
        b"Job has already finished for job 2\nUnexpected message received for job 3\n", 1,
    )
    assert requeue_next_calls(["1", "2", "3", "4"], first) == (["1", "4"], ["1", "2", "3", "4"])
    expired = read_list_call("requeue", 1, ["1", "2"], b"", 75)
    assert requeue_next_calls(["1", "2"], expired) == ([], [])
    lost = unknown_list_call(1, ["1", "2"], Reason.OUTPUT_TOO_LARGE)
    assert requeue_next_calls(["1", "2"], lost) == ([], ["1", "2"])
    with pytest.raises(InvalidInput):
        requeue_next_calls(["1", "5"], first)


def test_combine_bulk_checks_the_shape() -> None:
    ok1, ok2, ok3 = call(1, S, 0), call(2, S, 0), call(3, S, 0)
    assert combine_bulk("requeue", "5", [ok1, ok2, ok3]).result is Result.OK
    assert combine_bulk("requeue", "5", [call(1, X, 75)]).result is Result.EXPIRED
    assert combine_bulk("requeue", "5", [call(1, F, 1, ALREADY_FINISHED), ok3]).requeue_bit is RequeueBit.CLEAR
    # An id whose call 1 is unknown with status 0 (a line with rc 0) gets call 3 only.
    zero_unknown = Call(1, 0, "0", b"", U, None, Reason.UNRECOGNISED_STDERR)
    assert bulk_calls(Op.REQUEUE, zero_unknown) == [1, 3]
    out = combine_bulk("requeue", "5", [zero_unknown, ok3])
    unsure = (Result.UNKNOWN, RequeueBit.MAY_BE_SET, Reason.UNRECOGNISED_STDERR)
    assert (out.result, out.requeue_bit, out.reason) == unsure
    for calls, reason in (
        ([], Reason.WRONG_CALLS),
        ([ok1], Reason.WRONG_CALLS),
        ([ok1, ok3], Reason.WRONG_CALLS),
        ([call(1, F, 1, ALREADY_FINISHED), ok2, ok3], Reason.WRONG_CALLS),
        ([call(1, X, 75), ok3], Reason.WRONG_CALLS),
        ([ok1, ok3, ok2], Reason.CALL_ORDER),
        ([ok2, ok3], Reason.WRONG_CALLS),
    ):
        out = combine_bulk("requeue", "5", calls)
        assert (out.result, out.requeue_bit, out.reason) == (Result.UNKNOWN, RequeueBit.MAY_BE_SET, reason)
    assert combine_bulk("hold", "5", [ok1, ok2]).reason is Reason.WRONG_CALLS
    assert combine_bulk("restore", "5", [call(1, N, 1, INVALID_JOB_ID)]).result is Result.OK
    with pytest.raises(InvalidInput):
        combine_bulk("hold", "5", [object()])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        combine_bulk("hold", "05", [ok1])


# --- chunks ------------------------------------------------------------------------------------------


def test_chunks() -> None:
    assert plan_chunks([], max_ids=5) == []
    assert plan_chunks(["3", 1, "3", "2", 1], max_ids=2) == [["3", "1"], ["2"]]
    # "JobId=1,22,333" is 14 bytes, "JobId=1,22,333,4" 16.
    assert plan_chunks(["1", "22", "333", "4"], max_ids=10, max_arg_bytes=16) == [["1", "22", "333", "4"]]
    assert plan_chunks(["1", "22", "333", "45"], max_ids=10, max_arg_bytes=16) == [["1", "22", "333"], ["45"]]
    assert plan_chunks(["1", "22", "333", "4"], max_ids=3) == [["1", "22", "333"], ["4"]]
    widest = ["4294967294", "4294967293"]
    assert plan_chunks(widest, max_ids=10, max_arg_bytes=16) == [["4294967294"], ["4294967293"]]
    big = [str(1000000 + i) for i in range(40000)]
    chunks = plan_chunks(big, max_ids=100000)
    assert [j for c in chunks for j in c] == big
    assert all(len("JobId=" + ",".join(c)) <= MAX_ARG_BYTES for c in chunks)
    assert len(chunks[0]) == 16383  # docs/slurm-bulk.md §1: ~16,383 seven-digit ids per argument
    for bad in ({"max_ids": 0}, {"max_ids": True}, {"max_ids": 1, "max_arg_bytes": 15},
                {"max_ids": 1, "max_arg_bytes": MAX_ARG_BYTES + 1}, {"max_ids": 1.5}):
        with pytest.raises(InvalidInput):
            plan_chunks(["1"], **bad)
    for bad_ids in ("12", ["1", "x"], ["1 2"], [0]):
        with pytest.raises(InvalidInput):
            plan_chunks(bad_ids, max_ids=5)


@given(
    ids=st.lists(st.integers(min_value=1, max_value=4294967294), max_size=60),
    max_ids=st.integers(min_value=1, max_value=8),
    room=st.integers(min_value=16, max_value=60),
)
def test_chunks_keep_every_id_once_in_order(ids: List[int], max_ids: int, room: int) -> None:
    chunks = plan_chunks(ids, max_ids=max_ids, max_arg_bytes=room)
    distinct = list(dict.fromkeys(str(i) for i in ids))
    assert [j for c in chunks for j in c] == distinct
    for c in chunks:
        assert 1 <= len(c) <= max_ids
        assert len(("JobId=" + ",".join(c)).encode()) <= room
    for c, after in zip(chunks, chunks[1:]):  # greedy: the next id did not fit
        assert len(c) == max_ids or len("JobId=" + ",".join([*c, after[0]])) > room


# --- never surer than one id alone (hypothesis) -----------------------------------------------------------

SUSPEND_OPS = (Op.HOLD, Op.RELEASE)
TIMED_OUT = 124


@dataclass(frozen=True)
class Fate:
    """What happened to a whole list call: done (0 or 1), expired (75), stopped at ``cut`` with
    ``status`` (124, 137, 143), or framed with an unreadable status; or done but exiting with a
    ``status`` scontrol never exits with (``failed``: 2-74, 76-123), with a last line torn (no
    newline) naming the id at ``cut``, or with a ``stray`` line for an id not in the call."""

    kind: str
    status: int = 0
    cut: int = 0


@dataclass(frozen=True)
class Style:
    """How the suspend line reads: one per argument (``argv``) or one at the end of the comma list,
    ``22.05`` (``: <text>``, ``No error`` for errno 0) or ``25.05`` (``:<text>``, bare for errno 0)."""

    argv: bool
    new: bool

    def suspend(self, errno_text: Optional[str]) -> bytes:
        if errno_text is None:
            return b"slurm_suspend error\n" if self.new else b"slurm_suspend error: No error\n"
        return f"slurm_suspend error:{'' if self.new else ' '}{errno_text}\n".encode()


Behaviour = Optional[str]  # None: the RPC succeeded; else the message of its line
DONE = Fate("done")


def fates(size: int) -> st.SearchStrategy[Fate]:
    return st.one_of(
        st.just(DONE),
        st.just(DONE),
        st.just(Fate("expired", 75)),
        st.builds(Fate, st.just("killed"), st.sampled_from([124, 137, 143]), st.integers(0, size)),
        st.just(Fate("unreadable")),
        st.builds(Fate, st.just("failed"), st.sampled_from([2, 3, 74, 76, 100, 123])),
        st.builds(Fate, st.just("torn"), st.just(1), st.integers(0, max(size - 1, 0))),
        st.just(Fate("stray", 1)),
    )


STRAY = b"Invalid job id specified for job 4242424\n"  # no id of ID_LISTS


def torn_line(job: str) -> bytes:
    return f"{ALREADY_FINISHED} for job {job}".encode()


def behaviours(op: Op, number: int) -> st.SearchStrategy[Behaviour]:
    return st.sampled_from([None, UNEXPECTED, *sorted(ALLOWED[(op, number)])])


def list_output(op: Op, number: int, ids: Sequence[str], beh: Mapping[str, Behaviour], fate: Fate,
                style: Style) -> Tuple[bytes, object]:
    """What real scontrol prints for the list, framed as its one-call script (docs/slurm-bulk.md §2, §5)."""
    if fate.kind == "expired":
        return line(number, 75), 75
    printed = ids[: fate.cut] if fate.kind == "killed" else ids
    out: List[bytes] = []
    for job in printed:
        message = beh[job]
        if message is None:
            continue
        out.append(f"{message} for job {job}\n".encode())
        if op in SUSPEND_OPS and style.argv:
            out.append(style.suspend(message))
    failed = any(beh[j] is not None for j in ids)
    if op in SUSPEND_OPS and not style.argv and failed and fate.kind != "killed":
        out.append(style.suspend(beh[ids[-1]]))  # the errno of the argument's last RPC
    if fate.kind == "killed":
        return b"".join(out) + line(number, fate.status), fate.status
    if fate.kind == "unreadable":
        return b"".join(out) + line(number, "01"), "01"
    if fate.kind == "failed":
        return b"".join(out) + line(number, fate.status), fate.status
    if fate.kind == "torn":
        return b"".join(out) + torn_line(ids[fate.cut]) + line(number, 1), 1
    if fate.kind == "stray":
        return STRAY + b"".join(out) + line(number, 1), 1
    status = 1 if failed else 0
    return b"".join(out) + line(number, status), status


def single_step(op: Op, job: str, message: Behaviour, fate: Fate, position: Optional[int],
                style: Style, unreadable: Union[int, str] = "01",
                call_ids: Sequence[str] = ()) -> Tuple[bytes, Union[int, str]]:
    """That id's own call in its single script, with the same behaviour (``position``: its place
    in the list call, None when it was in none).  An unreadable list status is ``unreadable`` for
    the id: "01" where the single script ends there; for a requeue, whose list calls are framed
    one by one, a readable unknown status (124) so that its script goes on as the bulk flow does
    (the single reader drops a whole script for one unreadable status, docs/contract.md §6).

    The id's own evidence, read apart from the list rules: a status scontrol never exits with is
    the id's status too; a torn last line naming the id is a line of its own (the single reader
    sees two lines for it); a line for another id is in a silent id's stderr, and in the one
    id's of a call on that id alone (``call_ids``: the call's ids)."""
    if position is not None and fate.kind == "expired":
        return b"", 75
    if position is not None and fate.kind == "unreadable":
        return b"", unreadable
    if position is not None and fate.kind == "killed" and position >= fate.cut:
        return b"", fate.status
    extra = b""
    if position is not None and fate.kind == "torn" and call_ids[fate.cut] == job:
        extra = torn_line(job)
    if position is not None and fate.kind == "stray" and (message is None or len(call_ids) == 1):
        extra = STRAY
    failed = fate.status if position is not None and fate.kind == "failed" else 1
    if message is None:
        return (extra, 1) if extra else (b"", 0 if failed == 1 else failed)
    own = f"{message} for job {job}\n".encode()
    if op in SUSPEND_OPS:
        own += style.suspend(message)
    return own + extra, failed


def projection(out: Outcome) -> object:
    return (
        out.result,
        out.requeue_bit,
        out.reason,
        out.exit_status,
        [(c.number, c.status, c.status_text, c.outcome, c.message, c.reason) for c in out.calls],
    )


def never_surer(bulk: Outcome, single: Outcome, exact: bool) -> None:
    """Never surer than the single reading; with nothing lost (no call stopped part-way), equal."""
    assert (bulk.op, bulk.job_id) == (single.op, single.job_id)
    if exact:
        assert projection(bulk) == projection(single)
    else:
        # The result is the single one's or unknown; the bit the single one's or may_be_set.
        assert bulk.result in (single.result, Result.UNKNOWN)
        assert bulk.requeue_bit in (single.requeue_bit, RequeueBit.MAY_BE_SET)
        if bulk.result is not single.result or bulk.requeue_bit is not single.requeue_bit:
            assert bulk.reason is not None
    # Call by call too: each of the bulk's calls says what the single one says, or unknown.
    theirs = {c.number: c for c in single.calls}
    for mine in bulk.calls:
        if mine.number in theirs and mine.outcome is not theirs[mine.number].outcome:
            assert mine.outcome is CallOutcome.UNKNOWN


# Fates after which every id's reading is exactly its single op's: nothing was lost or torn.
EXACT = ("done", "expired", "failed", "stray")
ID_LISTS = st.lists(st.integers(min_value=1, max_value=99999), min_size=1, max_size=7, unique=True).map(
    lambda xs: [str(x) for x in xs]
)
STYLES = st.builds(Style, st.booleans(), st.booleans())


@settings(max_examples=examples(1500), suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from([Op.HOLD, Op.RELEASE, Op.RESTORE]), ids=ID_LISTS, data=st.data(), style=STYLES)
def test_a_one_call_list_is_never_surer_than_each_id_alone(
    op: Op, ids: List[str], data: st.DataObject, style: Style
) -> None:
    beh = {j: data.draw(behaviours(op, 1)) for j in ids}
    fate = data.draw(fates(len(ids)))
    stderr, exit_status = list_output(op, 1, ids, beh, fate, style)
    calls = read_list_output(op, 1, ids, stderr, exit_status, NONCE)
    assert list(calls) == ids
    for position, job in enumerate(ids):
        own, status = single_step(op, job, beh[job], fate, position, style, call_ids=ids)
        single = read_outcome(op, job, frame(NONCE, [(own, 1, status)]), status, NONCE)
        never_surer(combine_bulk(op, job, [calls[job]]), single, exact=fate.kind in EXACT)


@settings(max_examples=examples(1500), suppress_health_check=[HealthCheck.too_slow])
@given(ids=ID_LISTS, data=st.data())
def test_a_bulk_requeue_is_never_surer_than_each_requeue_alone(ids: List[str], data: st.DataObject) -> None:
    op, style = Op.REQUEUE, Style(argv=False, new=False)
    beh = [{j: data.draw(behaviours(op, n)) for j in ids} for n in (1, 2, 3)]
    f1 = data.draw(fates(len(ids)))
    first = read_list_output(op, 1, ids, *list_output(op, 1, ids, beh[0], f1, style), NONCE)
    second_ids, third_ids = requeue_next_calls(ids, first)
    f2 = data.draw(fates(len(second_ids)))
    f3 = data.draw(fates(len(third_ids)))
    second = read_list_output(op, 2, second_ids, *list_output(op, 2, second_ids, beh[1], f2, style), NONCE) \
        if second_ids else {}
    third = read_list_output(op, 3, third_ids, *list_output(op, 3, third_ids, beh[2], f3, style), NONCE) \
        if third_ids else {}
    exact = all(f.kind in EXACT for f in (f1, f2, f3))
    for position, job in enumerate(ids):
        own_calls = [c for c in (first[job], second.get(job), third.get(job)) if c is not None]
        bulk = combine_bulk(op, job, own_calls)
        # That id's single script: call 2 only after 0, call 3 unless 75 (docs/contract.md §2).
        steps: List[Tuple[bytes, int, Union[int, str]]] = []
        own, s1 = single_step(op, job, beh[0][job], f1, position, style, TIMED_OUT, ids)
        steps.append((own, 1, s1))
        if s1 == 0:
            at = second_ids.index(job) if job in second_ids else None
            own, s2 = single_step(op, job, beh[1][job], f2 if at is not None else DONE, at, style, TIMED_OUT,
                                  second_ids)
            steps.append((own, 2, s2))
        if s1 != 75:
            at = third_ids.index(job) if job in third_ids else None
            own, s3 = single_step(op, job, beh[2][job], f3 if at is not None else DONE, at, style, TIMED_OUT,
                                  third_ids)
            steps.append((own, 3, s3))
        single = read_outcome(op, job, frame(NONCE, steps), steps[-1][2], NONCE)
        never_surer(bulk, single, exact=exact)
        if bulk.requeue_bit is RequeueBit.CLEAR:
            assert single.requeue_bit is RequeueBit.CLEAR


# --- any bytes: a value, never an exception, and ok only with exact evidence ------------------------------

CALL_KEYS = sorted(ALLOWED, key=lambda k: (k[0].value, k[1]))
FRAGMENTS = st.sampled_from(
    [
        b"\n", b"\r", b" ", b"\x1e", b"1", b"12", b"0", b"_", b":", b"slurm_suspend error", b"slurm_suspend error:",
        b" for job ", b"for job 1", b" for job 12\n", b"Invalid job id specified", b"Job has already finished",
        INVALID_USER_ID.encode(), DISABLED.encode(), UNEXPECTED.encode(), b"No error", b"12_1-3: ", b"\xff",
    ]
)
STDERR = st.one_of(st.binary(max_size=200), st.lists(FRAGMENTS, max_size=40).map(b"".join))
STATUS = st.one_of(
    st.integers(min_value=-5, max_value=300), st.none(), st.booleans(), st.text(max_size=4), st.floats(),
    st.sampled_from(["0", "1", "75", "124", "01"]),
)
_LINE_IDS = ("1", "12", "123")


def evidence_of_success(op: Op, number: int, job: str, stderr: bytes, status: object) -> bool:
    """An independent reading of docs/contract.md §11 for an id read as SUCCESS."""
    code: Optional[int] = None
    if isinstance(status, int) and not isinstance(status, bool) and 0 <= status <= 255:
        code = status
    elif isinstance(status, str) and re.fullmatch(r"0|[1-9][0-9]{0,2}", status, re.ASCII) and int(status) <= 255:
        code = int(status)
    lines = stderr.split(b"\n")
    if lines[-1].strip(b" \t\n\r\x0b\x0c"):
        return False
    text = [ln for ln in lines[:-1] if ln.strip(b" \t\n\r\x0b\x0c")]
    if code == 0:
        return not text
    if code != 1:  # scontrol exits 0 or 1 by itself; anything else leaves a silent id unknown
        return False
    allowed = ALLOWED[(op, number)] | {UNEXPECTED}
    owners: List[str] = []
    for ln in text:
        if op in SUSPEND_OPS and (ln == b"slurm_suspend error" or ln.startswith(b"slurm_suspend error:")):
            continue
        good = [j for j in _LINE_IDS for m in allowed if ln == f"{m} for job {j}".encode()]
        if not good:
            return False
        owners += good
    return bool(owners) and job not in owners and len(owners) == len(set(owners))


@settings(max_examples=examples(3000), suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(CALL_KEYS), stderr=STDERR, status=STATUS)
def test_any_bytes_give_a_call_per_id_and_success_only_on_exact_evidence(
    key: Tuple[Op, int], stderr: bytes, status: object
) -> None:
    op, number = key
    calls = read_list_call(op, number, list(_LINE_IDS), stderr, status)
    assert list(calls) == list(_LINE_IDS)
    for job, got in calls.items():
        assert got.number == number and isinstance(got.stderr, bytes)
        assert (got.outcome is U) == (got.reason is not None)
        if got.outcome is S:
            assert evidence_of_success(op, number, job, stderr, status)
            assert (got.status, got.status_text, got.stderr) == (0, "0", b"")
        if got.outcome in (F, N):
            assert got.message in ALLOWED[(op, number)]
            assert got.stderr == f"{got.message} for job {job}\n".encode()


@settings(max_examples=examples(2000), suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.sampled_from([k for k in CALL_KEYS if k[0] is not Op.OPEN]),
    stderr=st.one_of(STDERR, st.lists(st.sampled_from([b"\x1eDSL ", NONCE.encode(), b" call ", b"1", b" ", b"0",
                                                       b"\n", b"Job has already finished for job 1\n"]),
                                      max_size=20).map(b"".join)),
    exit_status=STATUS,
    nonce=st.one_of(st.just(NONCE), st.none(), st.text(max_size=3)),
)
def test_framed_output_never_raises_and_is_never_surer_than_its_framing(
    key: Tuple[Op, int], stderr: bytes, exit_status: object, nonce: object
) -> None:
    op, number = key
    own, status, reason = frame_list_output(stderr, exit_status, nonce, number)
    calls = read_list_output(op, number, list(_LINE_IDS), stderr, exit_status, nonce)
    if reason is not None:
        assert all(c.outcome is U and c.reason is reason for c in calls.values())
        return
    assert stderr == own + line(number, status, NONCE) and nonce == NONCE
    assert parse_exit(exit_status) == status


def parse_exit(raw: object) -> Optional[int]:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    assert isinstance(raw, str)
    return int(raw)


# --- issue 16: statuses scontrol never exits with, torn lines, one id, bounded output ---------------------


@pytest.mark.parametrize("status", [2, 3, 74, 76, 100, 123])
def test_silent_ids_of_a_call_that_exited_neither_0_nor_1_are_unknown(status: int) -> None:
    got = read_list_call("hold", 1, ["5", "6"], b"Invalid job id specified for job 6\n", status)
    assert (got["5"].outcome, got["5"].reason, got["5"].status) == (U, Reason.UNRECOGNISED_STDERR, status)
    assert (got["6"].outcome, got["6"].status) == (N, status)  # its own line says it, as for one id


def test_a_requeue_whose_call_3_exits_2_leaves_a_silent_ids_bit_may_be_set() -> None:
    ids = ["5", "6"]
    first = read_list_call("requeue", 1, ids, b"", 0)
    second = read_list_call("requeue", 2, ids, b"", 0)
    third = read_list_call("requeue", 3, ids, b"Invalid job id specified for job 6\n", 2)
    bulk = combine_bulk("requeue", "5", [first["5"], second["5"], third["5"]])
    single = read_outcome("requeue", "5", frame(NONCE, [(b"", 1, 0), (b"", 2, 0), (b"", 3, 2)]), 2, NONCE)
    assert (bulk.result, bulk.requeue_bit) == (single.result, single.requeue_bit)
    assert (bulk.result, bulk.requeue_bit) == (Result.UNKNOWN, RequeueBit.MAY_BE_SET)


TORN = b"Invalid job id specified for job 12\nJob has already finished for job 12"


@pytest.mark.parametrize("ids", [["12"], ["12", "13"], ["13", "12", "14"]], ids=str)
def test_a_torn_last_line_leaves_no_id_sure(ids: List[str]) -> None:
    """The last line has no newline: it may be any id's line cut short, here one naming an id
    that has a complete line too (docs/contract.md §11, decision 4)."""
    got = read_list_output("restore", 1, ids, TORN + line(1, 1), 1, NONCE)
    assert all(c.outcome is U for c in got.values())
    single = read_outcome("restore", "12", TORN + line(1, 1), 1, NONCE)
    assert single.result is Result.UNKNOWN
    if ids == ["12"]:
        assert combine_bulk("restore", "12", [got["12"]]) == single


ONE_ID_CASES = [
    # A suspend line with another message: ignored in a list, not for one id (docs/contract.md §5).
    ("hold", b"Invalid job id specified for job 5\nslurm_suspend error: No error\n", 1),
    # Another id's line beside the id's own.
    ("hold", b"Invalid job id specified for job 5\nInvalid job id specified for job 6\n", 1),
    ("requeue", b"Job is pending execution for job 5\n7_1-3: Job is pending execution\n", 1),
    # A line printed before a stop: the stop makes one id's call unknown.
    ("release", b"Job has already finished for job 5\n", 124),
    ("restore", b"Invalid job id specified for job 5\n", 137),
]


@pytest.mark.parametrize(("op", "own", "status"), ONE_ID_CASES)
def test_a_call_on_one_id_reads_as_that_ids_single_op(op: str, own: bytes, status: int) -> None:
    number = 2 if op in ("requeue", "requeuehold") else 1
    got = read_list_output(op, number, ["5"], own + line(number, status), status, NONCE)
    assert got["5"].outcome is U
    if op not in ("requeue", "requeuehold"):
        single = read_outcome(op, "5", own + line(1, status), status, NONCE)
        assert combine_bulk(op, "5", [got["5"]]) == single


# One id, any bytes: its chunk's result is the single reader's (docs/contract.md §11, "one id is a single op").
ANY_NONCE = st.one_of(st.just(NONCE), st.just(NONCE), st.just(OTHER_NONCE), st.none(), st.text(max_size=3))
ANY_OUTPUT = st.one_of(
    st.builds(lambda own, n, s: own + line(n, s), STDERR, st.sampled_from([1, 1, 1, 2]),
              st.one_of(st.integers(0, 300), st.sampled_from(["01", "-1", "x", ""]))),
    STDERR,
    st.builds(lambda a, b: a + b, STDERR, STDERR),
)


@settings(max_examples=examples(3000), suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from([Op.HOLD, Op.RELEASE, Op.RESTORE]), stderr=ANY_OUTPUT, exit_status=STATUS,
       nonce=ANY_NONCE, job=st.sampled_from(["1", "5", "12", "123"]))
def test_a_one_id_chunk_of_a_one_call_op_is_its_single_op(
    op: Op, stderr: bytes, exit_status: object, nonce: object, job: str
) -> None:
    bulk = combine_bulk(op, job, [read_list_output(op, 1, [job], stderr, exit_status, nonce)[job]])
    single = read_outcome(op, job, stderr, exit_status, nonce)
    assert (bulk.result, bulk.requeue_bit, bulk.reason) == (single.result, single.requeue_bit, single.reason)
    if not {single.reason} & FRAMING_FAULTS:  # framed exactly: the same call too
        assert projection(bulk) == projection(single)


FRAMING_FAULTS = {Reason.STDERR_NOT_BYTES, Reason.NONCE_INVALID, Reason.NO_STATUS_LINE, Reason.MALFORMED_STATUS_LINE,
                  Reason.FOREIGN_NONCE, Reason.CALL_ORDER, Reason.UNREADABLE_STATUS, Reason.TEXT_AFTER_LAST_LINE,
                  Reason.UNREADABLE_EXIT_STATUS, Reason.EXIT_STATUS_MISMATCH, Reason.WRONG_CALLS}


OWN_TEXT = st.one_of(st.lists(FRAGMENTS.filter(lambda f: b"\x1e" not in f), max_size=12).map(b"".join),
                st.binary(max_size=60).map(lambda b: b.replace(b"\x1e", b"")))
READABLE = st.one_of(st.sampled_from([0, 0, 1, 1, 75, 124, 125, 126, 127, 137, 2]), st.integers(0, 255))


@settings(max_examples=examples(2000), suppress_health_check=[HealthCheck.too_slow])
@given(job=st.sampled_from(["1", "5", "12"]), own=st.tuples(OWN_TEXT, OWN_TEXT, OWN_TEXT),
       status=st.tuples(READABLE, READABLE, READABLE))
def test_a_one_id_requeue_flow_is_its_single_script(job: str, own: Tuple[bytes, bytes, bytes],
                                                    status: Tuple[int, int, int]) -> None:
    """The flow's calls, each framed in a list script of its own, give what the single reader
    gives for the one script that holds them (calls 2 and 3 only where the script runs them)."""
    first = read_list_output("requeue", 1, [job], own[0] + line(1, status[0]), status[0], NONCE)
    second_ids, third_ids = requeue_next_calls([job], first)
    calls = [first[job]]
    steps = [(own[0], 1, status[0])]
    if second_ids:
        calls.append(read_list_output("requeue", 2, [job], own[1] + line(2, status[1]), status[1], NONCE)[job])
        steps.append((own[1], 2, status[1]))
    if third_ids:
        calls.append(read_list_output("requeue", 3, [job], own[2] + line(3, status[2]), status[2], NONCE)[job])
        steps.append((own[2], 3, status[2]))
    single = read_outcome("requeue", job, frame(NONCE, steps), steps[-1][2], NONCE)
    assert projection(combine_bulk("requeue", job, calls)) == projection(single)


def test_a_thousand_ids_and_a_mebibyte_no_id_owns_stay_linear() -> None:
    """docs/contract.md §11, bounded output: the text is the call's (``unowned``), once."""
    ids = [str(n) for n in range(1000, 2000)]
    junk = b"scontrol: error: a line no job owns\n" * ((1 << 20) // 36)
    for status, stderr in ((1, junk + b"Invalid job id specified for job 1500\n"), (124, junk), (125, junk)):
        got = read_list_call("hold", 1, ids, stderr, status)
        assert sum(len(c.stderr) for c in got.values()) < 1024
        assert len(got.unowned) <= len(stderr)
        rows = "".join(json.dumps(combine_bulk("hold", j, [c]).to_json()) for j, c in got.items())
        assert len(rows) < 2 * (len(stderr) - len(junk) + 1024 * len(ids))
    framed = read_list_output("hold", 1, ids, junk + line(1, "x"), "x", NONCE)  # a framing fault
    assert framed.unowned == junk + line(1, "x") and all(c.stderr == b"" for c in framed.values())
