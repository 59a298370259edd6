"""Text from outside never reaches a terminal raw (docs/contract.md §10.1, issue 16 item 9).

An squeue (or a wrapper around it) that fails with terminal escapes on stderr: OSC 52 writes the
clipboard of whoever reads the output, CSI 2J clears the screen.  The command line's error, the
sweep's lines and log records, doctor, and ``history`` afterwards show them escaped; the ledger
keeps them escaped; ``--json`` leaves them to JSON's own escapes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import unicodedata
from pathlib import Path
from typing import List

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl.admin import render, view
from slurm_dsl.core.model import Call, CallOutcome, LookupFailed, Op, Outcome, Reason, RequeueBit, Result
from slurm_dsl.core.shown import SHOWN_CAP, shown
from slurm_dsl.ledger.choose import open_ledger
from tests.cli_run import cli_process
from tests.fakes import write_fake
from tests.ledger_ops import begin_operation, finish_operation

HOSTILE = "\033]52;c;aGVsbG8=\007\033[2J"
ESCAPED = "\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J"


def raw_controls(text: str) -> List[str]:
    """The control characters (and the other non-printable ones a terminal may act on) in
    ``text``, other than newline and tab: what must never reach a terminal."""
    return [c for c in text if c not in "\n\t" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]


def hostile_squeue(directory: Path) -> Path:
    """An squeue that fails every call, --version too, printing terminal escapes on stderr."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "squeue"
    path.write_text(f"#!/bin/sh\nprintf 'squeue: error: {HOSTILE}\\n' >&2\nexit 1\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_hostile_squeue_reaches_no_terminal_raw(tmp_path: Path) -> None:
    squeue = hostile_squeue(tmp_path / "bin")
    scontrol = write_fake(tmp_path / "bin", {}, default="exit 0")
    ledger = str(tmp_path / "ledger.sqlite3")
    with open_ledger(ledger) as store:  # a requeue that started and never finished: may_be_set
        begin_operation(store, "7", Op.REQUEUE, "0" * 32, store.now())
    env = dict(os.environ, SLURM_DSL_SQUEUE=str(squeue), SLURM_DSL_SCONTROL=str(scontrol), SLURM_DSL_LEDGER=ledger,
               SLURM_DSL_LOOKUP="auto")

    done = [cli_process(["hold", "7", "--timeout", "5"], env=env)]  # the whole-array lookup fails: nothing ran
    assert done[0].returncode == 1 and "job lookup failed: squeue exited 1: squeue: error: " + ESCAPED in done[0].stderr
    done.append(cli_process(["sweep"], env=env))  # "cannot tell the Slurm version" (auto), then the lookup fails
    assert done[1].returncode == 15
    assert "cannot tell the Slurm version" in done[1].stderr and ESCAPED in done[1].stdout
    done.append(cli_process(["history", "7"], env=env))
    assert done[2].returncode == 0 and ESCAPED in done[2].stdout
    done.append(cli_process(["ledger", "status"], env=env))
    assert ESCAPED in done[3].stdout  # the last sweep's lookup error
    done.append(cli_process(["doctor"], env=env))
    assert ESCAPED in done[4].stdout
    for d in done:
        assert raw_controls(d.stdout) == [] and raw_controls(d.stderr) == [], d.args
    with open_ledger(ledger) as store:
        obj = store.get("7")
        assert obj is not None and ESCAPED in obj.lookup_error and raw_controls(obj.lookup_error) == []
        assert ESCAPED in str(store.last_sweep().summary["lookup_error"])  # type: ignore[union-attr]
    history = cli_process(["history", "7", "--json"], env=env)
    assert "\\u001b" in history.stdout or "\\\\x1b" in history.stdout
    assert raw_controls(history.stdout) == [] and json.loads(history.stdout.splitlines()[0])["lookup_error"]


def test_an_old_row_with_raw_bytes_is_escaped_when_printed(tmp_path: Path) -> None:
    ledger = str(tmp_path / "ledger.sqlite3")
    with open_ledger(ledger) as store:
        begin_operation(store, "7", Op.REQUEUE, "0" * 32, store.now())
    with sqlite3.connect(ledger) as conn:  # as a ledger written before it escaped what it keeps
        conn.execute("UPDATE objects SET why = ?, lookup_error = ?, lookup_failures = 1", (HOSTILE, HOSTILE))
    with open_ledger(ledger) as store:
        lines = render.history_lines(view.history_json("7", store.get("7"), store.history("7")))
        status = render.status_lines(view.status_json(store, store.now()))
    text = "\n".join(lines + status)
    assert raw_controls(text) == [] and text.count(ESCAPED) == 3
    history = cli_process(["history", "7", "--json"], env=dict(os.environ, SLURM_DSL_LEDGER=ledger))
    assert raw_controls(history.stdout) == [] and "\\u001b]52;c;" in history.stdout  # JSON's own escape
    assert json.loads(history.stdout.splitlines()[0])["why"] == HOSTILE
    record = {"kind": "operation", "id": 1, "started_at": "x", "started_at_epoch": 0.0, "finished_at": "y",
              "finished_at_epoch": 1.0, "op": "hold", "result": "unknown", "requeue_bit": None,
              "bit_before": "clear", "bit_after": "clear", "actor": HOSTILE, "reason": "unreadable_exit_status",
              "detail": HOSTILE, "calls": [{"number": 1, "status": HOSTILE, "outcome": "unknown",
                                            "message": HOSTILE, "reason": None}]}
    rows = "\n".join(render.history_lines([{"kind": "object", "job_id": "7", "bit": "clear", "since": "z",
                                                "why": HOSTILE, "lookup_failures": 0}, record]))
    assert raw_controls(rows) == [] and rows.count(ESCAPED) == 5


def test_both_ledgers_keep_outside_text_escaped(ledger_location: str) -> None:
    call = Call(1, 1, "1", b"", CallOutcome.UNKNOWN, None, Reason.UNRECOGNISED_STDERR)
    hold = Outcome(Op.HOLD, "8", Result.UNKNOWN, None, Reason.UNRECOGNISED_STDERR, (call,), 1, detail=HOSTILE)
    with open_ledger(ledger_location) as store:
        begin_operation(store, "7", Op.REQUEUE, "0" * 32, store.now(), actor=HOSTILE)
        finish_operation(store, begin_operation(store, "8", Op.HOLD, "1" * 32, store.now()), hold, b"", store.now())
        store.lookups_failed(["7"], HOSTILE, store.now())
        assert store.acquire_leases(["8"], "me", store.now(), 60.0) == ["8"]
        assert store.set_bits([("8", RequeueBit.CLEAR, HOSTILE)], store.now(), owner="me") == ["8"]
        seven, eight = store.get("7"), store.get("8")
        texts = [seven.lookup_error, eight.why, store.history("7")[0].actor, store.history("8")[0].detail]  # type: ignore[union-attr]
    assert texts == [ESCAPED] * 4


def test_a_lookup_error_is_escaped_and_capped_once() -> None:
    exc = LookupFailed("squeue: " + HOSTILE * 1000)
    assert raw_controls(str(exc)) == [] and len(exc.reason) <= SHOWN_CAP
    assert exc.reason.startswith("squeue: " + ESCAPED)
    assert exc.reason.endswith(f"({8 + 1000 * len(HOSTILE)} characters)")
    assert LookupFailed(exc.reason).reason == exc.reason  # shown once is shown for good


# -- shown itself, against a second reading of its rule ------------------------------------------

def naive_escape(text: str, lines: bool = False) -> str:
    """The rule from its words: every character of a non-printable category (other, separators
    other than the space) is written as Python's unicode_escape writes it."""
    out = []
    for c in text:
        cat = unicodedata.category(c)
        printable = c == " " or not (cat.startswith("C") or cat.startswith("Z"))
        if printable or (lines and c in "\n\t"):
            out.append(c)
        else:
            out.append(c.encode("unicode_escape", "backslashreplace").decode("ascii"))
    return "".join(out)


@given(st.text(), st.integers(min_value=40, max_value=400), st.booleans())
def test_shown_escapes_every_non_printable_character_within_the_cap(text: str, cap: int, lines: bool) -> None:
    got = shown(text, cap, lines=lines)
    want = naive_escape(text, lines)
    assert len(got) <= cap
    assert raw_controls(got.replace("\n", "").replace("\t", "") if lines else got) == []
    if len(want) <= cap:
        assert got == want
    else:
        note = f"... ({len(text)} characters)"
        assert got.endswith(note) and want.startswith(got[: -len(note)])
    assert shown(got, cap, lines=lines) == got


@given(st.binary(max_size=600))
def test_shown_bytes_decodes_what_it_can(raw: bytes) -> None:
    got = shown(raw)
    assert len(got) <= SHOWN_CAP and raw_controls(got) == []
    want = naive_escape(raw.decode("utf-8", "backslashreplace"))
    if len(raw) <= SHOWN_CAP and len(want) <= SHOWN_CAP:
        assert got == want


def test_shown_does_not_walk_a_huge_text() -> None:
    assert shown("\x00" * 50_000_000).endswith("... (50000000 characters)")
    assert shown(HOSTILE, None) == ESCAPED and shown("a\nb\x1b", None, lines=True) == "a\nb\\x1b"


@pytest.mark.parametrize("text", ["\u202eabc", "a\u2028b", "\x85", "\x7f", "\ud800", "\U000e0001"])
def test_the_characters_a_terminal_or_a_reader_may_be_fooled_by(text: str) -> None:
    assert shown(text).isprintable() and shown(text) != text


def test_a_log_record_cannot_forge_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    from slurm_dsl.admin import cli

    cli._setup_logging(0)
    log = logging.getLogger("slurm_dsl")
    log.warning("could not record: %s", "disk full\nslurm-dsl: all is well" + HOSTILE)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.warning("with its traceback", exc_info=True)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[0] == "slurm-dsl: could not record: disk full\\nslurm-dsl: all is well" + ESCAPED
    assert lines[1] == "slurm-dsl: with its traceback" and lines[2].startswith("Traceback")
    assert raw_controls(err) == []
