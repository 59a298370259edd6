"""Reading one scontrol call on many job ids into one strict ``Call`` per id (docs/contract.md §11).

The lines and statuses are read as §11 "Reading one list call" says; a call on one id is read by
``reader.read_call``, as a single op.  No id is ever read surer than a single op would read it.
Each id's ``Call.status`` is what a call on it alone would exit with: 0 for SUCCESS; with a line of
its own, the call's status if scontrol exited by itself, else 1; otherwise the call's (None:
unreadable).  Never raises for any stderr or status; a bad op, call number or id list is ``InvalidInput``.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import accumulate, chain, compress, filterfalse, islice, repeat
from operator import add, itemgetter, methodcaller, mul, sub
from typing import Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, Union

from . import combine
from .jobid import JobIds, validate_job_id
from .model import Call, CallOutcome, InvalidInput, Op, Outcome, Reason
from .plain import described, plain_bytes
from .reader import nonce_bytes, read_call, read_op, read_outcome, split_status_lines, unknown
from .refusals import ALLOWED, BLANK, INVALID_JOB_ID, squeezed
from .script import MAX_ARG_BYTES
from .statuses import FIXED_OUTCOME, StatusClass, classify, parse_status

JobId = Union[str, int]

# The longest argument form: update gets exactly one ``JobId=<list>`` (docs/contract.md §11).
ARG_PREFIX = "JobId="
UNEXPECTED = "Unexpected message received"  # slurmctld not reached for that id (docs/slurm-bulk.md §4)

_FOR_JOB = b" for job "
_SUSPEND = b"slurm_suspend error"
_SUSPEND_OPS = frozenset({Op.HOLD, Op.RELEASE, Op.OPEN})
# Statuses at which scontrol never ran or the wrapper failed: the single reader ignores stderr.
_FIXED = frozenset({StatusClass.EXPIRED, StatusClass.WRAPPER_FAILED, StatusClass.NOT_RUN})
# The only statuses scontrol exits with by itself (docs/slurm-bulk.md §2.2): any other leaves
# every silent id unknown (docs/contract.md §11).
_DONE = frozenset({0, 1})
_FAILED_ALONE = 1  # what scontrol exits with when its one RPC was refused


def plan_chunks(
    job_ids: Sequence[JobId], *, max_ids: int, max_arg_bytes: int = MAX_ARG_BYTES
) -> List[List[str]]:
    """The ids, validated and deduplicated (order kept), in chunks of at most ``max_ids`` ids whose
    ``JobId=<ids>`` is at most ``max_arg_bytes`` bytes (16 to 131,071).  No ids, no chunks."""
    ids = _distinct_ids(job_ids)
    limit = _whole(max_ids, "max_ids", 1, None)
    room = _whole(max_arg_bytes, "max_arg_bytes", len(ARG_PREFIX) + len("4294967294"), MAX_ARG_BYTES)
    chunks: List[List[str]] = []
    chunk: List[str] = []
    size = len(ARG_PREFIX)
    for job in ids:
        extra = len(job) + (1 if chunk else 0)
        if chunk and (len(chunk) >= limit or size + extra > room):
            chunks.append(chunk)
            chunk, size, extra = [], len(ARG_PREFIX), len(job)
        chunk.append(job)
        size += extra
    if chunk:
        chunks.append(chunk)
    return chunks


def frame_list_output(
    stderr: object, exit_status: object, nonce: object, number: int
) -> Tuple[bytes, Optional[int], Optional[Reason]]:
    """Split a one-call script's stderr at its status line (docs/contract.md §3, §6): ``(own stderr,
    status, None)`` if the framing is exact and it is ``call <number>``, else ``(the whole stderr or
    b"", None, reason)``, the single reader's reason for that fault.  Never raises."""
    number = _call_number(number)
    data = plain_bytes(stderr)
    if data is None:
        return b"", None, Reason.STDERR_NOT_BYTES
    wanted = nonce_bytes(nonce)
    if wanted is None:
        return data, None, Reason.NONCE_INVALID
    lines, reason, _ = split_status_lines(data, wanted)  # (call number, status field, own stderr)
    if reason is not None:
        return data, None, reason
    statuses = [parse_status(field.decode("latin-1")) for _, field, _ in lines]
    if any(s is None for s in statuses):
        return data, None, Reason.UNREADABLE_STATUS
    exit_code = parse_status(exit_status)
    if exit_code is None:
        return data, None, Reason.UNREADABLE_EXIT_STATUS
    last = statuses[-1]
    if last is None or int(exit_code) != last:
        return data, None, Reason.EXIT_STATUS_MISMATCH
    if [seen for seen, _, _ in lines] != [number]:
        return data, None, Reason.WRONG_CALLS
    return lines[0][2], int(last), None


class ListCall(Dict[str, Call]):
    """Each id's ``Call`` (by canonical id, in the order given; its ``stderr`` its own lines only), and
    ``unowned``, the stderr no id owns, kept once for the call (docs/contract.md §11, "Bounded output")."""

    def __init__(self, calls: Mapping[str, Call], unowned: bytes = b"") -> None:
        super().__init__(calls)
        self.unowned = unowned


def read_list_call(
    op: Union[Op, str], number: int, job_ids: Sequence[JobId], stderr: object, status: object
) -> ListCall:
    """Each id's ``Call`` from one list call's own stderr and ``status`` (``frame_list_output``'s; None:
    unreadable).  ``job_ids``: the call's ids, distinct and valid, else ``InvalidInput``."""
    op, number, allowed = _call_key(op, number)
    ids = _call_ids(job_ids)
    data = plain_bytes(stderr)
    if data is None:
        return _every(ids, number, None, "", b"", CallOutcome.UNKNOWN, Reason.STDERR_NOT_BYTES)
    code, text = _status(status)
    if len(ids) == 1:
        # One id is a single op (docs/contract.md §11): the single reader's rule, same bytes.
        return ListCall({ids[0]: read_call(op, ids[0], number, code, text, data)})
    cls = classify(code) if code is not None else None
    if cls is not None and cls in _FIXED:
        outcome, reason = FIXED_OUTCOME[cls]
        return _every(ids, number, code, text, data, outcome, reason)

    lines = _Lines(op, allowed, ids, data)
    loose = b"".join(lines.unaccounted)
    done = code in _DONE
    if lines.torn or (code == 0 and lines.any_line) or (code == 1 and not lines.valid_id_line):
        # A torn last line (it may be any id's line cut short), 0 with a line (scontrol never
        # prints one then), or a failure no id line explains: nothing is sure for any id.
        calls = {
            job: Call(number, code, text, lines.own.get(job, b""), CallOutcome.UNKNOWN, None,
                      Reason.UNRECOGNISED_STDERR)
            for job in ids
        }
        return ListCall(calls, loose)
    silent_reason: Optional[Reason]
    if cls is StatusClass.FAILED or done:
        # 0, 1, or a failure status scontrol never exits with (2-74, 76-123): each line is that
        # id's as for one id; a silent id got SUCCESS only at 0 or 1 with nothing unaccounted.
        line_status, line_text, silent_reason = code, text, Reason.UNRECOGNISED_STDERR
    else:
        # Stopped part-way (124, a signal) or unreadable: a silent id may or may not have been reached.
        line_status, line_text = _FAILED_ALONE, str(_FAILED_ALONE)
        silent_reason = Reason.UNREADABLE_STATUS if cls is None else FIXED_OUTCOME[cls][1]
    out: Dict[str, Call] = {}
    for job in ids:
        own = lines.own.get(job)
        if own:
            out[job] = _line_call(number, line_status, line_text, own, lines.count[job], lines.message.get(job),
                                  allowed)
        elif done and not lines.unaccounted:
            out[job] = Call(number, 0, "0", b"", CallOutcome.SUCCESS)
        else:
            out[job] = Call(number, code, text, b"", CallOutcome.UNKNOWN, None, silent_reason)
    return ListCall(out, loose)


def read_list_output(
    op: Union[Op, str],
    number: int,
    job_ids: Sequence[JobId],
    stderr: object,
    exit_status: object,
    nonce: object,
) -> ListCall:
    """``frame_list_output`` then ``read_list_call``: a framing fault makes every id unknown."""
    _call_key(op, number)  # a bad op, call number or id list is InvalidInput whatever the output
    _call_ids(job_ids)
    own, status, reason = frame_list_output(stderr, exit_status, nonce, number)
    if reason is not None:
        return unknown_list_call(number, job_ids, reason, stderr=own)
    return read_list_call(op, number, job_ids, own, status)


def unknown_list_call(
    number: int, job_ids: Sequence[JobId], reason: Reason, *, stderr: object = b""
) -> ListCall:
    """Every id of a list call unknown for ``reason`` (status None), for a fault of the runner or the
    framing; ``stderr`` is the call's (one id's own; with several, ``unowned``)."""
    number = _call_number(number)
    if type(reason) is not Reason:
        raise InvalidInput(f"reason must be a Reason, not {described(reason)}")
    ids = _call_ids(job_ids)
    data = plain_bytes(stderr) or b""
    return _every(ids, number, None, "", data, CallOutcome.UNKNOWN, reason)


def read_open_list(job_ids: Sequence[JobId], stderr: object, exit_status: object) -> ListCall:
    """Each id's ``Call`` from one direct ``scontrol release <list>`` of ``open`` (docs/contract.md §11):
    one id as ``read_outcome`` reads it, several by the list rules.  The caller has already made a
    started scontrol's own 75, 126 or 127 a 125 (§4)."""
    ids = _call_ids(job_ids)
    if len(ids) > 1:
        return read_list_call(Op.OPEN, 1, ids, stderr, exit_status)
    job = ids[0]
    single = read_outcome(Op.OPEN, job, stderr, exit_status)
    if single.calls:
        return ListCall({job: single.calls[0]})
    # Unreadable as a whole (stderr not bytes, an unreadable status): unknown for that reason.
    data = plain_bytes(stderr) or b""  # a hostile bytes-like: its own methods never run
    assert single.reason is not None
    return _every(ids, 1, None, _status(exit_status)[1], data, CallOutcome.UNKNOWN, single.reason)


def requeue_next_calls(job_ids: Sequence[JobId], first: Mapping[str, Call]) -> Tuple[List[str], List[str]]:
    """The ids a bulk requeue sends to call 2 (call 1 succeeded) and to call 3 (call 1 not ``expired``),
    in order (docs/contract.md §11); ``InvalidInput`` if ``first`` has no call 1 for an id."""
    second: List[str] = []
    third: List[str] = []
    for job in _distinct_ids(job_ids):
        call = first.get(job)
        if not isinstance(call, Call) or call.number != 1:
            raise InvalidInput(f"no call 1 for job {job}")
        if call.outcome is CallOutcome.SUCCESS:
            second.append(job)
        if call.outcome is not CallOutcome.EXPIRED:
            third.append(job)
    return second, third


def bulk_calls(op: Op, first: Call) -> List[int]:
    """The call numbers one id of a bulk ``op`` must have, from call 1's outcome, not its status (in a
    list, an unknown call 1 may carry status 0)."""
    if not op.requeues or first.outcome is CallOutcome.EXPIRED:
        return [1]
    if first.outcome is CallOutcome.SUCCESS:
        return [1, 2, 3]
    return [1, 3]


def combine_bulk(op: Union[Op, str], job_id: JobId, calls: Sequence[Call]) -> Outcome:
    """One id's ``Outcome`` from its own calls of a bulk op, in call order (docs/contract.md §7); calls
    that do not fit ``bulk_calls`` are unknown.  ``InvalidInput`` only for a bad op, id or non-``Call``."""
    return _combine(read_op(op), validate_job_id(job_id), calls)


def combine_listed(op: Op, job_ids: JobIds, calls: Mapping[int, Mapping[str, Call]]) -> Dict[str, Outcome]:
    """``combine_bulk`` of each of ``job_ids``, in order, from ``calls`` (call number -> each id's
    ``Call``; an id the call did not take is absent)."""
    numbers = sorted(calls)
    return {j: _combine(op, j, [calls[n][j] for n in numbers if j in calls[n]]) for j in job_ids}


def _combine(op: Op, job: str, calls: Sequence[Call]) -> Outcome:
    got = tuple(calls)
    if not all(isinstance(call, Call) for call in got):
        raise InvalidInput("calls must be Call values")
    if not got:
        return unknown(op, job, Reason.WRONG_CALLS, detail="no call")
    numbers = [call.number for call in got]
    exit_status = got[-1].status
    if any(later <= earlier for earlier, later in zip(numbers, numbers[1:])):
        return unknown(op, job, Reason.CALL_ORDER, calls=got, exit_status=exit_status,
                       detail=f"calls {numbers} out of order")
    if got[0].number != 1 or numbers != bulk_calls(op, got[0]):
        return unknown(op, job, Reason.WRONG_CALLS, calls=got, exit_status=exit_status,
                       detail=f"calls {numbers} do not fit a bulk {op.value}")
    if op.requeues:
        return combine.requeue(job, got, exit_status, op)
    return combine.single(op, job, got[0], exit_status)


class _Lines:
    """The non-blank lines of one list call's stderr, sorted by docs/contract.md §11's line rules in
    C-level passes, never Python per line (§6, "Speed on hostile stderr"); each id's own lines joined."""

    def __init__(self, op: Op, allowed: FrozenSet[str], ids: Sequence[str], data: bytes) -> None:
        self.own: Dict[str, bytes] = {}  # each id's own lines, joined, each with its newline
        self.count: Dict[str, int] = {}  # how many lines each id in ``own`` has
        self.message: Dict[str, Optional[str]] = {}  # an id's one line's message (None: not ASCII)
        self.unaccounted: List[bytes] = []  # lines no rule explains, as chunks: joined, the lines
        self.valid_id_line = False
        body = squeezed(data)
        cut = body.rfind(b"\n") + 1
        lines, tail = body[:cut], body[cut:]  # the non-blank lines, each with its newline; the last piece
        self.torn = bool(tail.strip(BLANK))  # a non-blank last line without its newline
        self.any_line = bool(lines) or self.torn
        if op in _SUSPEND_OPS and _SUSPEND in lines:
            # Its text is the last RPC's errno, not any id's (docs/slurm-bulk.md §2.1): dropped.
            lines = _SUSPEND_LINE.sub(b"", b"\n" + lines)[1:]
        loose = self._sort(allowed, ids, lines)
        if loose:
            self.unaccounted.append(loose)
        if self.torn:  # it may be any id's line cut short
            self.unaccounted.append(tail)
        for job, count in self.count.items():
            if count > 1:  # never for distinct ids (docs/slurm-bulk.md §3.2): nothing is sure
                self.unaccounted.append(self.own[job])
            elif self.message[job] == UNEXPECTED or self.message[job] in allowed:
                self.valid_id_line = True

    def _sort(self, allowed: FrozenSet[str], ids: Sequence[str], lines: bytes) -> bytes:
        """Fill ``own``, ``count`` and ``message`` from ``lines`` (non-blank, none a suspend line,
        each ended by its newline); return the lines unaccounted where they stand, in order, joined."""
        explained = _explained(allowed)
        found = _id_lines(ids, lines, explained) if _FOR_JOB in lines else None
        if found is None:
            return lines
        if isinstance(found, _Joined):  # each id's lines found joined already
            for tok, text in found.own.items():  # the ids in order of first sight
                job = tok.decode("ascii")
                self.own[job], self.count[job] = text, found.tally[tok]
                if found.tally[tok] == 1:
                    self.message[job] = _ascii(found.head[tok])
            return found.loose
        keys, counts, tok_of, head_of, line_of, loose = found
        if len(counts) <= _FEW_LINES:  # Python once per distinct line found
            keys_of: Dict[bytes, List[bytes]] = {}
            for key in counts:
                keys_of.setdefault(tok_of[key], []).append(key)
            for tok, mine in keys_of.items():  # the ids in order of first sight
                job = tok.decode("ascii")
                if len(mine) == 1:  # one line, perhaps many times
                    self.own[job], self.count[job] = line_of[mine[0]] * counts[mine[0]], counts[mine[0]]
                    if counts[mine[0]] == 1:
                        self.message[job] = _ascii(head_of[mine[0]])
                else:
                    self.own[job] = b"".join(map(line_of.__getitem__, filter(set(mine).__contains__, keys)))
                    self.count[job] = sum(map(counts.__getitem__, mine))
            return loose
        # Many distinct lines: each id's lines, in order, grouped by a stable sort by id (in C).
        toks = list(map(tok_of.__getitem__, keys))
        owned = list(map(line_of.__getitem__, keys))
        tally = Counter(toks)
        order = sorted(range(len(toks)), key=toks.__getitem__)
        group = dict(zip(sorted(tally), accumulate(map(tally.__getitem__, sorted(tally)), initial=0)))
        last = dict(zip(toks, keys))  # an id with one line: that line
        for tok in tally:  # the ids in order of first sight
            at = group[tok]
            job = tok.decode("ascii")
            self.own[job] = b"".join(map(owned.__getitem__, order[at : at + tally[tok]]))
            self.count[job] = tally[tok]
            if tally[tok] == 1:
                self.message[job] = _ascii(head_of[last[tok]])
        return loose


# Up to this many ids, one regex naming them finds only their lines (~1 GB/s whatever the other
# lines are); with more, its alternation would cost per id at every line, so the lines are split
# at every `` for job <id>`` ending instead (~250 MB/s).
_FEW_IDS = 16
# The stderr reversed: a line `<message> for job <id>` reads `<di> boj rof <egassem>` right after
# the newline that ends it, so a regex finds an id's lines from their first bytes, never
# backtracking over a line, and each match is the line's last `` for job `` (only digits come
# after it).  ``_REV_FOR_JOB`` is `` for job `` reversed (it reads the same).
_REV_FOR_JOB = _FOR_JOB[::-1]
# A line an id can own ends in `` for job <id>``, found from its last `` for job `` (only digits
# follow it up to the newline): ``_ID_LINE`` splits there, keeping the id token.
_ID_LINE = re.compile(rb" for job ([1-9][0-9]*)\n")
# A suspend line (``slurm_suspend error`` alone or ``slurm_suspend error:<anything>``), with the
# newline before it: matched in ``b"\n" + lines``, so each is found from a fixed prefix.
_SUSPEND_LINE = re.compile(rb"\nslurm_suspend error(?::[^\n]*)?(?=\n)")
# Up to this many distinct lines, each is read once in Python (``_id_lines_distinct``).
_FEW_LINES = 256
# A stderr this short is split into its lines first: the regex naming the ids costs ~70 us to
# compile, what reading a few hundred short lines costs (the usual stderr is a line per id).
_SMALL = 16384
_LAST_LINE = methodcaller("rpartition", b"\n")
_AFTER_LAST_NEWLINE = itemgetter(2)
_REV_PARTS = methodcaller("partition", _REV_FOR_JOB)
_FIRST = itemgetter(0)
_THIRD = itemgetter(2)
_REVERSED = itemgetter(slice(None, None, -1))
_WHOLE_LINE = itemgetter(1)  # a match's line, reversed

# The lines found, each as a key (one per line, in order, equal for equal lines); each distinct
# key, in order of first sight, with how often it came; each key's id token, message and line
# (with its newline); the lines left unaccounted, joined.
_IdLines = Tuple[List[bytes], "Counter[bytes]", Dict[bytes, bytes], Dict[bytes, bytes], Dict[bytes, bytes], bytes]


class _Joined(NamedTuple):
    """``_joined_id_lines``' answer, by id token in order of first sight: its lines joined, their count,
    a one-line id's message; and the unaccounted lines, joined."""

    own: Dict[bytes, bytes]
    tally: Dict[bytes, int]
    head: Dict[bytes, bytes]
    loose: bytes


def _id_lines(
    ids: Sequence[str], lines: bytes, explained: FrozenSet[bytes]
) -> Union[_IdLines, _Joined, None]:
    """The lines ending in `` for job <id>`` with an id of ``ids``, in order (each one's token, message
    and line), and ``lines`` without those whose message is ``explained``; None if there is none.
    Four ways by cost, one answer (docs/contract.md §6; tests/core/test_reader_speed.py)."""
    known = list(map(str.encode, ids))  # canonical ids: ASCII digits, nothing to escape
    if len(known) > _FEW_IDS or len(lines) <= _SMALL:
        pieces = lines.split(b"\n")
        pieces.pop()  # b"": every line ends with its newline
        distinct = dict.fromkeys(pieces)  # in order of first sight (in C)
        if len(distinct) <= _FEW_LINES:
            return _id_lines_distinct(set(known), pieces, list(distinct), lines, explained)
        if len(known) > _FEW_IDS:
            return _id_lines_split(set(known), lines, explained)
    back = lines[::-1]
    ids_back = b"|".join(job[::-1] for job in known)
    finder = re.compile(b"\n((?:" + ids_back + b")" + _REV_FOR_JOB + b"[^\n]*)")
    first = list(islice(finder.finditer(back), _FEW_LINES + 1))  # no more objects than that
    if not first:
        return None
    if len(first) <= _FEW_LINES:
        found = list(map(_WHOLE_LINE, first))
    else:  # many id lines: an object each would cost ~0.3 us a line (docs/benchmarks.md §5)
        seen_toks = set(map(_REVERSED, map(_FIRST, map(_REV_PARTS, map(_WHOLE_LINE, first)))))
        joined = _joined_id_lines(known, seen_toks, lines, back, explained)
        if joined is not None:
            return joined
        found = finder.findall(back)
    found.reverse()  # in the order they came
    counts = Counter(found)
    seen = list(counts)  # each distinct line once, its parts in C
    parts = list(map(_REV_PARTS, seen))
    toks_of = dict(zip(seen, map(_REVERSED, map(_FIRST, parts))))
    heads_of = dict(zip(seen, map(_REVERSED, map(_THIRD, parts))))
    lines_of = dict(zip(seen, map(add, map(_REVERSED, seen), repeat(b"\n"))))
    good = list(map(explained.__contains__, heads_of.values()))
    if not any(good):
        return found, counts, toks_of, heads_of, lines_of, lines
    if all(good) and sum(map(mul, map(len, seen), counts.values())) + len(found) == len(lines):
        return found, counts, toks_of, heads_of, lines_of, b""  # every line is one found, and explained
    return found, counts, toks_of, heads_of, lines_of, _cut_explained(back, ids_back, explained, all(good))


def _cut_explained(back: bytes, ids_back: bytes, explained: FrozenSet[bytes], all_found: bool) -> bytes:
    """The lines without the explained id lines, from them reversed (``back``): every line found
    when ``all_found`` says each is explained, else those whose message is one of ``explained``."""
    if all_found:
        pattern = b"\n(?:" + ids_back + b")" + _REV_FOR_JOB + b"[^\n]*"
    else:
        messages = b"|".join(re.escape(message[::-1]) for message in explained)
        pattern = b"\n(?:" + ids_back + b")" + _REV_FOR_JOB + b"(?:" + messages + b")(?=\n|\\Z)"
    return re.sub(pattern, b"", back)[::-1]


def _joined_id_lines(
    known: List[bytes], seen: Set[bytes], lines: bytes, back: bytes, explained: FrozenSet[bytes]
) -> Optional[_Joined]:
    """``_id_lines`` with each id's lines found joined, by C-level counts: no object per line.
    ``seen``: ids known to have a line.  None (read line by line) if two ids have two lines or more."""
    unseen = [tok for tok in known if tok not in seen]
    if unseen and re.search(b"\n(?:" + b"|".join(tok[::-1] for tok in unseen) + b")" + _REV_FOR_JOB, back):
        unseen = []  # one at least has a line: count them all
    ends = {tok: _FOR_JOB + tok + b"\n" for tok in known}  # an id's line ends so, and only its
    count = {tok: 0 if tok in unseen else lines.count(end) for tok, end in ends.items()}
    first = {tok: lines.find(ends[tok]) for tok in known if count[tok]}
    holders = sorted(first, key=first.__getitem__)  # in order of first sight
    if sum(count[tok] > 1 for tok in holders) > 1:
        return None
    own: Dict[bytes, bytes] = {}
    head: Dict[bytes, bytes] = {}
    for tok in holders:
        if count[tok] == 1:
            start = lines.rfind(b"\n", 0, first[tok]) + 1
            own[tok], head[tok] = lines[start : first[tok] + len(ends[tok])], lines[start : first[tok]]
        elif count[tok] == lines.count(b"\n"):  # every line is its
            own[tok] = lines
        else:  # its lines alone: every other line (reversed, the newline before it) taken out
            own[tok] = re.sub(b"\n(?!" + tok[::-1] + _REV_FOR_JOB + b")[^\n]*", b"", back)[::-1]
    loose = _cut_joined(lines, back, holders, ends, count, explained)
    return _Joined(own, {tok: count[tok] for tok in holders}, head, loose)


def _cut_joined(
    lines: bytes,
    back: bytes,
    holders: List[bytes],
    ends: Dict[bytes, bytes],
    count: Dict[bytes, int],
    explained: FrozenSet[bytes],
) -> bytes:
    """``lines`` without the explained lines of ``holders`` (the ids with lines, ``count`` each), cut
    by one regex over the stderr reversed, or none at all for copies of one id's one line."""
    tok = holders[0]
    line = lines[: lines.find(b"\n") + 1]
    if len(holders) == 1 and line.endswith(ends[tok]) and line * count[tok] == lines:
        return b"" if line[: -len(ends[tok])] in explained else lines
    return _cut_explained(back, b"|".join(tok[::-1] for tok in holders), explained, False)


def _id_lines_distinct(
    known: Set[bytes], pieces: List[bytes], distinct: List[bytes], lines: bytes, explained: FrozenSet[bytes]
) -> Optional[_IdLines]:
    """``_id_lines`` for few distinct lines: each read once, then found again among ``pieces``
    (the lines, without their newlines) with C-level filters."""
    toks_of: Dict[bytes, bytes] = {}
    heads_of: Dict[bytes, bytes] = {}
    good: Set[bytes] = set()
    for piece in distinct:
        head, sep, tok = piece.rpartition(_FOR_JOB)
        if sep and tok in known:  # a canonical id: the token is one only if it matches one
            toks_of[piece], heads_of[piece] = tok, head
            if head in explained:
                good.add(piece)
    if not toks_of:
        return None
    found = list(filter(toks_of.__contains__, pieces))  # in the order they came
    lines_of = {piece: piece + b"\n" for piece in toks_of}
    counts = Counter(found)
    if not good:
        return found, counts, toks_of, heads_of, lines_of, lines
    kept = list(filterfalse(good.__contains__, pieces))
    return found, counts, toks_of, heads_of, lines_of, b"\n".join(kept) + b"\n" if kept else b""


def _id_lines_split(known: Set[bytes], lines: bytes, explained: FrozenSet[bytes]) -> Optional[_IdLines]:
    """``_id_lines`` for many ids: split at every `` for job <id>`` ending, the explained lines cut out
    where the split's lengths place them."""
    parts = _ID_LINE.split(lines)  # text, token, text, token, ..., text
    texts, tokens = parts[0::2], parts[1::2]
    flags = list(map(known.__contains__, tokens))  # which id line ends in an id of the call
    if not any(flags):
        return None
    toks = list(compress(tokens, flags))
    heads = list(map(_AFTER_LAST_NEWLINE, map(_LAST_LINE, compress(texts, flags))))
    owned = list(map(b"".join, zip(heads, repeat(_FOR_JOB), toks, repeat(b"\n"))))
    good = list(map(explained.__contains__, heads))
    tok_of, head_of, line_of = dict(zip(owned, toks)), dict(zip(owned, heads)), dict(zip(owned, owned))
    counts = Counter(owned)
    if not any(good):
        return owned, counts, tok_of, head_of, line_of, lines
    # Where each id line ends: the texts and tokens up to it, and the `` for job `` and newline
    # the split took off each match up to it.
    step = len(_FOR_JOB) + 1
    ends = list(compress(map(add, map(add, accumulate(map(len, texts)), accumulate(map(len, tokens))),
                             range(step, step * (len(tokens) + 1), step)), flags))
    starts = list(map(sub, ends, map(len, owned)))
    # The lines without the explained ones: the spans between them, in order.
    cuts = map(slice, chain((0,), compress(ends, good)), chain(compress(starts, good), (None,)))
    return owned, counts, tok_of, head_of, line_of, b"".join(map(lines.__getitem__, cuts))


def _explained(allowed: FrozenSet[str]) -> FrozenSet[bytes]:
    """The messages that explain an id's one line: the call's allowed refusals and ``Unexpected``."""
    return frozenset(message.encode("ascii") for message in allowed | {UNEXPECTED})


def _line_call(
    number: int,
    status: Optional[int],
    text: str,
    own: bytes,
    count: int,
    message: Optional[str],
    allowed: FrozenSet[str],
) -> Call:
    """The call of an id with its own line(s) (``count`` of them, joined in ``own``): what the
    line says, if it is one allowed refusal."""
    if count == 1 and message is not None and message in allowed:
        outcome = CallOutcome.NOT_FOUND if message == INVALID_JOB_ID else CallOutcome.REJECTED
        return Call(number, status, text, own, outcome, message, None)
    return Call(number, status, text, own, CallOutcome.UNKNOWN, None, Reason.UNRECOGNISED_STDERR)


def _every(
    ids: Sequence[str],
    number: int,
    status: Optional[int],
    text: str,
    stderr: bytes,
    outcome: CallOutcome,
    reason: Optional[Reason],
) -> ListCall:
    """Every id the same outcome: one id keeps ``stderr`` as the single reader would; with
    several, no id owns any of it, so it is the call's ``unowned``, once."""
    if len(ids) == 1:
        return ListCall({ids[0]: Call(number, status, text, stderr, outcome, None, reason)})
    call = Call(number, status, text, b"", outcome, None, reason)
    return ListCall({job: call for job in ids}, stderr if stderr.strip(BLANK) else b"")


def _call_key(op: Union[Op, str], number: object) -> Tuple[Op, int, FrozenSet[str]]:
    """The op, the call number and the messages allowed for that call (docs/contract.md §5)."""
    op = read_op(op)
    plain = _call_number(number)
    allowed = ALLOWED.get((op, plain))
    if allowed is None:
        raise InvalidInput(f"{op.value} has no call {plain}")
    return op, plain, allowed


def _call_ids(job_ids: Sequence[JobId]) -> List[str]:
    """A list call's ids: at least one, each valid, no id twice (docs/contract.md §11)."""
    ids, given = _ids(job_ids)
    if not ids:
        raise InvalidInput("a list call has at least one job id")
    if len(ids) != given:
        raise InvalidInput("a list call never has the same job id twice (docs/slurm-bulk.md §3.2)")
    return ids


def _distinct_ids(job_ids: Sequence[JobId]) -> List[str]:
    """The ids, each validated, first copies only, order kept; a str or bytes is not a list of ids."""
    return _ids(job_ids)[0]


def _ids(job_ids: Sequence[JobId]) -> Tuple[List[str], int]:
    """The distinct valid ids in order, and how many were given."""
    if type(job_ids) is JobIds:  # checked already, none twice
        return list(job_ids), len(job_ids)
    if isinstance(job_ids, (str, bytes, bytearray, memoryview)):
        raise InvalidInput("job ids must be a sequence of ids, not one string")
    try:
        given = list(job_ids)
    except Exception:  # not iterable, or a hostile sequence whose iteration raises
        raise InvalidInput(f"job ids must be a sequence, not {described(job_ids)}") from None
    seen: Dict[str, None] = {}
    for raw in given:
        seen.setdefault(validate_job_id(raw), None)
    return list(seen), len(given)


def _call_number(number: object) -> int:
    return _whole(number, "call number", 1, None)


def _whole(value: object, what: str, low: int, high: Optional[int]) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not issubclass(type(value), int):
        raise InvalidInput(f"{what} must be an int, not {type(value).__name__}")
    plain = int.__int__(value)
    if plain < low or (high is not None and plain > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise InvalidInput(f"{what} must be {bound}, got {plain}")
    return plain


def _status(status: object) -> Tuple[Optional[int], str]:
    """The status as a plain int if readable (docs/contract.md §4), and its text."""
    code = parse_status(status)
    if code is not None:
        plain = int.__int__(code)
        return plain, int.__repr__(plain)
    if status is None:
        return None, ""
    if isinstance(status, str) and issubclass(type(status), str):
        return None, str.__str__(status)
    if isinstance(status, int) and not isinstance(status, bool) and issubclass(type(status), int):
        return None, int.__repr__(int.__int__(status))
    return None, f"<{type(status).__name__}>"


def _ascii(raw: bytes) -> Optional[str]:
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError:
        return None
