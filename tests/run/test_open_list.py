"""docs/contract.md §6, §11: ``open`` on several ids is one direct ``scontrol release <list>``, no
script and no status line, read per id by the list rules (``bulk_reader.read_open_list``).

The expected answers are built here from the contract's words: what real scontrol prints for a
release list (docs/slurm-bulk.md §2: one ``<message> for job <id>`` line per refused id, a
``slurm_suspend error`` line after them, exit 1 if any id failed) and each id's own single call,
read by ``read_outcome``.  A list of one id must read exactly as the single reader reads the same
bytes; a longer one never surer than each id alone, and the same when nothing cut it short.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Mapping, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_dsl import InvalidInput, Op, Result
from slurm_dsl.core.bulk_reader import UNEXPECTED, combine_bulk, read_open_list
from slurm_dsl.core.model import CallOutcome, Outcome
from slurm_dsl.core.reader import read_outcome
from tests.examples import examples
from tests.ground import ACCESS_DENIED, ALREADY_FINISHED, INVALID_JOB_ID, INVALID_USER_ID

OPEN = Op.OPEN
MESSAGES = [UNEXPECTED, ACCESS_DENIED, ALREADY_FINISHED, INVALID_JOB_ID, INVALID_USER_ID]
STOPPED = (137, 143)  # the runner's KILL, or its TERM at the deadline: scontrol's own death


@dataclass(frozen=True)
class Fate:
    """The whole call: done; expired (75, never started); stopped after ``cut`` ids (a signal);
    or a started scontrol's own 75/126/127, which the caller has made 125 (docs/contract.md §4)."""

    kind: str
    status: int = 0
    cut: int = 0


def fates(size: int) -> st.SearchStrategy[Fate]:
    return st.one_of(
        st.just(Fate("done")),
        st.just(Fate("expired", 75)),
        st.builds(Fate, st.just("stopped"), st.sampled_from(STOPPED), st.integers(0, size)),
        st.just(Fate("wrapper", 125)),
    )


def suspend(message: Optional[str], new: bool) -> bytes:
    """scontrol's suspend line (22.05 ``: <text>``, ``No error``; 25.05+ ``:<text>``, bare)."""
    if message is None:
        return b"slurm_suspend error\n" if new else b"slurm_suspend error: No error\n"
    return f"slurm_suspend error:{'' if new else ' '}{message}\n".encode()


def list_output(ids: List[str], beh: Mapping[str, Optional[str]], fate: Fate, new: bool) -> Tuple[bytes, int]:
    if fate.kind == "expired":
        return b"", 75
    printed = ids[: fate.cut] if fate.kind == "stopped" else ids
    lines = [f"{beh[j]} for job {j}\n".encode() for j in printed if beh[j] is not None]
    failed = any(beh[j] is not None for j in ids)
    if fate.kind == "stopped":
        return b"".join(lines), fate.status
    if failed:
        lines.append(suspend(beh[ids[-1]], new))  # the errno of the argument's last RPC
    if fate.kind == "wrapper":
        return b"".join(lines), 125
    return b"".join(lines), 1 if failed else 0


def single_output(job: str, message: Optional[str], fate: Fate, position: int, new: bool) -> Tuple[bytes, int]:
    """That id's own `scontrol release <id>` with the same behaviour."""
    if fate.kind in ("expired", "wrapper"):
        return b"", fate.status
    if fate.kind == "stopped" and position >= fate.cut:
        return b"", fate.status
    if message is None:
        return b"", 0
    return f"{message} for job {job}\n".encode() + suspend(message, new), 1


def projection(out: Outcome) -> object:
    return (out.result, out.reason, out.exit_status,
            [(c.number, c.status, c.status_text, c.stderr, c.outcome, c.message, c.reason) for c in out.calls])


IDS = st.lists(st.integers(min_value=1, max_value=99999), min_size=2, max_size=7, unique=True).map(
    lambda xs: [str(x) for x in xs]
)


@settings(max_examples=examples(1500), suppress_health_check=[HealthCheck.too_slow])
@given(ids=IDS, data=st.data(), new=st.booleans())
def test_several_ids_are_never_surer_than_each_alone(ids: List[str], data: st.DataObject, new: bool) -> None:
    beh = {j: data.draw(st.sampled_from([None, *MESSAGES])) for j in ids}
    fate = data.draw(fates(len(ids)))
    calls = read_open_list(ids, *list_output(ids, beh, fate, new))
    assert list(calls) == ids
    for position, job in enumerate(ids):
        bulk = combine_bulk(OPEN, job, [calls[job]])
        single = read_outcome(OPEN, job, *single_output(job, beh[job], fate, position, new))
        if fate.kind != "stopped":
            assert (bulk.result, bulk.reason) == (single.result, single.reason), (job, bulk, single)
        else:
            assert bulk.result in (single.result, Result.UNKNOWN)
            # An id with its own printed line keeps it (lines are never torn); a silent one is unknown.
            if position >= fate.cut or beh[job] is None:
                assert bulk.result is Result.UNKNOWN


STDERR = st.one_of(
    st.binary(max_size=120),
    st.lists(st.sampled_from([b"\n", b" ", b"\r", b"7", b"8", b" for job ", b"slurm_suspend error", b": ",
                              *(m.encode() for m in MESSAGES)]), max_size=12).map(b"".join),
)
STATUS = st.one_of(st.integers(min_value=-3, max_value=260), st.sampled_from(["0", "1", "01", ""]), st.none())


@settings(max_examples=examples(2000), suppress_health_check=[HealthCheck.too_slow])
@given(stderr=STDERR, status=STATUS)
def test_one_id_reads_exactly_as_the_single_reader(stderr: bytes, status: object) -> None:
    # docs/contract.md §11: a chunk of one id is that op's own call, read as the single reader reads
    # the same bytes, even where the list rules would read more into them (a suspend line).
    call = read_open_list(["7"], stderr, status)["7"]
    bulk = combine_bulk(OPEN, "7", [call])
    single = read_outcome(OPEN, "7", stderr, status)
    if single.calls:
        assert projection(bulk) == projection(single)
    else:  # unreadable as a whole: unknown for the same reason
        assert (bulk.result, bulk.reason, call.outcome) == (Result.UNKNOWN, single.reason, CallOutcome.UNKNOWN)


def test_suspend_lines_of_one_id_read_as_the_single_reader_reads_them() -> None:
    # One id: the single reader's rule (a suspend line needs a refusal line of the first form).
    alone = read_open_list(["7"], b"slurm_suspend error: Job has already finished\n", 1)["7"]
    assert alone.outcome is CallOutcome.UNKNOWN
    refused = read_open_list(["7"], b"Job has already finished for job 7\nslurm_suspend error: "
                                    b"Job has already finished\n", 1)["7"]
    assert (refused.outcome, refused.message) == (CallOutcome.REJECTED, ALREADY_FINISHED)
    # Another message on the suspend line: the list rules would ignore it; one id alone may not.
    mixed = b"Job has already finished for job 7\nslurm_suspend error: Invalid job id specified\n"
    assert read_open_list(["7"], mixed, 1)["7"].outcome is CallOutcome.UNKNOWN
    assert read_open_list(["7", "8"], mixed, 1)["7"].outcome is CallOutcome.REJECTED


@pytest.mark.parametrize("bad", [[], ["7", "7"], ["0"], "7"])
def test_bad_ids_are_invalid_input(bad: object) -> None:
    with pytest.raises(InvalidInput):
        read_open_list(bad, b"", 0)  # type: ignore[arg-type]
