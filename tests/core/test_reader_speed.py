"""The fast readers give the answers of the plain per-line algorithm (issue 20 item 6).

``refusals.refusal_message`` and the list reader's line sorting skip blank-line runs in C and
read each distinct line once.  Here the plain algorithm, one line at a time as docs/contract.md §5 and §11
word it (and as the readers did before), is written again, and hypothesis compares the two over
stderr made of the hostile shapes (blank and whitespace lines, refusal lines, other ids' lines,
junk, suspend lines, ``\\r\\n`` ends, torn last lines, repeated runs) mixed with random bytes.
"""

from __future__ import annotations

import sys
import tracemalloc
from contextlib import ExitStack
from types import FrameType
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# The hostile 1 MiB shapes of issue 20 item 6: the benchmark's own table (each read followed by a
# valid status line).
from benchmarks.bench_reader import NONCE, SHAPES
from slurm_dsl.core import bulk_reader
from slurm_dsl.core.model import Op
from slurm_dsl.core.reader import read_outcome
from slurm_dsl.core.refusals import ALLOWED, refusal_message, squeezed
from tests.examples import examples

BLANK = b" \t\n\r\x0b\x0c"  # §5 "non-blank": a line of only ASCII whitespace is blank
SUSPEND_OPS = {Op.HOLD, Op.RELEASE, Op.OPEN}
UNEXPECTED = "Unexpected message received"
CALLS = sorted(ALLOWED, key=lambda key: (key[0].value, key[1]))
IDS = ["5", "6", "55"]
MESSAGES = [
    b"Invalid job id specified",
    b"Job has already finished",
    b"Access/permission denied",
    b"Requested operation is presently disabled",
    b"Rate limit exceeded, please retry later",
    UNEXPECTED.encode(),
    b"scontrol: error: x",
    b"Invalid job id specified ",
    b"\xff",
    b"",
]


def _line_shapes() -> st.SearchStrategy[bytes]:
    job = st.sampled_from([*IDS, "7", "05", "5_1"]).map(str.encode)
    message = st.sampled_from(MESSAGES)
    return st.one_of(
        st.sampled_from([b"", b" ", b" \t", b"\r", b"\x0b\x0c", b"\x1e", b"\x85", b"x" * 40]),
        st.builds(lambda m, j: m + b" for job " + j, message, job),
        st.builds(lambda m, j: m + b" for job " + j + b"\r", message, job),
        st.builds(lambda sep, m: b"slurm_suspend error" + sep + m, st.sampled_from([b": ", b":", b"", b" "]),
                  message),
        st.binary(max_size=12),
    )


# A stderr: runs of one line shape (repeated: many copies of a few lines is the hostile case),
# each run ended by a newline, and a last piece that may be a torn line.
def _stderr(lines: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    run = st.tuples(lines, st.integers(min_value=1, max_value=6))
    return st.builds(
        lambda runs, tail: b"".join((line + b"\n") * times for line, times in runs) + tail,
        st.lists(run, max_size=12),
        st.one_of(st.just(b""), lines),
    )


@st.composite
def _nearly_a_refusal(draw: st.DrawFn) -> bytes:
    """A stderr that is almost one refusal: one message for one job, as ``for job`` and suspend
    lines, blank lines, perhaps one intruder of any shape anywhere, perhaps a torn last line."""
    message = draw(st.sampled_from(MESSAGES[:1] * 3 + MESSAGES[:5]))
    job = draw(st.sampled_from(IDS[:1] * 3 + IDS)).encode()  # mostly the job the test reads
    forms = [message + b" for job " + job] * 3 + [
        b"slurm_suspend error: " + message, b"slurm_suspend error:" + message, b"", b" \t", b"\r"]
    lines = draw(st.lists(st.sampled_from(forms), min_size=1, max_size=10))
    if draw(st.booleans()):
        lines.insert(draw(st.integers(min_value=0, max_value=len(lines))), draw(_line_shapes()))
    text = b"\n".join(lines)
    return text if draw(st.booleans()) else text + b"\n"


STDERR = st.one_of(_stderr(_line_shapes()), _nearly_a_refusal())


def naive_refusal(op: Op, number: int, job: str, stderr: bytes) -> Optional[str]:
    """docs/contract.md §5, one line at a time: every non-blank line is ``<m> for job <id>`` (the job's own id)
    or, for hold, release and open, ``slurm_suspend error:<m>`` or ``: <m>``; one message on every
    line; at least one ``for job`` line; the message allowed for the call."""
    allowed = ALLOWED.get((op, number))
    if allowed is None:
        return None
    messages: List[bytes] = []
    for_job = False
    for line in stderr.split(b"\n"):
        if line.strip(BLANK) == b"":
            continue
        suffix = b" for job " + job.encode()
        if line.endswith(suffix):
            messages.append(line[: len(line) - len(suffix)])
            for_job = True
        elif op in SUSPEND_OPS and line.startswith(b"slurm_suspend error: "):
            messages.append(line[len(b"slurm_suspend error: "):])
        elif op in SUSPEND_OPS and line.startswith(b"slurm_suspend error:"):
            messages.append(line[len(b"slurm_suspend error:"):])
        else:
            return None
    if not for_job or len(set(messages)) != 1:
        return None
    try:
        text = messages[0].decode("ascii")
    except UnicodeDecodeError:
        return None
    return text if text in allowed else None


class NaiveLines:
    """docs/contract.md §11's line rules, one line at a time, with the list reader's facts about them: each
    id's own lines (joined, and how many), the lines no rule explains (then the lines of ids with
    two or more), whether any line, a valid id line or a torn last line was seen."""

    def __init__(self, op: Op, allowed: FrozenSet[str], ids: Sequence[str], data: bytes) -> None:
        own: Dict[str, List[bytes]] = {}
        self.message: Dict[str, Optional[str]] = {}
        self.unaccounted: List[bytes] = []
        self.any_line = self.valid_id_line = self.torn = False
        known: Set[str] = set(ids)
        *lines, tail = data.split(b"\n")
        for raw in lines:
            if raw.strip(BLANK) == b"":
                continue
            self.any_line = True
            line = raw + b"\n"
            if op in SUSPEND_OPS and (raw == b"slurm_suspend error" or raw.startswith(b"slurm_suspend error:")):
                continue
            job, message = _id_line(raw)
            if job in known:
                own.setdefault(job, []).append(line)
                self.message[job] = message
                if message != UNEXPECTED and message not in allowed:
                    self.unaccounted.append(line)
            else:
                self.unaccounted.append(line)
        if tail.strip(BLANK) != b"":
            self.any_line = self.torn = True
            self.unaccounted.append(tail)
        for job, mine in own.items():
            if len(mine) > 1:
                self.unaccounted.extend(mine)
            elif self.message[job] == UNEXPECTED or self.message[job] in allowed:
                self.valid_id_line = True
        # What the list reader reads of them: each id's lines joined, and how many.
        self.own = {job: b"".join(mine) for job, mine in own.items()}
        self.count = {job: len(mine) for job, mine in own.items()}


def _id_line(raw: bytes) -> Tuple[Optional[str], Optional[str]]:
    """``<message> for job <id>`` (the last `` for job ``, a canonical id): (id, ASCII message)."""
    at = raw.rfind(b" for job ")
    if at < 0:
        return None, None
    token = raw[at + len(b" for job "):]
    if not token.isdigit() or token.startswith(b"0") or not token.isascii():
        return None, None
    try:
        return token.decode(), raw[:at].decode("ascii")
    except UnicodeDecodeError:
        return token.decode(), None


@settings(max_examples=examples(1000), deadline=None)
@given(st.sampled_from(CALLS), st.sampled_from(IDS[:1] * 3 + IDS), STDERR)
def test_refusal_message_is_the_per_line_reading(call: Tuple[Op, int], job: str, stderr: bytes) -> None:
    op, number = call
    assert refusal_message(op, number, job, stderr) == naive_refusal(op, number, job, stderr)


@settings(max_examples=examples(200), deadline=None)
@given(STDERR)
def test_squeezed_drops_only_blank_lines_before_the_last_newline(stderr: bytes) -> None:
    *lines, tail = stderr.split(b"\n")
    kept = [line + b"\n" for line in lines if line.strip(BLANK) != b""]
    assert squeezed(stderr) == b"".join(kept) + tail


def _facts(lines: object) -> Tuple[object, ...]:
    """What the list reader takes from its line sorting; an id's message only matters alone."""
    assert isinstance(lines, (bulk_reader._Lines, NaiveLines))
    single = {job: lines.message[job] for job, count in lines.count.items() if count == 1}
    return (list(lines.own.items()), list(lines.count.items()), single, b"".join(lines.unaccounted),
            lines.any_line, lines.valid_id_line, lines.torn)


STATUSES = st.sampled_from([0, 1, 2, 124, 137, None, "x"])


@settings(max_examples=examples(400), deadline=None)
@given(st.sampled_from(CALLS), st.lists(st.sampled_from(IDS), min_size=2, max_size=3, unique=True),
       STDERR, STATUSES)
def test_list_reader_is_the_per_line_reading(
    call: Tuple[Op, int], ids: List[str], stderr: bytes, status: object
) -> None:
    op, number = call
    allowed = ALLOWED[call]
    assert _facts(bulk_reader._Lines(op, allowed, ids, stderr)) == _facts(NaiveLines(op, allowed, ids, stderr))
    fast = bulk_reader.read_list_call(op, number, ids, stderr, status)
    with mock.patch.object(bulk_reader, "_Lines", NaiveLines):
        plain = bulk_reader.read_list_call(op, number, ids, stderr, status)
        opened = bulk_reader.read_open_list(ids, stderr, status)
    assert fast == plain and fast.unowned == plain.unowned
    fast_open = bulk_reader.read_open_list(ids, stderr, status)
    assert fast_open == opened and fast_open.unowned == opened.unowned


# The list reader finds the ids' lines one of several ways, by what is cheap for the stderr at
# hand (bulk_reader._id_lines); each must be the per-line reading.  The thresholds are set so that
# hypothesis's short stderrs go each way.
WAYS: Dict[str, Dict[str, int]] = {
    "few distinct lines, read one by one": {"_SMALL": 1 << 30},
    "a regex naming the ids": {"_SMALL": 0},
    "a regex naming the ids, many lines found": {"_SMALL": 0, "_FEW_LINES": 0},
    "split at every id line": {"_SMALL": 0, "_FEW_IDS": 0, "_FEW_LINES": 0},
    "many ids, few distinct lines": {"_FEW_IDS": 0},
    "short, many distinct lines": {"_FEW_LINES": 0},
}


@st.composite
def _many_jobs(draw: st.DrawFn) -> bytes:
    """Refusal and other lines naming many jobs, the call's among them (issue 20 item 6's
    ``distinct ids`` shape, small), some repeated, perhaps a torn last line."""
    message = st.sampled_from(MESSAGES)
    job = st.integers(min_value=1, max_value=60).map(lambda n: str(n).encode())
    line = st.one_of(st.builds(lambda m, j: m + b" for job " + j, message, job), _line_shapes())
    lines = draw(st.lists(line, max_size=30))
    lines += draw(st.lists(st.sampled_from(lines), max_size=5)) if lines else []
    tail: bytes = draw(st.one_of(st.just(b""), line))
    return b"".join(one + b"\n" for one in lines) + tail


@pytest.mark.parametrize("way", sorted(WAYS))
@settings(max_examples=examples(300), deadline=None)
@given(call=st.sampled_from(CALLS), ids=st.lists(st.sampled_from(IDS), min_size=2, max_size=3, unique=True),
       stderr=st.one_of(STDERR, _many_jobs()))
def test_each_way_to_find_the_ids_lines_is_the_per_line_reading(
    way: str, call: Tuple[Op, int], ids: List[str], stderr: bytes
) -> None:
    op, _ = call
    allowed = ALLOWED[call]
    with ExitStack() as patches:
        for name, value in WAYS[way].items():
            patches.enter_context(mock.patch.object(bulk_reader, name, value))
        fast = _facts(bulk_reader._Lines(op, allowed, ids, stderr))
    assert fast == _facts(NaiveLines(op, allowed, ids, stderr))


# Python lines the readers may run on one of those stderrs: a few hundred whatever its size.  The
# per-line readers ran one iteration or more per stderr line, tens of thousands to a million here.
LINE_BUDGET = 2000


def _python_lines(read: Callable[[], object]) -> int:
    """How many lines of slurm_dsl's Python code run in ``read()`` (C code is not counted):
    a measure of the readers' work per stderr line that no machine load changes."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:  # sys.settrace's own type is private
        nonlocal count
        if "slurm_dsl" not in frame.f_code.co_filename:
            return None
        if event == "line":
            count += 1
        return trace

    before = sys.gettrace()  # a coverage tracer, say: put back afterwards
    sys.settrace(trace)
    try:
        read()
    finally:
        sys.settrace(before)
    return count


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_hostile_stderr_costs_python_work_per_distinct_line_not_per_line(shape: str) -> None:
    data = SHAPES[shape] + f"\x1eDSL {NONCE} call 1 1\n".encode()
    own = SHAPES[shape]
    reads: Dict[str, Callable[[], object]] = {
        "read_outcome": lambda: read_outcome("hold", "5", stderr=data, exit_status=1, nonce=NONCE),
        "read_list_output": lambda: bulk_reader.read_list_output("hold", 1, ["5", "6"], data, 1, NONCE),
        "read_list_call": lambda: bulk_reader.read_list_call("release", 1, ["5", "6"], own, 1),
        "read_open_list": lambda: bulk_reader.read_open_list(["5", "6"], own, 1),
    }
    for name, read in reads.items():
        assert _python_lines(read) <= LINE_BUDGET, name


# Many lines of one id (issue 20 item 6's last two shapes, smaller): past a few hundred id lines in
# a stderr past 16 KiB, the list reader finds each id's lines joined (bulk_reader._joined_id_lines),
# with no object per line.  Its lines (distinct, copies of one, refusals, ``Unexpected``) are
# mixed with other ids' lines (repeated, so that two ids with several lines are read line by
# line again), frame-like lines, blank and suspend lines, a long line and perhaps a torn last line.
MANY = 300  # id lines: more than the list reader reads one by one (asserted below)
PAD = 17000  # bytes of one long line: a stderr longer than the list reader splits first (idem)
OWN_FORMS = [b"x%d", b"", b"Invalid job id specified", UNEXPECTED.encode(), b"scontrol: error: %d",
             b"Job has already finished"]  # an own line's message; ``%d``: its number
FRAMES = [f"\x1eDSL {NONCE} call 1 1".encode(), f"DSL {NONCE} call 1 1".encode(), b"\x1e"]


@st.composite
def _one_id_many_lines(draw: st.DrawFn) -> Tuple[List[str], bytes]:
    ids = draw(st.lists(st.sampled_from(IDS), min_size=2, max_size=3, unique=True))
    job = draw(st.sampled_from(ids)).encode()
    forms = draw(st.lists(st.sampled_from(OWN_FORMS), min_size=1, max_size=3))
    count = draw(st.integers(min_value=MANY, max_value=MANY + 40))
    lines = [forms[n % len(forms)].replace(b"%d", b"%d" % n) + b" for job " + job for n in range(count)]
    copies = draw(st.booleans())
    if copies:  # copies of one line, as many as make a stderr past PAD bytes with no long line
        lines = [lines[0]] * max(count, PAD // len(lines[0]) + 1)
    other = st.one_of(_line_shapes(), st.sampled_from(FRAMES),  # other ids' lines, with ``\r\n`` ends too
                      st.builds(lambda m, j, end: m + b" for job " + j.encode() + end, st.sampled_from(MESSAGES),
                                st.sampled_from(IDS), st.sampled_from([b"", b"\r"])))
    pad = draw(st.sampled_from([b"y" * PAD, b"z" * PAD + b" for job " + draw(st.sampled_from(IDS)).encode()]))
    inserts = draw(st.lists(st.tuples(st.integers(0, count), other, st.integers(1, 3)), max_size=12))
    for at, line, times in [*([] if copies else [(draw(st.integers(0, count)), pad, 1)]), *inserts]:
        lines[at:at] = [line] * times
    tail: bytes = draw(st.one_of(st.just(b""), _line_shapes()))
    return ids, b"".join(line + b"\n" for line in lines) + tail


@settings(max_examples=examples(100), deadline=None)
@given(st.sampled_from(CALLS), _one_id_many_lines(), STATUSES)
def test_one_ids_many_lines_read_joined_are_the_per_line_reading(
    call: Tuple[Op, int], shaped: Tuple[List[str], bytes], status: object
) -> None:
    assert MANY > bulk_reader._FEW_LINES and PAD > bulk_reader._SMALL and len(IDS) <= bulk_reader._FEW_IDS
    op, number = call
    allowed = ALLOWED[call]
    ids, stderr = shaped
    joined = mock.patch.object(bulk_reader, "_joined_id_lines", wraps=bulk_reader._joined_id_lines)
    with joined as spy:
        fast_lines = _facts(bulk_reader._Lines(op, allowed, ids, stderr))
    assert spy.called  # the way this test is aimed at
    assert fast_lines == _facts(NaiveLines(op, allowed, ids, stderr))
    framed = stderr + f"\x1eDSL {NONCE} call {number} 1\n".encode()
    fast = bulk_reader.read_list_call(op, number, ids, stderr, status)
    fast_framed = bulk_reader.read_list_output(op, number, ids, framed, 1, NONCE)
    with mock.patch.object(bulk_reader, "_Lines", NaiveLines):
        plain = bulk_reader.read_list_call(op, number, ids, stderr, status)
        plain_framed = bulk_reader.read_list_output(op, number, ids, framed, 1, NONCE)
    # Outcome, each id's stderr byte for byte (whole, however long), order, and what no id owns.
    assert list(fast.items()) == list(plain.items()) and fast.unowned == plain.unowned
    assert list(fast_framed.items()) == list(plain_framed.items()) and fast_framed.unowned == plain_framed.unowned


# Shapes of one id's many lines: its own lines are held joined (what its ``Call.stderr`` is), so a
# read holds a few copies of the stderr at its peak; an object per line held 12-17 copies.
ONE_ID_SHAPES = ["distinct for job 5", "short for job 5", "refusal lines", "other id lines"]
PEAK_COPIES = 8


@pytest.mark.parametrize("shape", ONE_ID_SHAPES)
def test_one_ids_many_lines_are_held_joined_not_as_an_object_a_line(shape: str) -> None:
    own = SHAPES[shape]
    data = own + f"\x1eDSL {NONCE} call 1 1\n".encode()
    reads: Dict[str, Callable[[], bulk_reader.ListCall]] = {
        "read_list_output": lambda: bulk_reader.read_list_output("hold", 1, ["5", "6"], data, 1, NONCE),
        "read_list_call": lambda: bulk_reader.read_list_call("release", 1, ["5", "6"], own, 1),
        "read_open_list": lambda: bulk_reader.read_open_list(["5", "6"], own, 1),
    }
    holder = own.rpartition(b" for job ")[2].strip().decode()
    for name, read in reads.items():
        read()  # compiled regexes cached: not counted
        tracemalloc.start()
        try:
            result = read()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak <= PEAK_COPIES * len(own), name
        assert result[holder].stderr == own, name  # kept whole, as the per-line reading keeps it
