"""``--admin-comment`` (docs/contract.md §10.4): the reason copied to the job's AdminComment after
its operation, by a wrapped call of its own, recorded under the job's lease; its result beside the
operation's row, never changing it.  The fake scontrol answers what real Slurm cannot be made to
show on demand (a call that hangs until its command is killed); its refusal texts are the real
ones (tests/ground.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from slurm_dsl.ledger.choose import open_ledger
from tests.cli_run import cli, killed_when
from tests.fakes import calls_made, refuse, write_fake, write_fake_squeue
from tests.ground import ALREADY_FINISHED, PENDING_EXECUTION

REASON = "node n1 drains: disk 'sdb' failed; $HOME `id`"


def argv(tmp_path: Path, fake: Path, *rest: str) -> List[str]:
    return [*rest, "--reason", REASON, "--admin-comment", "--json", "--timeout", "10",
            "--ledger", str(tmp_path / "ledger.sqlite3"), "--scontrol", str(fake)]


def rows(out: str) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def comment_calls(fake: Path) -> List[str]:
    return [c for c in calls_made(fake) if "AdminComment=" in c]


@pytest.mark.parametrize("op", ["hold", "release", "requeue"])
def test_the_reason_reaches_the_admin_comment_after_the_op_in_one_call_of_its_own(tmp_path: Path, op: str) -> None:
    fake = write_fake(tmp_path / "bin", {})
    code, out, err = cli(argv(tmp_path, fake, op, "71"))
    assert code == 0, (out, err)
    (row,) = rows(out)
    assert row["result"] == "ok" and row["admin_comment"]["result"] == "ok", row
    # One call after the op's, the text passed whole as one argument (nothing of it run by a shell).
    assert comment_calls(fake) == [f"update JobId=71 AdminComment=slurm-dsl {op}: {REASON}"]
    assert calls_made(fake)[-1] == comment_calls(fake)[0]
    with open_ledger(str(tmp_path / "ledger.sqlite3")) as ledger:
        (entry,) = ledger.history("71")
        (written,) = ledger.comments([entry.id])[entry.id]
        assert (written.result, written.text) == ("ok", f"slurm-dsl {op}: {REASON}")
    code, out, _ = cli(["history", "71", "--ledger", str(tmp_path / "ledger.sqlite3")])
    assert code == 0 and f"admin comment: ok: slurm-dsl {op}:" in out


def test_a_refused_op_writes_no_comment_and_a_refused_comment_leaves_the_ops_result(tmp_path: Path) -> None:
    fake = write_fake(tmp_path / "bin", {"requeue": refuse(PENDING_EXECUTION), "comment": refuse(ALREADY_FINISHED)})
    code, out, _ = cli(argv(tmp_path, fake, "requeue", "72"))
    (row,) = rows(out)
    assert code == 10 and row["result"] == "rejected" and "admin_comment" not in row, row
    assert comment_calls(fake) == []
    code, out, err = cli(argv(tmp_path, fake, "hold", "72"))
    (row,) = rows(out)
    assert code == 0 and row["result"] == "ok", row  # the comment's refusal changes nothing of the op's
    assert row["admin_comment"]["result"] == "rejected" and ALREADY_FINISHED in row["admin_comment"]["detail"]
    assert "AdminComment not written" in err


def test_admin_comment_without_a_reason_is_refused_before_anything_runs(tmp_path: Path) -> None:
    fake = write_fake(tmp_path / "bin", {})
    code, _, err = cli(["hold", "73", "--admin-comment", "--ledger", str(tmp_path / "ledger.sqlite3"),
                          "--scontrol", str(fake)])
    assert code == 2 and "give --reason" in err and calls_made(fake) == []
    assert not (tmp_path / "ledger.sqlite3").exists()


def test_many_jobs_each_get_their_comment_on_the_bulk_path(tmp_path: Path) -> None:
    fake = write_fake(tmp_path / "bin", {})
    write_fake_squeue(fake.parent, "".join(f"{j}|RUNNING|0|0|4294901|None\n" for j in ("74", "75", "76")))
    code, out, err = cli(argv(tmp_path, fake, "hold", "74", "75", "76", "--squeue", str(fake.parent / "squeue")))
    assert code == 0, (out, err)
    assert [r["admin_comment"]["result"] for r in rows(out)] == ["ok"] * 3
    assert sorted(comment_calls(fake)) == [f"update JobId={j} AdminComment=slurm-dsl hold: {REASON}"
                                           for j in ("74", "75", "76")]


def test_a_command_killed_during_its_comment_call_keeps_its_op_and_records_the_comment_unknown(
    tmp_path: Path,
) -> None:
    started = tmp_path / "comment-started"
    fake = write_fake(tmp_path / "bin", {"comment": f": > '{started}'; exec sleep 60"})
    killed_when(argv(tmp_path, fake, "requeue", "77"), started)
    with open_ledger(str(tmp_path / "ledger.sqlite3")) as ledger:
        (entry,) = ledger.history("77")
        assert entry.result is not None and entry.result.value == "ok"  # the op's own end, recorded before
        (written,) = ledger.comments([entry.id])[entry.id]
        assert written.result is None and written.finished_at is None
    code, out, _ = cli(["history", "77", "--ledger", str(tmp_path / "ledger.sqlite3"), "--json"])
    assert code == 0
    (op,) = [r for r in rows(out) if r["kind"] == "operation"]
    assert op["admin_comments"][0]["result"] == "not_recorded"
    assert "may or may not have been written" in op["admin_comments"][0]["detail"]


def test_the_library_asks_it_as_the_command_line_does_and_returns_it_in_the_outcome(tmp_path: Path) -> None:
    from slurm_dsl import AdminComment, InvalidInput, Result, run_op

    fake = write_fake(tmp_path / "bin", {})
    ledger = str(tmp_path / "ledger.sqlite3")
    with pytest.raises(InvalidInput, match="give reason="):
        run_op("hold", "78", timeout=10, ledger=ledger, scontrol=str(fake), admin_comment=True)
    assert calls_made(fake) == []
    outcome = run_op("hold", "78", timeout=10, ledger=ledger, scontrol=str(fake), reason=REASON, admin_comment=True)
    assert outcome.result is Result.OK and outcome.exits_as is Result.OK
    assert outcome.comment == AdminComment(Result.OK, "", f"slurm-dsl hold: {REASON}")
    assert outcome.to_json()["admin_comment"]["result"] == "ok"
    assert comment_calls(fake) == [f"update JobId=78 AdminComment=slurm-dsl hold: {REASON}"]
