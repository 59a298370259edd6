"""squeue_lookup.py: the strict squeue parser, SqueueLookup's calls and error paths, the version probe.

squeue's happy paths and the forged-name job run against the real lab in
tests/integration/test_lookup_live.py; here squeue is a canned ``Completed`` so
that every failure real Slurm shows (docs/slurm-behaviour.md §4, §6, §9) and those it
cannot be made to show (timeouts, truncation, garbage) are covered.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import InvalidInput, LookupFailed
from slurm_dsl.host.binaries import find_squeue
from slurm_dsl.host.process import Completed
from slurm_dsl.lookups import choose as lookup_choice
from slurm_dsl.lookups import squeue as squeue_lookup
from slurm_dsl.lookups.squeue import (
    SqueueLookup,
    parse_slurm_version,
    parse_squeue,
    slurm_version,
    squeue_format,
)

NONCE = "0123456789abcdef0123456789abcdef"
OTHER_NONCE = "fedcba9876543210fedcba9876543210"
# docs/slurm-behaviour.md §4, §9, byte for byte.
GONE = b"slurm_load_jobs error: Invalid job id specified\n"
DOWN = b"slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
BAD_FORMAT = b"squeue: error: Invalid job format specification: Reason\n"


def line(*fields: str, nonce: str = NONCE, array: Tuple[str, str] = ("", "N/A")) -> bytes:
    """A record ``JobID|ArrayJobID|ArrayTaskID|State|...`` from ``JobID, State, ...``: a plain
    job (its ArrayJobID is its own JobID, ArrayTaskID N/A) unless ``array`` gives the two."""
    array_id, task = array
    job = fields[0] if fields else ""
    return ("|".join((job, array_id or job, task, *fields[1:])) + "|" + nonce + "\n").encode()


# What squeue 22.05.8 printed on the lab for an array (tasks 12, 13 and 9), a job
# named 'x Requeue=1 Restarts=9' held by its user, and a --requeue job.
LAB_OUTPUT = (
    line("14", "PENDING", "0", "0", "0", "JobHeldUser")
    + line("10", "PENDING", "0", "0", "0", "JobHeldUser")
    + line("12", "RUNNING", "0", "0", "4294901754", "None")
    + line("13", "RUNNING", "0", "0", "4294901754", "None")
    + line("9", "RUNNING", "0", "0", "4294901754", "None")
    + line("11", "RUNNING", "1", "0", "4294901753", "None")
)


# --- JobInfo ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "finished"),
    [
        ("COMPLETED", True),
        ("FAILED", True),
        ("CANCELLED", True),
        ("TIMEOUT", True),
        ("NODE_FAIL", True),
        ("PREEMPTED", True),
        ("BOOT_FAIL", True),
        ("DEADLINE", True),
        ("OUT_OF_MEMORY", True),
        # A requeue passes through COMPLETING (docs/slurm-behaviour.md §5): not over.
        ("COMPLETING", False),
        # requeuehold State=SpecialExit: a held job that may run again (docs/slurm-behaviour.md §5).
        ("SPECIAL_EXIT", False),
        ("PENDING", False),
        ("RUNNING", False),
        ("SUSPENDED", False),
        ("REQUEUED", False),
        ("REQUEUE_HOLD", False),
        ("RESIZING", False),
        ("STAGE_OUT", False),
        ("CONFIGURING", False),
        ("SOMETHING_NEW", False),
    ],
)
def test_finished_means_the_bit_can_no_longer_matter(state: str, finished: bool) -> None:
    assert JobInfo("5", state, True, 0, 1, "None").finished is finished


def test_lookup_failed_carries_its_reason_under_the_error_root() -> None:
    from slurm_dsl import DSLError

    exc = LookupFailed("slurmctld unreachable")
    assert isinstance(exc, DSLError)
    assert exc.reason == "slurmctld unreachable"
    assert "slurmctld unreachable" in str(exc)


# --- parse_squeue ------------------------------------------------------------


def test_format_names_each_field_and_ends_records_with_the_nonce() -> None:
    assert squeue_format(NONCE) == (
        "JobID:|,ArrayJobID:|,ArrayTaskID:|,State:|,Requeue:|,RestartCnt:|,PriorityLong:|,Reason:|" + NONCE
    )


@pytest.mark.parametrize("nonce", ["", "abc", NONCE.upper(), NONCE[:-1] + "g", NONCE + ",x", NONCE + "\n"])
def test_format_refuses_a_nonce_that_is_not_long_lowercase_hex(nonce: str) -> None:
    with pytest.raises(ValueError):
        squeue_format(nonce)


def test_parses_what_the_lab_printed() -> None:
    found = parse_squeue(LAB_OUTPUT, NONCE)
    assert list(found) == ["14", "10", "12", "13", "9", "11"]
    assert found["10"] == JobInfo("10", "PENDING", False, 0, 0, "JobHeldUser")
    assert found["11"] == JobInfo("11", "RUNNING", True, 0, 4294901753, "None")
    assert found["9"].state == "RUNNING"


def test_no_jobs_is_an_empty_answer() -> None:
    assert parse_squeue(b"", NONCE) == {}


def test_reason_is_the_only_free_text_and_may_hold_the_delimiter() -> None:
    out = line("7", "PENDING", "0", "0", "0", "ReqNodeNotAvail, UnavailableNodes:a|b")
    assert parse_squeue(out, NONCE)["7"].reason == "ReqNodeNotAvail, UnavailableNodes:a|b"


def test_odd_bytes_in_a_reason_do_not_stop_a_sweep() -> None:
    out = b"7|7|N/A|PENDING|0|0|0|bad \xff byte|" + NONCE.encode() + b"\n"
    assert parse_squeue(out, NONCE)["7"].reason == "bad \\xff byte"


def test_a_reason_cannot_forge_a_record() -> None:
    """A newline inside Reason leaves the record before it without the nonce."""
    forged = "x\n999|COMPLETED|0|0|1|None"
    out = line("7", "RUNNING", "1", "0", "5", forged)
    with pytest.raises(LookupFailed, match="nonce"):
        parse_squeue(out, NONCE)


@pytest.mark.parametrize(
    ("stdout", "why"),
    [
        (line("7", "RUNNING", "0", "0", "5", "None")[:-1], "newline"),
        (line("7", "RUNNING", "0", "0", "5", "None", nonce=OTHER_NONCE), "nonce"),
        (b"7|RUNNING|0|0|5|None|\n", "nonce"),
        (b"\n", "nonce"),
        (LAB_OUTPUT + b"\n", "nonce"),
        (line("7", "RUNNING", "0", "0", "None"), "fields"),
        (line("7", "RUNNING", "0", "5"), "fields"),
        (line("", "RUNNING", "0", "0", "5", "None"), "JobID"),
        (line("0", "RUNNING", "0", "0", "5", "None"), "JobID"),
        (line("07", "RUNNING", "0", "0", "5", "None"), "JobID"),
        (line("7_1", "RUNNING", "0", "0", "5", "None"), "JobID"),
        (line("9_[1-3]", "PENDING", "0", "0", "5", "None"), "JobID"),
        (line(" 7", "RUNNING", "0", "0", "5", "None"), "JobID"),
        (line("4294967295", "RUNNING", "0", "0", "5", "None"), "JobID"),
        (line("\u0667", "RUNNING", "0", "0", "5", "None"), "JobID"),
        (line("7", "", "0", "0", "5", "None"), "State"),
        (line("7", "running", "0", "0", "5", "None"), "State"),
        (line("7", "RUNNING ", "0", "0", "5", "None"), "State"),
        (line("7", "RUNNING", "", "0", "5", "None"), "Requeue"),
        (line("7", "RUNNING", "2", "0", "5", "None"), "Requeue"),
        (line("7", "RUNNING", "01", "0", "5", "None"), "Requeue"),
        (line("7", "RUNNING", "yes", "0", "5", "None"), "Requeue"),
        (line("7", "RUNNING", "0", "-1", "5", "None"), "RestartCnt"),
        (line("7", "RUNNING", "0", "65536", "5", "None"), "RestartCnt"),
        (line("7", "RUNNING", "0", "N/A", "5", "None"), "RestartCnt"),
        (line("7", "RUNNING", "0", "0", "4294967296", "None"), "PriorityLong"),
        (line("7", "RUNNING", "0", "0", "05", "None"), "PriorityLong"),
        (line("7", "RUNNING", "0", "0", "5.0", "None"), "PriorityLong"),
        (line("7", "RUNNING", "0", "0", "99999999999", "None"), "PriorityLong"),
        (line("7", "RUNNING", "0", "0", "5", "None") * 2, "twice"),
        (b"7|7|N/A|RUNNING|0|0|5|None|" + NONCE.encode() + b"\r\n", "nonce"),
        # The array fields (-r): a task id is N/A or decimal; a plain job is its own array.
        (line("7", "RUNNING", "0", "0", "5", "None", array=("7", "1-3")), "ArrayTaskID"),
        (line("7", "RUNNING", "0", "0", "5", "None", array=("7", "")), "ArrayTaskID"),
        (line("7", "RUNNING", "0", "0", "5", "None", array=("7", "n/a")), "ArrayTaskID"),
        (line("7", "RUNNING", "0", "0", "5", "None", array=("6", "N/A")), "without a task id"),
        (line("7", "RUNNING", "0", "0", "5", "None", array=("x", "1")), "ArrayJobID"),
        # A remainder repeats its JobID once per task, all else equal, each task once.
        (line("7", "PENDING", "0", "0", "0", "None", array=("7", "1"))
         + line("7", "PENDING", "0", "0", "0", "None", array=("7", "1")), "twice"),
        (line("7", "PENDING", "0", "0", "0", "None", array=("7", "1"))
         + line("7", "PENDING", "1", "0", "0", "None", array=("7", "2")), "twice"),
        (line("7", "PENDING", "0", "0", "0", "None", array=("7", "1"))
         + line("7", "PENDING", "0", "0", "0", "None"), "twice"),
    ],
)
def test_any_malformed_line_fails_the_whole_answer(stdout: bytes, why: str) -> None:
    with pytest.raises(LookupFailed, match=why):
        parse_squeue(stdout, NONCE)


def test_one_bad_line_among_good_ones_is_never_skipped() -> None:
    out = LAB_OUTPUT + line("8", "RUNNING", "1", "0", "x", "None") + line("15", "RUNNING", "0", "0", "1", "")
    with pytest.raises(LookupFailed, match="line 7"):
        parse_squeue(out, NONCE)


@given(st.binary(max_size=400))
def test_any_bytes_give_an_answer_or_lookup_failed(data: bytes) -> None:
    try:
        found = parse_squeue(data, NONCE)
    except LookupFailed:
        return
    for job_id, info in found.items():
        assert info.job_id == job_id
        assert isinstance(info.requeue, bool)


@given(st.lists(st.binary(max_size=40), max_size=8), st.sampled_from([NONCE, OTHER_NONCE]))
def test_any_fields_with_the_framing_give_an_answer_or_lookup_failed(parts: List[bytes], nonce: str) -> None:
    data = b"|".join(parts) + b"|" + nonce.encode() + b"\n"
    try:
        parse_squeue(data, NONCE)
    except LookupFailed:
        pass


job_infos = st.builds(
    JobInfo,
    job_id=st.integers(1, 4294967294).map(str),
    state=st.from_regex(r"[A-Z][A-Z_]{0,14}", fullmatch=True),
    requeue=st.booleans(),
    restarts=st.integers(0, 0xFFFF),
    priority=st.integers(0, 0xFFFFFFFF),
    reason=st.text(st.characters(exclude_characters="\n", exclude_categories=["Cs"]), max_size=30),
)


@given(st.lists(job_infos, max_size=6, unique_by=lambda i: i.job_id))
def test_records_round_trip(infos: List[JobInfo]) -> None:
    out = b"".join(
        line(i.job_id, i.state, "1" if i.requeue else "0", str(i.restarts), str(i.priority), i.reason)
        for i in infos
    )
    assert parse_squeue(out, NONCE) == {i.job_id: i for i in infos}


# Field values at and around every limit the reader checks, and some that are no number at all.
_near_limits = st.sampled_from([
    b"0", b"1", b"01", b"9", b"65535", b"65536", b"4294967294", b"4294967295", b"99999999999", b"N/A",
    b"-1", b" 1", b"1 ", b"\xd9\xa1", b"", b"PENDING", b"A_B", b"a", b"|", b"1|2",
])


def _answers(line: bytes) -> Tuple[object, object]:
    """What the one-match reader and the strict one make of ``line``: a record or the error's text."""
    answers: List[object] = []
    for read in (squeue_lookup._parse_record, squeue_lookup._parse_record_strictly):
        try:
            answers.append(read(line, b"|" + NONCE.encode(), 3))
        except LookupFailed as exc:
            answers.append(str(exc))
    return answers[0], answers[1]


@given(
    st.lists(_near_limits | st.binary(max_size=12), min_size=7, max_size=9),
    st.text(max_size=12).map(lambda t: t.encode("utf-8", "surrogatepass")) | st.binary(max_size=12),
    st.sampled_from([NONCE, OTHER_NONCE, ""]),
)
def test_the_one_match_reader_answers_as_the_strict_one(fields: List[bytes], reason: bytes, nonce: str) -> None:
    line_ = b"|".join([*fields, reason]) + (b"|" + nonce.encode() if nonce else b"")
    fast, strict = _answers(line_)
    assert fast == strict


# JobID|ArrayJobID|ArrayTaskID|State|Requeue|RestartCnt|PriorityLong: good, at and past each limit.
AT_LIMITS = """
7|7|N/A|PENDING|0|0|0  4294967294|4294967294|N/A|RUNNING|1|65535|4294967295  8|7|3|PENDING|0|0|0
7|7|4294967295|PENDING|0|0|0  4294967295|4294967295|N/A|PENDING|0|0|0  7|7|N/A|PENDING|0|65536|0
7|7|N/A|PENDING|0|0|4294967296  8|7|N/A|PENDING|0|0|0  7|7|N/A|PENDING|2|0|0  7|7|N/A|pending|0|0|0
7|07|N/A|PENDING|0|0|0  8|7|03|PENDING|0|0|0  8|7|0|PENDING|0|00|0
""".split()


@pytest.mark.parametrize("fields", AT_LIMITS)
def test_the_one_match_reader_at_each_limit(fields: str) -> None:
    line_ = f"{fields}|a|b reason|{NONCE}".encode()
    fast, strict = _answers(line_)
    assert fast == strict


# --- SqueueLookup -------------------------------------------------------------


Answer = Callable[[Tuple[str, ...], str], Completed]


class FakeSqueue:
    """A canned ``run``: records each squeue argv and answers with ``answer(argv, nonce)``.

    ``sdiag`` (the lookup's job count, asked only to choose how to ask) answers apart, in
    ``sdiag_calls``: by default as a missing sdiag does (127), so the lookup lists as before."""

    def __init__(self, answer: Answer, sdiag: Optional[Completed] = None) -> None:
        self.answer = answer
        self.sdiag = sdiag or Completed((), 127, b"", b"sdiag: No such file or directory\n", False, False,
                                        started=False)
        self.calls: List[Tuple[Tuple[str, ...], Dict[str, Any]]] = []
        self.sdiag_calls: List[Tuple[Tuple[str, ...], Dict[str, Any]]] = []

    def __call__(self, argv: Sequence[str], **kwargs: Any) -> Completed:
        argv = tuple(argv)
        if argv[0].endswith("/sdiag"):
            self.sdiag_calls.append((argv, kwargs))
            return self.sdiag
        self.calls.append((argv, kwargs))
        fmt = argv[argv.index("-O") + 1]
        match = re.search(r"[0-9a-f]{32}\Z", fmt)
        assert match is not None
        return self.answer(argv, match.group(0))


def done(
    argv: Tuple[str, ...],
    returncode: int = 0,
    stdout: bytes = b"",
    stderr: bytes = b"",
    timed_out: bool = False,
    truncated: bool = False,
) -> Completed:
    return Completed(argv, returncode, stdout, stderr, timed_out, truncated)


def listing(records: Dict[str, Tuple[str, str, str, str, str]]) -> Answer:
    """squeue that knows these jobs: a list or all-jobs call prints the known ones (rc 0)."""

    def answer(argv: Tuple[str, ...], nonce: str) -> Completed:
        wanted = argv[argv.index("-j") + 1].split(",") if "-j" in argv else list(records)
        out = b"".join(line(j, *records[j], nonce=nonce) for j in wanted if j in records)
        return done(argv, stdout=out)

    return answer


KNOWN = {
    "11": ("RUNNING", "1", "0", "4294901753", "None"),
    "10": ("PENDING", "0", "0", "0", "JobHeldUser"),
    "8": ("COMPLETED", "0", "0", "4294901755", "None"),
}


def test_a_handful_of_ids_is_one_squeue_with_a_job_list() -> None:
    fake = FakeSqueue(listing(KNOWN))
    answer = SqueueLookup("/usr/bin/squeue", 7.5, run=fake).jobs(["11", "999999", "10", "11"])
    assert answer == {
        "11": JobInfo("11", "RUNNING", True, 0, 4294901753, "None"),
        "999999": None,
        "10": JobInfo("10", "PENDING", False, 0, 0, "JobHeldUser"),
    }
    assert len(fake.calls) == 1
    argv, kwargs = fake.calls[0]
    assert argv[:8] == ("/usr/bin/squeue", "-h", "-a", "-t", "all", "-r", "-j", "11,999999,10")
    assert argv[8] == "-O" and argv[9].startswith("JobID:|,ArrayJobID:|,ArrayTaskID:|,State:|,Requeue:|")
    assert kwargs["timeout"] == 7.5


def test_many_ids_are_one_squeue_listing_all_jobs() -> None:
    fake = FakeSqueue(listing(KNOWN))
    ids = [str(n) for n in range(1, 52)]
    answer = SqueueLookup(run=fake).jobs(ids)
    assert len(fake.calls) == 1
    argv = fake.calls[0][0]
    # No path given: the first squeue on PATH (a site's /opt/slurm-25.11/bin), else /usr/bin/squeue.
    assert argv[:6] == (find_squeue(), "-h", "-a", "-t", "all", "-r") and "-j" not in argv
    assert list(answer) == ids
    assert answer["8"] is not None and answer["8"].finished
    assert answer["9"] is None and answer["50"] is None


def test_the_threshold_is_inclusive_for_job_lists() -> None:
    fake = FakeSqueue(listing(KNOWN))
    SqueueLookup(run=fake, many=3).jobs(["1", "2", "3"])
    SqueueLookup(run=fake, many=3).jobs(["1", "2", "3", "4"])
    assert "-j" in fake.calls[0][0] and "-j" not in fake.calls[1][0]


def test_every_call_gets_a_fresh_nonce() -> None:
    fake = FakeSqueue(listing(KNOWN))
    look = SqueueLookup(run=fake)
    look.jobs(["11"])
    look.jobs(["11"])
    assert fake.calls[0][0][-1] != fake.calls[1][0][-1]


def test_no_ids_run_nothing() -> None:
    fake = FakeSqueue(listing(KNOWN))
    assert SqueueLookup(run=fake).jobs([]) == {}
    assert fake.calls == []


@pytest.mark.parametrize("bad", ["7_1", "0", "abc", "1,2", "-5", " 7", "4294967295"])
def test_a_bad_job_id_is_a_value_error_before_anything_runs(bad: str) -> None:
    fake = FakeSqueue(listing(KNOWN))
    with pytest.raises(ValueError):
        SqueueLookup(run=fake).jobs(["11", bad])
    assert fake.calls == []


def test_a_single_string_is_not_a_list_of_ids() -> None:
    with pytest.raises(ValueError):
        SqueueLookup(run=FakeSqueue(listing(KNOWN))).jobs("11")


def test_int_ids_are_read_as_their_decimal_string() -> None:
    answer = SqueueLookup(run=FakeSqueue(listing(KNOWN))).jobs([11])  # type: ignore[list-item]
    assert list(answer) == ["11"]


def test_a_single_missing_id_is_gone() -> None:
    """`squeue -j <one unknown id>`: rc 1 and this exact stderr (docs/slurm-behaviour.md §4, §9)."""
    fake = FakeSqueue(lambda argv, nonce: done(argv, 1, b"", GONE))
    assert SqueueLookup(run=fake).jobs(["999999"]) == {"999999": None}


def test_a_missing_id_in_a_list_is_gone() -> None:
    """A list loads all jobs: rc 0, unknown ids simply absent (docs/slurm-behaviour.md §9)."""
    fake = FakeSqueue(listing(KNOWN))
    assert SqueueLookup(run=fake).jobs(["999999", "999998"]) == {"999999": None, "999998": None}


def test_a_known_array_task_is_found_by_its_own_id() -> None:
    """`-j 9` (an array's own id) lists every task by its raw JobID (lab, 22.05.8)."""
    tasks = line("9", "RUNNING", "0", "0", "4", "None", array=("9", "2")) + line(
        "13", "RUNNING", "0", "0", "4", "None", array=("9", "1")
    )
    fake = FakeSqueue(lambda argv, nonce: done(argv, stdout=tasks.replace(NONCE.encode(), nonce.encode())))
    answer = SqueueLookup(run=fake).jobs(["9", "13"])
    assert answer == {
        "9": JobInfo("9", "RUNNING", False, 0, 4, "None", array_job_id="9", array_tasks=2),
        "13": JobInfo("13", "RUNNING", False, 0, 4, "None", array_job_id="9"),
    }
    assert answer["9"] is not None and answer["9"].whole_array
    assert answer["13"] is not None and not answer["13"].whole_array


# What squeue -r printed on the lab (22.05.8) for array 165 (--array=1-3 --hold) after
# `scontrol hold 165_2` split task 2 off into JobId 166, beside a plain job 167.
SPLIT_ARRAY = (
    line("166", "PENDING", "0", "0", "0", "JobHeldAdmin", array=("165", "2"))
    + line("165", "PENDING", "0", "0", "0", "JobHeldUser", array=("165", "1"))
    + line("165", "PENDING", "0", "0", "0", "JobHeldUser", array=("165", "3"))
    + line("167", "PENDING", "0", "0", "4294901679", "None")
)


def test_a_remainder_record_is_one_job_and_a_split_task_its_own() -> None:
    found = parse_squeue(SPLIT_ARRAY, NONCE)
    assert list(found) == ["166", "165", "167"]
    assert found["165"] == JobInfo("165", "PENDING", False, 0, 0, "JobHeldUser", array_job_id="165", array_tasks=3)
    assert found["166"] == JobInfo("166", "PENDING", False, 0, 0, "JobHeldAdmin", array_job_id="165")
    assert found["167"].array_job_id is None and not found["167"].whole_array


@pytest.mark.parametrize("many", [50, 0], ids=["job list", "listing"])
def test_a_split_task_never_reads_as_gone_beside_its_array(many: int) -> None:
    fake = FakeSqueue(lambda argv, nonce: done(argv, stdout=SPLIT_ARRAY.replace(NONCE.encode(), nonce.encode())))
    answer = SqueueLookup(run=fake, many=many).jobs(["165", "166"])
    assert answer["166"] is not None and answer["166"].reason == "JobHeldAdmin"
    assert "-r" in fake.calls[0][0]


def test_one_id_answered_with_nothing_is_not_gone() -> None:
    """squeue -j <one unknown id> exits 1 with `Invalid job id specified`: rc 0 and no record is not that."""
    fake = FakeSqueue(answer_with(returncode=0, stdout=b""))
    with pytest.raises(LookupFailed, match="without the job's record"):
        SqueueLookup(run=fake).jobs(["11"])
    fake = FakeSqueue(answer_with(returncode=0, stdout=b""))
    assert SqueueLookup(run=fake, many=0).jobs(["11"]) == {"11": None}  # a listing of every job


def answer_with(**kwargs: Any) -> Answer:
    return lambda argv, nonce: done(argv, **kwargs)


@pytest.mark.parametrize(
    ("ids", "answer", "why"),
    [
        # slurmctld down (docs/slurm-behaviour.md §6, docs/slurm-24.11-26.05.md §4): rc 1 after 2*(MessageTimeout-1) s.
        (["11"], answer_with(returncode=1, stderr=DOWN), "unreachable"),
        (["11", "10"], answer_with(returncode=1, stderr=DOWN), "unreachable"),
        ([str(n) for n in range(1, 60)], answer_with(returncode=1, stderr=DOWN), "unreachable"),
        # "Invalid job id" means gone only for one id: a list never exits 1 for it.
        (["11", "10"], answer_with(returncode=1, stderr=GONE), "exited 1"),
        # The gone answer must be exact.
        (["11"], answer_with(returncode=1, stderr=GONE + b"more\n"), "exited 1"),
        (["11"], answer_with(returncode=1, stdout=b"x", stderr=GONE), "exited 1"),
        (["11"], answer_with(returncode=2, stderr=GONE), "exited 2"),
        (["11"], answer_with(returncode=1, stderr=b""), "no message"),
        (["11"], answer_with(returncode=1, stderr=BAD_FORMAT), "exited 1"),
        # The runner's guard, the cap, a missing or unexecutable binary, signals.
        (["11"], answer_with(returncode=143, timed_out=True), "within"),
        (["11"], answer_with(returncode=0, stdout=LAB_OUTPUT, truncated=True), "more than"),
        (["11"], answer_with(returncode=127, stderr=b"squeue: No such file or directory\n"), "not be run"),
        (["11"], answer_with(returncode=126, stderr=b"squeue: Permission denied\n"), "not be run"),
        (["11"], answer_with(returncode=137), "exited 137"),
        # Garbage, or a record framed with another call's nonce.
        (["11"], answer_with(stdout=b"JOBID STATE\n11 RUNNING\n"), "nonce"),
        (["11"], answer_with(stdout=line("11", "RUNNING", "1", "0", "5", "None")), "nonce"),
    ],
)
def test_could_not_ask_is_lookup_failed_never_gone(ids: List[str], answer: Answer, why: str) -> None:
    fake = FakeSqueue(answer)
    with pytest.raises(LookupFailed, match=why):
        SqueueLookup(run=fake).jobs(ids)
    assert len(fake.calls) == 1


def test_the_cap_and_timeout_reach_the_runner() -> None:
    fake = FakeSqueue(listing(KNOWN))
    SqueueLookup(timeout=3.0, run=fake, cap=1234).jobs(["11"])
    assert fake.calls[0][1] == {"timeout": 3.0, "cap": 1234}


# --- the Slurm version --------------------------------------------------------


@pytest.mark.parametrize(
    ("stdout", "version"),
    [
        (b"slurm-wlm 22.05.8\n", (22, 5)),  # Debian 12, as the lab prints it
        (b"slurm 22.05.8\n", (22, 5)),
        (b"slurm 24.11.5\n", (24, 11)),
        (b"slurm 26.05.5\n", (26, 5)),
        (b"slurm 23.02.7-1\n", (23, 2)),
        (b"slurm 24.11.0-0rc1\n", (24, 11)),
        (b"slurm 25.05.0", (25, 5)),
    ],
)
def test_reads_the_slurm_version(stdout: bytes, version: Tuple[int, int]) -> None:
    assert parse_slurm_version(stdout) == version


@pytest.mark.parametrize(
    "stdout",
    [
        b"",
        b"\n",
        b"slurm\n",
        b"slurm 22\n",
        b"slurm 22.5.8\n",
        b"pyslurm 22.05.8\n",
        b"slurm 22.05.8\nextra\n",
        b"\xff",
    ],
)
def test_an_unreadable_version_is_lookup_failed(stdout: bytes) -> None:
    with pytest.raises(LookupFailed):
        parse_slurm_version(stdout)


def test_slurm_version_runs_squeue_version() -> None:
    calls: List[Tuple[str, ...]] = []

    def run(argv: Sequence[str], **kwargs: Any) -> Completed:
        calls.append(tuple(argv))
        return done(tuple(argv), stdout=b"slurm-wlm 22.05.8\n")

    assert slurm_version("/opt/slurm/bin/squeue", run=run) == (22, 5)
    assert calls == [("/opt/slurm/bin/squeue", "--version")]


@pytest.mark.parametrize(
    "completed",
    [
        Completed((), 127, b"", b"squeue: No such file or directory\n", False, False),
        Completed((), 143, b"", b"", True, False),
        Completed((), 0, b"garbage\n", b"", False, False),
    ],
)
def test_slurm_version_failures_are_lookup_failed(completed: Completed) -> None:
    with pytest.raises(LookupFailed):
        slurm_version(run=lambda argv, **kw: completed)


def test_default_lookup_is_squeue_when_the_version_is_unknown(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_version(*args: Any, **kwargs: Any) -> Tuple[int, int]:
        raise LookupFailed("squeue could not be run")

    monkeypatch.setattr(lookup_choice, "slurm_version", no_version)
    with caplog.at_level(logging.INFO, logger="slurm_dsl"):
        found = lookup_choice.default_lookup("/x/squeue", 4.0)
    assert isinstance(found, SqueueLookup)
    assert (found.squeue_path, found.timeout) == ("/x/squeue", 4.0)
    assert len(caplog.records) == 1 and "Slurm version" in caplog.records[0].getMessage()


def test_default_lookup_is_squeue_without_pyslurm(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pyslurm", None)  # import pyslurm -> ModuleNotFoundError
    monkeypatch.setattr(lookup_choice, "slurm_version", lambda *a, **k: (22, 5))
    with caplog.at_level(logging.INFO, logger="slurm_dsl"):
        found: Optional[object] = lookup_choice.default_lookup()
    assert isinstance(found, SqueueLookup)
    assert len(caplog.records) == 1 and "not installed" in caplog.records[0].getMessage()


# -- select: one listing for the selectors (docs/contract.md §10.3) --------------------------------


def test_select_is_one_listing_with_the_filters_and_squeues_default_states() -> None:
    fake = FakeSqueue(listing(KNOWN))
    found = SqueueLookup("/usr/bin/squeue", 9.0, run=fake).select(("-w", "vm", "-t", "RUNNING"))
    assert set(found) == set(KNOWN)
    (argv, kwargs), = fake.calls
    assert argv[:7] == ("/usr/bin/squeue", "-h", "-a", "-r", "-w", "vm", "-t") and "all" not in argv
    assert kwargs["timeout"] == 9.0


def test_select_among_ids_names_them() -> None:
    fake = FakeSqueue(listing(KNOWN))
    assert set(SqueueLookup("/usr/bin/squeue", run=fake).select(("-p", "debug"), ["10", "11"])) == {"10", "11"}
    argv = fake.calls[0][0]
    assert argv[argv.index("-j") + 1] == "10,11"


@pytest.mark.parametrize("stderr, rc", [
    (b"squeue: error: Invalid node name nope\n", 1),
    (b"squeue: error: Invalid user: nobodyx\n\n", 0),  # 22.05 says it and exits 0
    (b"squeue: error: Invalid job state specified: BOGUS\nsqueue: error: Valid job states include: ...\n", 1),
])
def test_a_selector_squeue_refuses_is_bad_input_in_its_words(stderr: bytes, rc: int) -> None:
    fake = FakeSqueue(lambda argv, nonce: done(argv, rc, b"", stderr))
    with pytest.raises(InvalidInput) as raised:
        SqueueLookup("/usr/bin/squeue", run=fake).select(("-w", "nope"))
    assert str(raised.value).startswith("squeue: Invalid ")


@pytest.mark.parametrize("answer", [
    dict(returncode=1, stderr=b"squeue: error: Unable to contact slurm controller (connect failure)\n"),
    dict(returncode=0, stderr=b"squeue: error: something else\n"),
    dict(timed_out=True),
    dict(truncated=True),
])
def test_a_listing_that_is_not_a_whole_answer_is_lookup_failed(answer: Dict[str, Any]) -> None:
    fake = FakeSqueue(lambda argv, nonce: done(argv, **answer))
    with pytest.raises(LookupFailed):
        SqueueLookup("/usr/bin/squeue", run=fake).select(("-w", "vm"))
