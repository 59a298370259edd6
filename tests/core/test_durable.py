"""When a change is known saved (core/durable.py, docs/contract.md §13.2): the header of a
job_state as slurmctld packs it, against a naive reading of §13.1 written apart (``struct``, which
the core may not import); and the whole-second rule."""

from __future__ import annotations

import struct
from typing import List, Optional, Tuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl.core.durable import (
    HEADER_BYTES,
    MARK_GUARD,
    UNREAD,
    Beat,
    Control,
    Look,
    controllers,
    heartbeat,
    held_for,
    looks_needed,
    may_be_held,
    may_hand_back,
    next_acknowledged_from,
    save_started,
)
from slurm_dsl.core.slurmconf import SlurmConf, Unreadable, read


def packed(started: int, version: bytes = b"PROTOCOL_VERSION", protocol: int = 0x2600) -> bytes:
    """§13.1: packstr (32-bit big-endian length counting the NUL, the bytes, the NUL), pack16,
    pack_time (64-bit big-endian), then the job id sequence and the jobs."""
    text = version + b"\0"
    return struct.pack(">I", len(text)) + text + struct.pack(">H", protocol) + struct.pack(">q", started) + b"\0" * 40


def naive_started(data: bytes) -> Optional[int]:
    if len(data) < 4:
        return None
    (length,) = struct.unpack(">I", data[:4])
    if data[4:4 + length] != b"PROTOCOL_VERSION\0":
        return None
    at = 4 + length + 2
    if len(data) < at + 8:
        return None
    (started,) = struct.unpack(">q", data[at:at + 8])
    return started if started > 0 else None


# The header of the lab's /var/spool/slurmctld/job_state (Slurm 22.05.8), byte for byte.
LAB_22_05 = bytes.fromhex("00000011" "50524f544f434f4c5f56455253494f4e00" "2600" "000000006b129a39")


def test_the_labs_file() -> None:
    assert save_started(LAB_22_05) == 0x6B129A39 == 1796381241  # 2026-12-04T10:47:21Z
    assert HEADER_BYTES == len(LAB_22_05)


@given(st.integers(1, 2**62), st.integers(0, 0xFFFF))
def test_a_header_reads_as_packed(started: int, protocol: int) -> None:
    data = packed(started, protocol=protocol)
    assert save_started(data) == naive_started(data) == started


@given(st.binary(max_size=64))
def test_any_bytes_read_as_the_naive_reading_or_nothing(data: bytes) -> None:
    assert save_started(data) == naive_started(data)


@pytest.mark.parametrize("data", [
    b"", LAB_22_05[:-1],  # cut short
    packed(1796381241, version=b"PROTOCOL_VERSIOM"),  # another string
    packed(0), packed(-5),  # no time
    b"\x00\x00\x00\x12" + b"PROTOCOL_VERSION\0\0" + b"\0" * 10,  # another length
])
def test_what_is_not_a_header_proves_nothing(data: bytes) -> None:
    assert save_started(data) is None


NOW = 10_000.0
OLD = NOW - MARK_GUARD - 1  # begun before the guard
NEW = NOW - 1  # within it


@pytest.mark.parametrize(("mark", "read", "expected"), [
    (1, [], 1),  # nothing read: the mark stays
    (5, [(5, OLD, True), (6, OLD, True)], 7),  # every one done with: past the last
    (5, [(5, OLD, True), (7, OLD, False), (9, OLD, True)], 7),  # the first not done holds it
    (5, [(5, OLD, True), (6, NEW, True), (8, OLD, True)], 6),  # one begun within the guard too
    (5, [(5, NEW, False)], 5),
])
def test_the_mark_is_the_first_row_not_done_or_too_recent(
    mark: int, read: list, expected: int  # type: ignore[type-arg]
) -> None:
    assert next_acknowledged_from(mark, read, NOW) == expected


@given(st.integers(1, 50), st.lists(st.tuples(st.booleans(), st.booleans()), max_size=20))
def test_the_mark_never_passes_a_row_that_must_be_read_again(mark: int, flags: list) -> None:  # type: ignore[type-arg]
    # The naive reading of Rule 4: every row at or after the new mark is one whose reading is
    # not over, or after it; no row below it is one that must be read again.
    read = [(mark + i, NEW if recent else OLD, done) for i, (done, recent) in enumerate(flags)]
    got = next_acknowledged_from(mark, read, NOW)
    assert got >= mark
    assert all(done and started < NOW - MARK_GUARD for op_id, started, done in read if op_id < got)
    assert got <= (read[-1][0] + 1 if read else mark)


# Rule 5, from docs/contract.md §13.6's words and slurmctld's own count of its controllers
# (src/common/read_config.c ``_load_slurmctld_host``): only a slurm.conf that is read whole and names
# one controller has no hand-back: one SlurmctldHost; or, with none, ControlMachine and no
# BackupController.  An include that cannot be read leaves it unread.  A naive reading, written
# apart: word by word, keys before "=", any case.
def naive_hand_back(text: Optional[str]) -> bool:
    if text is None:
        return True
    hosts = old = backup = 0
    for line in text.split("\n"):
        if "#" in line:
            line = line[: line.index("#")]
        words = line.split()
        if words and words[0].lower() == "include":
            return True
        for word in words:
            if "=" not in word:
                continue
            key = word[: word.index("=")].lower()
            hosts += key == "slurmctldhost"
            old += key == "controlmachine"
            backup += key == "backupcontroller"
    if hosts:
        return hosts != 1
    return old == 0 or backup > 0


def conf(text: Optional[str]) -> Optional[SlurmConf]:
    """slurm.conf's text read as slurm-dsl reads it, any file it includes unreadable (None: none)."""
    def include(name: str) -> Unreadable:
        return Unreadable("not here")

    return None if text is None else read(text, include)


@pytest.mark.parametrize(("text", "expected"), [
    (None, True),  # could not be read
    ("", True),  # names no controller
    ("SlurmctldHost=ctl\n", False),
    ("slurmctldhost=ctl(10.0.0.1)\nNodeName=n1 CPUs=2\n", False),
    ("SlurmctldHost=ctl-a\nSlurmctldHost=ctl-b\n", True),
    ("SlurmctldHost=ctl-a\n#SlurmctldHost=ctl-b\n", False),
    ("ControlMachine=ctl\n", False),
    ("ControlMachine=ctl\nBackupController=ctl-b\n", True),
    ("SlurmctldHost=ctl\nBackupController=ctl-b\n", False),  # slurmctld ignores the older key then
    ("SlurmctldHost=ctl\nInclude /etc/slurm/more.conf\n", True),
    ("SlurmctldHost=ctl-a SlurmctldHost=ctl-b\n", True),
])
def test_a_hand_back_can_happen_unless_slurm_conf_names_one_controller(text: Optional[str], expected: bool) -> None:
    assert may_hand_back(conf(text)) is expected is naive_hand_back(text)


LINES = st.sampled_from([
    "SlurmctldHost=ctl-a", "SlurmctldHost=ctl-b(10.0.0.2)", "ControlMachine=old", "BackupController=b",
    "NodeName=n[1-4] CPUs=2", "include extra.conf", "# SlurmctldHost=commented", "ClusterName=x",
    "SLURMCTLDHOST=upper", "PartitionName=p Nodes=ALL Default=YES", "", "StateSaveLocation=/var/spool",
])


@given(st.lists(LINES, max_size=8))
def test_may_hand_back_is_the_naive_reading(lines: List[str]) -> None:
    text = "\n".join(lines)
    assert may_hand_back(conf(text)) is naive_hand_back(text)



# Rule 6, from docs/contract.md §13.6's words: the heartbeat is two big-endian 64-bit integers, the
# time and the index of its writer among the SlurmctldHost lines.
def naive_beat(data: bytes) -> Optional[tuple]:  # type: ignore[type-arg]
    if len(data) != 16:
        return None
    at, writer = struct.unpack(">QQ", data)
    return None if at == 0 else (at, writer)


@given(st.binary(max_size=20) | st.builds(lambda a, b: struct.pack(">QQ", a, b),
                                           st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)))
def test_a_heartbeat_reads_as_the_naive_reading(data: bytes) -> None:
    assert heartbeat(data) == naive_beat(data)


def test_the_pairs_heartbeat() -> None:
    assert heartbeat(struct.pack(">QQ", 1796403593, 1)) == (1796403593, 1)


# Rules 6 and 7, from docs/contract.md §13.6's words: nothing sent before the end can still be held
# back once a heartbeat written after the end was seen (after the end's anchor, a look, then a look
# that saw another file) and every controller listed before its writer refused a connection, and
# that writer has been in control since for at least held_for on this host's boot clock (from the
# look that first saw that heartbeat to the look taken now), every heartbeat seen since its own.
# A naive reading, written apart.
def naive_held(control: Control, mark: Optional[int]) -> bool:
    if control.writer is None or mark is None:
        return True
    for index in range(control.writer):
        if index >= len(control.listening) or control.listening[index] is not False:
            return True
    seen_after = [b for b in sorted(control.beats) if b.place > mark]
    for i in range(1, len(seen_after)):
        if seen_after[i].seen == seen_after[i - 1].seen:
            continue
        if any(b.writer != control.writer for b in seen_after[i:]):
            return True
        return control.now is None or not control.now - seen_after[i].at >= control.held_for
    return True


# One observer's looks at the heartbeat, one per place, oldest first.
BEATS = st.lists(st.tuples(st.integers(1, 40), st.sampled_from("xyz"), st.integers(0, 1), st.floats(0, 200)),
                 max_size=6).map(lambda rows: tuple(sorted({p: Beat(p, s, w, a) for p, s, w, a in rows}.values())))


@given(st.one_of(st.none(), st.integers(0, 1)), st.lists(st.one_of(st.none(), st.booleans()), max_size=2).map(tuple),
       BEATS, st.one_of(st.none(), st.floats(0, 300)), st.one_of(st.none(), st.integers(0, 40)),
       st.sampled_from([13.0, 40.0]))
def test_may_be_held_is_the_naive_reading(writer: Optional[int], listening: tuple, beats: tuple,  # type: ignore[type-arg]
                                          now: Optional[float], mark: Optional[int], held: float) -> None:
    control = Control(writer, listening, beats, held, now)
    assert may_be_held(control, mark) is naive_held(control, mark)


# The primary (writer 0) seen writing heartbeats a (place 11, before the end's anchor at 12), b (place
# 13) and c (place 15, on the boot clock at 100); the heartbeat c was first seen written after the end.
SEEN = (Beat(11, "a", 0, 10.0), Beat(13, "b", 0, 60.0), Beat(15, "c", 0, 100.0))
SAME = (*SEEN[:2], Beat(15, "b", 0, 100.0))  # b seen again, not another file
OTHER = (*SEEN[:2], Beat(15, "c", 1, 100.0))  # c written by the backup (writer 1)


@pytest.mark.parametrize(("control", "held"), [
    (UNREAD, True),  # nothing read
    (Control(0, (), SEEN, 40.0, 140.0), False),  # c written after the end, its writer in control 40 s since
    (Control(0, (), SEEN, 40.0, 139.0), True),  # not yet 40 s: a request that waited on its socket may still come
    (Control(0, (), SEEN, 40.0, None), True),  # no boot clock now: cannot tell
    (Control(0, (), SEEN[:2], 40.0, 500.0), True),  # b alone after the anchor: maybe written before the end
    (Control(0, (), SAME, 40.0, 500.0), True),  # the same file again
    (Control(0, (), OTHER, 40.0, 500.0), True),  # another writer now
    (Control(1, (True,), OTHER, 40.0, 500.0), True),  # the primary listens
    (Control(1, (None,), OTHER, 40.0, 500.0), True),  # cannot be reached
    (Control(1, (False,), OTHER, 40.0, 500.0), False),  # it refused
    (Control(1, (), OTHER, 40.0, 500.0), True),  # the primary not asked
    (Control(0, (), SEEN, 13.0, 113.0), False),  # a shorter wait on a socket (held_for): sooner
])
def test_a_request_is_held_back_unless_the_controllers_say_it_cannot_be(control: Control, held: bool) -> None:
    assert may_be_held(control, 12) is held
    assert may_be_held(control, None) is True  # no anchor: nothing is known to be after the end


@pytest.mark.parametrize(("text", "seconds"), [
    (None, 40.0), ("", 40.0), ("MessageTimeout=3\n", 33.0), ("messagetimeout = 20 # long\n", 50.0),
    ("MessageTimeout=3\nMessageTimeout=7\n", 37.0),  # the last one counts
    ("# MessageTimeout=3\n", 40.0), ("MessageTimeout=ten\n", 130.0),
])
def test_how_long_a_request_may_wait_on_a_socket(text: Optional[str], seconds: float) -> None:
    assert held_for(conf(text)) == seconds


@pytest.mark.parametrize(("text", "expected"), [
    (None, None),
    ("", None),
    ("SlurmctldHost=ctl\n", (("ctl", 6817),)),
    ("SlurmctldHost=ctl-a(10.99.0.2)\nSlurmctldHost=ctl-b(10.99.0.3)\nSlurmctldPort=6900-6903\n",
     (("10.99.0.2", 6900), ("10.99.0.3", 6900))),
    ("slurmctldhost=a slurmctldhost=b  # SlurmctldHost=c\n", (("a", 6817), ("b", 6817))),
    ("ControlMachine=old\nControlAddr=10.0.0.1\nBackupController=bak\n", (("10.0.0.1", 6817), ("bak", 6817))),
    ("SlurmctldHost=ctl\nInclude /etc/slurm/more.conf\n", None),
    ("SlurmctldHost=ctl\nSlurmctldPort=http\n", None),
])
def test_the_controllers_in_slurm_conf_order(text: Optional[str], expected: Optional[tuple]) -> None:  # type: ignore[type-arg]
    assert controllers(conf(text)) == expected


# Rules 1 and 2, from docs/contract.md §13's words: a change is known saved once the save file is
# seen replaced after the change was seen acknowledged, twice (the first replacement may have begun
# packing before it), by one observer, in the order it looked.  A naive reading, written apart: walk
# the observer's looks after the anchor one by one, starting from the anchor's own look when it is
# this observer's, and count the looks that saw another file than the one seen just before.
def naive_saved(mark: Optional[int], own: Optional[Look], observer: str, chain: List[Tuple[int, str]]) -> bool:
    if mark is None:
        return False
    previous = own.seen if own is not None and own.observer == observer else None
    replaced = 0
    for place, seen in sorted(chain):
        if place <= mark:
            continue
        if previous is not None and seen != previous:
            replaced += 1
        previous = seen
    return replaced >= 2


CHAINS = st.lists(st.tuples(st.integers(1, 30), st.sampled_from("abcd")), max_size=8).map(
    lambda rows: [(place, seen) for place, seen in sorted(dict(rows).items())]
)


@given(st.one_of(st.none(), st.integers(0, 30)), st.one_of(st.none(), st.sampled_from([
    Look("me", "a"), Look("me", "b"), Look("other", "a")])), CHAINS)
def test_looks_needed_is_zero_exactly_when_the_naive_reading_says_saved(
    mark: Optional[int], own: Optional[Look], chain: List[Tuple[int, str]]
) -> None:
    # A chain as the ledger keeps it: each look kept only when it saw another file than the one before.
    kept = [row for i, row in enumerate(chain) if i == 0 or row[1] != chain[i - 1][1]]
    assert (looks_needed(mark, own, "me", kept) == 0) is naive_saved(mark, own, "me", kept)


@pytest.mark.parametrize(("mark", "own", "chain", "needed"), [
    (None, None, [(1, "a"), (2, "b"), (3, "c")], 3),  # no anchor: nothing proven
    (5, Look("me", "a"), [], 2),  # its own look, nothing seen since
    (5, Look("me", "a"), [(6, "a")], 2),  # seen again: not replaced
    (5, Look("me", "a"), [(6, "b")], 1),  # replaced once: that save may have begun before the change
    (5, Look("me", "a"), [(6, "b"), (7, "c")], 0),
    (5, Look("me", "a"), [(4, "b"), (6, "c")], 1),  # a look before the anchor counts for nothing
    (5, Look("other", "a"), [(6, "b"), (7, "c")], 1),  # another observer's own look: its first look is ours
    (5, None, [(6, "b"), (7, "c"), (8, "d")], 0),
    (5, Look.parse("me=a"), [(6, "b"), (7, "c")], 0),
])
def test_looks_needed(mark: Optional[int], own: Optional[Look], chain: List[Tuple[int, str]], needed: int) -> None:
    assert looks_needed(mark, own, "me", chain) == needed


def test_a_look_is_stored_and_read_back() -> None:
    look = Look("ctl:1f2e:abc123", "4711:1733500000000000000:128")
    assert Look.parse(str(look)) == look
    assert Look.parse(None) is None and Look.parse("no equals sign") is None and Look.parse("=x") is None
