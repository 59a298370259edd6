"""The bulk path (docs/contract.md §11) against a fake scontrol that takes id lists the way
real scontrol does (tests/fakes.py write_list_fake): one process per call for a whole
chunk, each id its own result, the same as a single operation would give it, recorded."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from slurm_dsl import Op, Reason, RequeueBit, Result
from slurm_dsl.admin.cli import main
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.lookups.squeue import MAX_LISTED
from slurm_dsl.run import bulk
from slurm_dsl.run.background import Background
from slurm_dsl.run.bulk import chunk_limit, run_many
from slurm_dsl.run.pace import Pace
from slurm_dsl.run.tracked import Tracker
from tests.cli_run import cli
from tests.fakes import calls_made, write_fake_squeue, write_list_fake
from tests.ledger_ops import acquire_lease

Plan = Dict[str, Dict[str, str]]

# Per id, what each call says: hold, release, set (update Requeue=1), requeue, clear (Requeue=0).
PLAN: Plan = {
    "11": {"hold": "ok", "release": "ok", "set": "ok", "requeue": "ok", "clear": "ok"},
    "12": {"hold": "finished", "release": "finished", "set": "finished", "clear": "finished"},
    "13": {"hold": "missing", "release": "missing", "set": "missing", "clear": "missing"},
    "14": {"hold": "denied", "release": "access", "set": "denied", "clear": "denied"},
    "15": {"hold": "ok", "release": "ok", "set": "ok", "requeue": "pending", "clear": "ok"},
    "16": {"hold": "ok", "release": "ok", "set": "ok", "requeue": "ok", "clear": "down"},
}
KNOWN = "".join(f"{j}|RUNNING|0|0|1|None\n" for j in ("11", "12", "14", "15", "16"))  # 13 never existed


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The list-taking scontrol and a squeue beside it that knows every job but 13."""
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    fake = write_list_fake(tmp_path / "bin", PLAN)
    write_fake_squeue(tmp_path / "bin", KNOWN)
    return fake


def single_results(tmp_path: Path, op: Op, ids: List[str]) -> Dict[str, tuple]:  # type: ignore[type-arg]
    """The same ops one by one (the list fake takes a list of one as real scontrol does)."""
    with Tracker(str(tmp_path / "single.sqlite3"), scontrol=str(tmp_path / "bin" / "scontrol")) as t:
        outs = [t.run(op, j, time.time() + 10) for j in ids]
    return {o.job_id: (o.result, o.requeue_bit, [c.message for c in o.calls]) for o in outs}


@pytest.mark.parametrize("op", [Op.HOLD, Op.RELEASE, Op.REQUEUE, Op.RESTORE, Op.OPEN], ids=str)
def test_each_id_gets_what_a_single_op_gives_it(tmp_path: Path, fakes: Path, op: Op) -> None:
    ids = list(PLAN)
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fakes)) as t:
        bulk = list(run_many(t, op, ids, 10.0))
    list_calls = [c for c in calls_made(fakes) if c != "ping"]
    assert len(list_calls) == (3 if op in (Op.REQUEUE, Op.REQUEUE_HOLD) else 1)
    got = {o.job_id: (o.result, o.requeue_bit, [c.message for c in o.calls]) for o in bulk}
    want = single_results(tmp_path, op, ids)
    if op is not Op.RESTORE:  # corroboration: a list call's SUCCESS for a never-existed id is not trusted
        assert got.pop("13")[0] is Result.NOT_FOUND
        want.pop("13")
    assert got == want
    with open_ledger(tmp_path / "ledger.sqlite3") as ledger:
        assert all(ledger.history(j)[-1].result is got_o.result for j, got_o in zip(ids, bulk))


def test_requeue_runs_call_2_only_where_call_1_succeeded(tmp_path: Path, fakes: Path) -> None:
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fakes)) as t:
        out = {o.job_id: o for o in run_many(t, Op.REQUEUE, list(PLAN), 10.0)}
    set_call, requeue_call, clear_call = [c for c in calls_made(fakes) if c != "ping"]
    assert set_call == "update JobId=11,12,13,14,15,16 Requeue=1"
    assert requeue_call == "requeue 11,15,16"
    assert clear_call == "update JobId=11,12,13,14,15,16 Requeue=0"
    assert (out["11"].result, out["11"].requeue_bit) == (Result.OK, RequeueBit.CLEAR)
    assert (out["15"].result, out["15"].requeue_bit) == (Result.REJECTED, RequeueBit.CLEAR)
    assert (out["16"].result, out["16"].requeue_bit) == (Result.UNKNOWN, RequeueBit.MAY_BE_SET)
    with open_ledger(tmp_path / "ledger.sqlite3") as ledger:
        assert ledger.get("16").bit is RequeueBit.MAY_BE_SET  # type: ignore[union-attr]


def test_a_controller_that_is_not_up_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    monkeypatch.setattr(bulk, "ANSWER_FRESH", -1.0)  # the ids' lookup is too old to stand in for a ping
    fake = write_list_fake(tmp_path / "bin", PLAN, up=False)
    write_fake_squeue(tmp_path / "bin", KNOWN)
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fake)) as t:
        out = list(run_many(t, Op.REQUEUE, list(PLAN), 10.0))
    assert {(o.result, o.reason.value if o.reason else None) for o in out} == {(Result.NOT_RUN, "controller_down")}
    assert calls_made(fake) == ["ping"]
    with open_ledger(tmp_path / "ledger.sqlite3") as ledger:
        assert all(ledger.get(j).bit is RequeueBit.CLEAR for j in PLAN)  # type: ignore[union-attr]


def test_a_lookup_that_just_answered_stands_in_for_the_ping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """slurmctld answered the ids' lookup a moment ago: the first chunk sends no ping; a
    restore, which looks nothing up first, pings."""
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    fake = write_list_fake(tmp_path / "bin", PLAN)
    write_fake_squeue(tmp_path / "bin", KNOWN)
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fake)) as t:
        list(run_many(t, Op.HOLD, list(PLAN), 10.0))
        assert calls_made(fake)[0] == "hold 11,12,13,14,15,16"
        list(run_many(t, Op.RESTORE, list(PLAN), 10.0))
    assert calls_made(fake)[1:3] == ["ping", "update JobId=11,12,13,14,15,16 Requeue=0"]


def test_duplicates_get_one_result_in_input_order(tmp_path: Path, fakes: Path) -> None:
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fakes)) as t:
        out = list(run_many(t, Op.HOLD, ["15", "11", "15", "12", "11"], 10.0))
    assert [o.job_id for o in out] == ["15", "11", "12"]
    assert [c for c in calls_made(fakes) if c != "ping"] == ["hold 15,11,12"]


def test_a_job_someone_else_holds_runs_on_its_own_after_its_lease(tmp_path: Path, fakes: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    with open_ledger(path) as ledger:
        assert acquire_lease(ledger, "12", "someone else", time.time(), 0.5)
    with Tracker(path, scontrol=str(fakes)) as t:
        out = {o.job_id: o for o in run_many(t, Op.HOLD, ["11", "12", "15"], 5.0)}
    assert [c for c in calls_made(fakes) if c != "ping"] == ["hold 11,15", "hold 12"]
    assert out["12"].result is Result.REJECTED


def test_chunks_fit_the_deadline() -> None:
    assert chunk_limit(Op.HOLD, 10.0) == 1000
    assert chunk_limit(Op.HOLD, 1.0) == 100
    assert chunk_limit(Op.REQUEUE, 3.0) == 100
    assert chunk_limit(Op.HOLD, 0.001) == 1


def test_cli_reads_ids_from_stdin_and_prints_one_row_per_distinct_id(tmp_path: Path, fakes: Path) -> None:
    code, out, _ = cli(["hold", "-", "--timeout", "10", "--json", "--scontrol", str(fakes),
                        "--ledger", str(tmp_path / "l.sqlite3")], stdin="11 12\n\n15\t11\n")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["job_id"] for r in rows] == ["11", "12", "15"]
    assert [r["result"] for r in rows] == ["ok", "rejected", "ok"] and code == 10
    assert [c for c in calls_made(fakes) if c != "ping"] == ["hold 11,12,15"]


def test_cli_one_by_one_keeps_one_script_per_job(tmp_path: Path, fakes: Path) -> None:
    code, out, _ = cli(["hold", "11", "15", "--one-by-one", "--timeout", "10", "--scontrol", str(fakes),
                        "--ledger", str(tmp_path / "l.sqlite3")])
    assert code == 0 and len(out.splitlines()) == 2
    assert calls_made(fakes) == ["hold 11", "hold 15"]


@pytest.mark.parametrize(("stdin", "why"), [("11 x12\n", "stdin, id 2"), ("", "no job ids"), ("1_2", "stdin, id 1")])
def test_cli_refuses_bad_stdin_before_anything_runs(tmp_path: Path, fakes: Path, stdin: str, why: str) -> None:
    code, out, err = cli(["hold", "-", "--timeout", "10", "--scontrol", str(fakes),
                          "--ledger", str(tmp_path / "l.sqlite3")], stdin=stdin)
    assert (code, out) == (2, "") and why in err
    assert calls_made(fakes) == []


def test_a_ledger_failure_after_a_chunk_ran_prints_it_and_starts_no_other(
    tmp_path: Path, fakes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slurm_dsl.core.model import LedgerError
    from slurm_dsl.ledger.sqlite import SqliteLedger

    def full_disk(self: SqliteLedger, *args: object, **kwargs: object) -> List[RequeueBit]:
        raise LedgerError("database or disk is full", path=self.path)

    monkeypatch.setattr(SqliteLedger, "finish_operations", full_disk)
    monkeypatch.setattr("slurm_dsl.run.bulk.MAX_CHUNK", 3)
    code, out, err = cli(["hold", "11", "12", "15", "16", "14", "--timeout", "10", "--json", "--scontrol",
                          str(fakes), "--ledger", str(tmp_path / "l.sqlite3")])
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["job_id"], r["result"]) for r in rows] == [("11", "ok"), ("12", "rejected"), ("15", "ok")]
    assert "ledger error" in err and "not started: 16 14" in err
    assert code == 10, "the worst printed result, and at least 1"
    assert [c for c in calls_made(fakes) if c != "ping"] == ["hold 11,12,15"]
    with open_ledger(tmp_path / "l.sqlite3") as ledger:
        assert [h.finished for h in ledger.history("11")] == [False], "the intent stays, a crash trace"


def test_the_progress_line_shows_once_the_work_takes_more_than_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurm_dsl.admin.commands import ops

    now = [100.0]
    monkeypatch.setattr("slurm_dsl.admin.commands.ops.time.monotonic", lambda: now[0])
    stream = io.StringIO()
    progress = ops.Progress(stream)
    progress(500, 2000)
    assert stream.getvalue() == "", "quiet for the first second"
    now[0] += 1.5
    progress(1000, 2000)
    progress.close()
    assert stream.getvalue() == "\rslurm-dsl: 1000/2000 jobs\n"


@pytest.mark.parametrize("count", [MAX_LISTED, MAX_LISTED + 1])
def test_more_ids_than_max_listed_are_looked_up_in_one_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               count: int) -> None:
    # docs/slurm-bulk.md §6.1: from ~500 ids on a listing of every job costs squeue less than -j.
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    ids = [str(n) for n in range(1000, 1000 + count)]
    fake = write_list_fake(tmp_path / "bin", {})
    write_fake_squeue(tmp_path / "bin", "".join(f"{j}|PENDING|0|0|1|None\n" for j in ids))
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fake)) as t:
        t.pace = Pace(None)  # unpaced: one chunk (paced, a chunk is a second's worth of calls)
        results = {o.result for o in run_many(t, Op.HOLD, ids, 60.0)}
    assert results == {Result.OK}
    lookups = (tmp_path / "bin" / "squeue.log").read_text().splitlines()
    assert len(lookups) == 2  # the array check, and the corroboration of the ids read as ok
    assert all((" -j " in argv) is (count <= MAX_LISTED) for argv in lookups)


def test_a_requeue_is_corroborated_while_its_call_3_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only ids whose call 2 succeeded can end ok; they are looked up during call 3 (16's call
    3 fails, so it is asked about although it ends unknown), and a never-existed id whose
    calls all answered SUCCESS (17) is not_found."""
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    plan = {**PLAN, "17": {"set": "ok", "requeue": "ok", "clear": "ok"}}
    fake = write_list_fake(tmp_path / "bin", plan)
    write_fake_squeue(tmp_path / "bin", KNOWN)  # 17 is not among them
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fake)) as t:
        out = {o.job_id: o for o in run_many(t, Op.REQUEUE, ["11", "15", "16", "17"], 10.0)}
    assert {j: o.result for j, o in out.items()} == {
        "11": Result.OK, "15": Result.REJECTED, "16": Result.UNKNOWN, "17": Result.NOT_FOUND
    }
    assert out["17"].requeue_bit is RequeueBit.CLEAR
    lookups = (tmp_path / "bin" / "squeue.log").read_text().splitlines()
    assert len(lookups) == 2 and " -j 11,16,17 " in lookups[1]


def test_a_failed_corroboration_leaves_a_requeues_ok_ids_unverified(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    fake = write_list_fake(tmp_path / "bin", PLAN)
    answering = write_fake_squeue(tmp_path / "answering", KNOWN)
    squeue = tmp_path / "bin" / "squeue"  # answers the array check, then slurmctld is gone
    squeue.write_text(
        "#!/bin/sh\n"
        f'if [ -e "{tmp_path}/asked" ]; then echo "squeue: error: Unable to contact slurm controller" >&2; exit 1; fi\n'
        f': > "{tmp_path}/asked"\nexec {answering} "$@"\n'
    )
    squeue.chmod(0o755)
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fake)) as t:
        out = {o.job_id: o for o in run_many(t, Op.REQUEUE, ["11", "15"], 10.0)}
    assert out["11"].result is Result.OK and out["11"].detail.startswith("unverified: slurmctld unreachable")
    assert out["15"].result is Result.REJECTED


def test_an_error_in_the_lookup_thread_is_raised_in_the_caller() -> None:
    def broken() -> bulk.Found:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        Background(broken, "test").result()
    assert Background(lambda: {"7": None}, "test").result() == {"7": None}
    assert Background(lambda: None, "test").result() is None  # an answer of None is an answer


def write_sh(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_a_chunk_of_one_id_is_the_single_ops_own_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/contract.md §11, one id is a single op: the requeue's call 2 prints an RS byte that
    starts no status line, which makes the single script unreadable as a whole (the bit may be
    set), however well call 3 went; separate list scripts would read the bit as cleared."""
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    fake = write_sh(tmp_path / "bin" / "scontrol", (
        f"printf '%s\\n' \"$*\" >> {tmp_path / 'bin' / 'calls.log'}\n"
        "case $1 in ping) echo 'Slurmctld(primary) at vm is UP' ;; requeue) printf '\\036junk\\n' >&2 ;; esac\n"
        "exit 0\n"))
    write_fake_squeue(tmp_path / "bin", "5|RUNNING|0|0|1|None\n")
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fake)) as t:
        bulk_out = list(run_many(t, Op.REQUEUE, ["5"], 10.0))
        single = t.run(Op.REQUEUE, "5", time.time() + 10)
    assert [(o.result, o.requeue_bit, o.reason) for o in bulk_out] == [
        (single.result, single.requeue_bit, single.reason)] == [
        (Result.UNKNOWN, RequeueBit.MAY_BE_SET, Reason.MALFORMED_STATUS_LINE)]
    with open_ledger(tmp_path / "ledger.sqlite3") as ledger:
        assert ledger.get("5").bit is RequeueBit.MAY_BE_SET  # type: ignore[union-attr]


UNOWNED = 1_000_000  # bytes of lines no job owns, per call (under runner.CAP)


def test_text_no_job_owns_is_kept_once_per_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """docs/contract.md §11, bounded output: a 1,000-id requeue whose calls 1 and 3 each print
    ~1 MiB of lines no job owns: what is printed per job and recorded stays linear in ids + stderr."""
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    ids = [str(n) for n in range(1000, 2000)]
    fake = write_sh(tmp_path / "bin" / "scontrol", (
        "case $1 in ping) echo 'Slurmctld(primary) at vm is UP'; exit 0 ;; esac\n"
        f"yes 'scontrol: error: a line no job owns' | head -c {UNOWNED} >&2\n"
        "exit 1\n"))
    write_fake_squeue(tmp_path / "bin", "".join(f"{j}|RUNNING|0|0|1|None\n" for j in ids))
    ledger_path = str(tmp_path / "ledger.sqlite3")
    code = main(["requeue", *ids, "--timeout", "60", "--json", "--ledger", ledger_path, "--scontrol", str(fake),
                 "--rate", "0"])  # unpaced: one chunk of the 1,000 ids (paced, a chunk is a second's worth)
    out, err = capsys.readouterr()
    stderr_total = 2 * UNOWNED
    assert len(out) < 2 * (stderr_total + 1024 * len(ids))
    rows = [json.loads(row) for row in out.splitlines()]
    assert code == 15 and len(rows) == 1000
    assert {(r["result"], r["requeue_bit"]) for r in rows} == {("unknown", "may_be_set")}
    assert [c["number"] for c in rows[0]["calls"]] == [1, 3]
    assert "kept with job 1000" in rows[1]["detail"]
    assert sum(len(c["stderr"]) for r in rows for c in r["calls"]) == 0  # no job owns any of it
    assert err.count("no job owns (kept with job 1000)") == 2  # one diagnostic per call
    assert len(err) < 2 * (2 * bulk.SHOWN_UNOWNED + 200 * len(ids))  # a line per unknown job, the text twice
    with open_ledger(ledger_path) as ledger:
        recorded = [ledger.history(j)[-1] for j in ids]
    # Once, with the first id: each call's head, so that both calls are in its record.
    kept = recorded[0].stderr
    assert sum(h.stderr_len for h in recorded) == recorded[0].stderr_len == 2 * bulk.UNOWNED_KEPT
    assert kept == (b"scontrol: error: a line no job owns\n" * UNOWNED)[: bulk.UNOWNED_KEPT] * 2


def test_open_on_several_ids_is_one_direct_release_and_a_finished_history(tmp_path: Path, fakes: Path) -> None:
    """Issue 16: `slurm-dsl open 11 12` went to the script renderer, which refuses open: exit 1,
    no rows, two unfinished rows in the history.  Now one unwrapped `scontrol release 11,12`."""
    code, out, err = cli(["open", "11", "15", "13", "--timeout", "10", "--json", "--scontrol", str(fakes),
                          "--ledger", str(tmp_path / "l.sqlite3")])
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["job_id"], r["op"], r["result"]) for r in rows] == [("11", "open", "ok"), ("15", "open", "ok"),
                                                                    ("13", "open", "not_found")]
    assert code == 11, err
    assert [c for c in calls_made(fakes) if c != "ping"] == ["release 11,15,13"]
    with open_ledger(tmp_path / "l.sqlite3") as ledger:
        assert [[(h.op, h.finished) for h in ledger.history(j)] for j in ("11", "15", "13")] == [[(Op.OPEN, True)]] * 3


def test_open_on_a_chunk_past_its_deadline_starts_nothing(tmp_path: Path, fakes: Path) -> None:
    from slurm_dsl.run.calls import run_open_list

    calls = run_open_list(["11", "12"], time.time() - 1, str(fakes))
    assert {(c.status, c.outcome.value) for c in calls.values()} == {(75, "expired")}
    assert calls_made(fakes) == []


def test_a_refusal_before_running_writes_nothing(tmp_path: Path, fakes: Path) -> None:
    # A restore looks nothing up first, so the scontrol path is first checked by the chunk: a bad
    # one is refused before the intents, not after them (it used to leave them unfinished).
    from slurm_dsl import InvalidInput

    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol="/usr/bin/scontrol\nx") as t:
        with pytest.raises(InvalidInput):
            list(run_many(t, Op.RESTORE, ["11", "12"], 10.0))
    with open_ledger(tmp_path / "ledger.sqlite3") as ledger:
        assert [ledger.history(j) for j in ("11", "12")] == [[], []]
        assert [ledger.get(j) for j in ("11", "12")] == [None, None]
    assert calls_made(fakes) == []


# -- one lookup where one suffices (docs/contract.md §11, core/vouch.py) ----------------------

PENDING_ONES = "".join(f"{j}|PENDING|0|0|1|None\n" for j in ("11", "12", "14", "15", "16"))


def vouching(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plan: Plan, records: str, age: Optional[int]) -> Path:
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    fake = write_list_fake(tmp_path / "bin", plan, min_job_age=age)
    write_fake_squeue(tmp_path / "bin", records)
    return fake


def squeue_calls(tmp_path: Path) -> List[str]:
    return (tmp_path / "bin" / "squeue.log").read_text().splitlines()


@pytest.mark.parametrize("op", [Op.HOLD, Op.RELEASE, Op.REQUEUE, Op.OPEN], ids=str)
def test_ids_the_array_check_saw_pending_need_no_second_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: Op
) -> None:
    plan = {j: {"hold": "ok", "release": "ok", "set": "ok", "requeue": "ok", "clear": "ok"} for j in ("11", "14")}
    fake = vouching(tmp_path, monkeypatch, plan, PENDING_ONES, 300)
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fake)) as t:
        assert {o.result for o in run_many(t, op, ["11", "14"], 10.0)} == {Result.OK}
    assert len(squeue_calls(tmp_path)) == 1  # the array check alone


def test_a_never_existed_id_and_a_finished_one_are_still_looked_up_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 13 never existed and 17 had finished when the array check looked: both answered SUCCESS.
    plan = {j: {"hold": "ok"} for j in ("11", "13", "14", "17")}
    records = PENDING_ONES + "17|COMPLETED|0|0|1|None\n"
    fake = vouching(tmp_path, monkeypatch, plan, records, 300)
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fake)) as t:
        out = {o.job_id: o.result for o in run_many(t, Op.HOLD, ["11", "13", "14", "17"], 10.0)}
    assert out == {"11": Result.OK, "13": Result.NOT_FOUND, "14": Result.OK, "17": Result.OK}
    _, second = squeue_calls(tmp_path)
    assert " -j 13,17 " in f" {second} "  # only the two the array check could not vouch for


@pytest.mark.parametrize("age", [None, 1])
def test_without_min_job_age_or_past_it_every_ok_id_is_looked_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, age: Optional[int]
) -> None:
    plan = {j: {"hold": "ok"} for j in ("11", "14")}
    fake = vouching(tmp_path, monkeypatch, plan, PENDING_ONES, age)
    if age is not None:  # the call ends more than MinJobAge (1 s) after the array check began
        body = fake.read_text()
        fake.write_text(body.replace('case $1 in ping)', 'case $1 in hold) sleep 1.2 ;; esac\ncase $1 in ping)', 1))
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fake)) as t:
        assert {o.result for o in run_many(t, Op.HOLD, ["11", "14"], 10.0)} == {Result.OK}
    _, second = squeue_calls(tmp_path)
    assert " -j 11,14 " in f" {second} "


class Terminal(io.StringIO):
    """A stdout that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal,json_flag", [(True, False), (False, False), (True, True)])
def test_a_run_on_a_terminal_ends_with_its_rows_folded(
    tmp_path: Path, fakes: Path, terminal: bool, json_flag: bool
) -> None:
    """Issue 45 item 6: one line per run, per result the count and the ids by what was said;
    not when stdout is a file or a pipe, nor with --json (whose rows stay one object each)."""
    out = Terminal() if terminal else io.StringIO()
    argv = ["hold", *PLAN, "--timeout", "10", "--scontrol", str(fakes), "--ledger", str(tmp_path / "l.sqlite3")]
    code = main(argv + (["--json"] if json_flag else []), out=out)
    lines = out.getvalue().splitlines()
    assert code == 11 and len(lines) == len(PLAN) + (terminal and not json_flag)
    folded = ("ok 3 \u00b7 not_found 1 (Invalid job id specified: 13) \u00b7 rejected 2"
              " (Job has already finished: 12; Invalid user id: 14)")
    assert (lines[-1] == folded) == (terminal and not json_flag)
