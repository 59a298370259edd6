"""The command line: exit codes, --json, help, usage errors (docs/contract.md §10)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_dsl.admin.cli import EXIT_CODES, main
from slurm_dsl.admin.parser import build_parser
from slurm_dsl.core.model import Result
from tests.cli_run import cli, cli_process
from tests.fakes import calls_made, refuse, write_fake
from tests.ground import ALREADY_FINISHED, INVALID_JOB_ID, NONCE, UNEXPECTED, frame, suspend


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    return write_fake(
        tmp_path,
        {
            "hold": 'case $JOB in 1) exit 0 ;; 2) ' + refuse(ALREADY_FINISHED, True) + ' ;; 3) '
            + refuse(INVALID_JOB_ID, True) + ' ;; *) ' + refuse(UNEXPECTED, True) + ' ;; esac',
        },
    )


def test_exit_codes_are_the_documented_ones() -> None:
    assert {r.value: c for r, c in EXIT_CODES.items()} == {
        "unknown": 15, "bit_set": 14, "not_run": 13, "expired": 12, "not_found": 11, "rejected": 10, "ok": 0}


@pytest.mark.parametrize(("job", "code", "result"), [("1", 0, "ok"), ("2", 10, "rejected"), ("3", 11, "not_found"),
                                                      ("4", 15, "unknown")])
def test_one_job(fake: Path, job: str, code: int, result: str) -> None:
    got, out, _ = cli(["hold", job, "--timeout", "5", "--scontrol", str(fake), "--json"])
    assert got == code
    obj = json.loads(out)
    assert (obj["job_id"], obj["op"], obj["result"], obj["requeue_bit"]) == (job, "hold", result, None)
    assert obj["calls"][0]["number"] == 1 and "status" in obj["calls"][0] and "message" in obj["calls"][0]
    assert ("reason" in obj) and (obj["reason"] is not None) == (result == "unknown")


def test_worst_of_several_decides(fake: Path) -> None:
    argv = ["--scontrol", str(fake), "hold", "1", "2", "3", "--one-by-one", "--timeout", "5", "--json"]
    got, out, _ = cli(argv)
    assert got == 11
    assert [json.loads(line)["job_id"] for line in out.splitlines()] == ["1", "2", "3"]
    assert calls_made(fake) == ["hold 1", "hold 2", "hold 3"]


def test_parallel_keeps_the_order(fake: Path) -> None:
    argv = ["hold", "4", "1", "2", "--one-by-one", "--timeout", "5", "--scontrol", str(fake), "--parallel", "3"]
    got, out, _ = cli(argv)
    assert got == 15
    assert [line.split()[0] for line in out.splitlines()] == ["4", "1", "2"]


def test_a_bad_job_id_among_good_ones_runs_nothing(fake: Path) -> None:
    got, out, err = cli(["hold", "1", "1;id", "--timeout", "5", "--scontrol", str(fake)])
    assert (got, out) == (2, "")
    assert err.startswith("slurm-dsl: ") and "1;id" in err
    assert calls_made(fake) == []


@pytest.mark.parametrize(
    "argv",
    [[], ["hold"], ["hold", "1", "--timeout", "0"], ["hold", "1", "--timeout", "-1"],
     ["hold", "1", "--timeout", "nan"], ["frobnicate", "1"], ["hold", "12_3", "--timeout", "1"],
     ["read", "uhold", "1", "--exit-status", "0"], ["script", "open", "1", "--timeout", "1"]],
)
def test_usage_errors_exit_2(argv: list) -> None:  # type: ignore[type-arg]
    got, out, err = cli(argv)
    assert (got, out) == (2, "")
    assert err.startswith("slurm-dsl: ")


def test_read_from_a_file(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    log.write_bytes(frame(NONCE, [(suspend(ALREADY_FINISHED, "9"), 1, 1)]))
    got, out, _ = cli(["read", "hold", "9", "--nonce", NONCE, "--exit-status", "1", str(log), "--json"])
    assert got == 10
    assert json.loads(out)["result"] == "rejected"


def test_read_from_stdin_exits_as_the_operation_would() -> None:
    data = frame(NONCE, [(b"", 1, 0), (b"", 2, 0), (b"", 3, 75)])
    done = cli_process(["read", "requeue", "9", "--nonce", NONCE, "--exit-status", "75", "--json"], text=False,
                       input=data)
    assert done.returncode == 14
    obj = json.loads(done.stdout)
    assert (obj["result"], obj["requeue_bit"]) == ("bit_set", "set")


def test_read_of_a_missing_file_is_error_1() -> None:
    got, _, err = cli(["read", "hold", "9", "--nonce", NONCE, "--exit-status", "0", "/nonexistent/x"])
    assert got == 1 and err.startswith("slurm-dsl: cannot read")


@pytest.mark.parametrize("kind", ["fifo", "device", "symlink"])
def test_read_refuses_at_once_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    """A FIFO with no writer used to hang ``read``, /dev/zero to end in a MemoryError traceback
    (docs/contract.md §13.8): each is refused at once, exit 1."""
    path = tmp_path / "input"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        log = tmp_path / "stderr.log"
        log.write_bytes(frame(NONCE, [(suspend(ALREADY_FINISHED, "9"), 1, 1)]))
        path.symlink_to(log)
    else:
        path = Path("/dev/zero")
    done = cli_process(["read", "hold", "9", "--nonce", NONCE, "--exit-status", "1", str(path)], timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("slurm-dsl: cannot read") and "refused" in done.stderr
    assert "Traceback" not in done.stderr


def test_read_refuses_an_endless_standard_input() -> None:
    with open("/dev/zero", "rb") as zero:
        done = cli_process(["read", "hold", "9", "--nonce", NONCE, "--exit-status", "1"], stdin=zero, timeout=60)
    assert done.returncode == 1
    assert "longer than" in done.stderr and "Traceback" not in done.stderr


def test_script_prints_and_runs_nothing(fake: Path) -> None:
    got, out, _ = cli(["script", "requeue", "7", "--timeout", "5", "--scontrol", str(fake)])
    assert got == 0
    assert out.startswith("# slurm-dsl requeue 7") and "'requeue' '7'" in out
    assert calls_made(fake) == []


def test_every_command_has_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():  # type: ignore[union-attr]
        text = p.format_help()
        assert p.description, name
        assert "usage:" in text
    assert "exit status" in parser.format_help()


def test_results_on_stdout_diagnostics_on_stderr(fake: Path) -> None:
    env = dict(os.environ, SLURM_DSL_SCONTROL=str(fake))
    done = cli_process(["hold", "4", "--timeout", "5"], env=env)
    assert done.returncode == EXIT_CODES[Result.UNKNOWN]
    assert done.stdout.split()[:3] == ["4", "hold", "unknown"]
    assert all(line.startswith("slurm-dsl: ") for line in done.stderr.splitlines())


def test_the_console_script_flushes_everything_before_it_leaves() -> None:
    # run() ends the process with os._exit: what sits in stdout's buffer (a pipe: block
    # buffered) must be written first, all of it, with main's exit status.
    argv = ["script", "requeue", "7", "--timeout", "5", "--scontrol", "/usr/bin/scontrol"]
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = cli_process(argv, text=False, env=buffered)
    buffer = io.StringIO()
    assert main(argv, out=buffer) == 0
    assert done.returncode == 0 and done.stderr == b""
    def timeless(text: str) -> str:  # the nonce and the deadline's epoch milliseconds differ
        return re.sub(r"\b[0-9]{13}\b", "<ms>", re.sub(r"\b[0-9a-f]{32}\b", "<nonce>", text))

    assert timeless(done.stdout.decode()) == timeless(buffer.getvalue()) and len(done.stdout) > 1000


def test_the_console_script_is_quiet_when_its_reader_went_away() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # `slurm-dsl ... | head -0`: every write gets EPIPE
    try:
        done = cli_process(["script", "hold", "7", "--timeout", "5", "--scontrol", "/usr/bin/scontrol"],
                           capture=False, text=False, stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    assert done.returncode == 1
    assert done.stderr == b""


# -- job ids at the edges (issue 16 item 10) ----------------------------------------------------

@pytest.mark.parametrize("where", ["argv", "stdin"])
def test_an_id_of_4301_digits_is_a_usage_error_echoed_bounded(
    where: str, fake: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "edge.sqlite3"
    env = dict(os.environ, SLURM_DSL_SCONTROL=str(fake), SLURM_DSL_LEDGER=str(ledger))
    huge = "1" * 4301
    argv = ["hold", huge if where == "argv" else "-", "--timeout", "5"]
    done = cli_process(argv, text=False, env=env,
                       input=(huge + "\n").encode() if where == "stdin" else b"")
    assert done.returncode == 2 and done.stdout == b""
    assert b"Traceback" not in done.stderr and len(done.stderr) < 400
    assert done.stderr.startswith(b"slurm-dsl: ") and b"invalid job id '" + b"1" * 40 + b"'..." in done.stderr
    assert calls_made(fake) == [] and not ledger.exists()


def test_50_mb_of_nuls_on_stdin_is_one_short_line_and_nothing_ran(fake: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "edge.sqlite3"
    env = dict(os.environ, SLURM_DSL_SCONTROL=str(fake), SLURM_DSL_LEDGER=str(ledger))
    done = cli_process(["hold", "-", "--timeout", "5"], text=False, env=env, input=b"\0" * 50_000_000)
    assert done.returncode == 2 and done.stdout == b""
    assert len(done.stderr) < 400 and done.stderr.count(b"\n") == 1 and b"\0" not in done.stderr
    assert b"stdin, id 1: invalid job id '" + b"\\x00" * 40 + b"'... (more than 64 characters" in done.stderr
    assert calls_made(fake) == [] and not ledger.exists()


def test_ids_on_stdin_are_split_as_before_across_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurm_dsl.admin import options

    words = [str(n) for n in range(1, 30001)]
    text = " \t".join(words[:10000]) + "\n" + "\u2003".join(words[10000:20000]) + "\x1c" + " ".join(words[20000:])
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert options.job_ids(["-"]) == text.split() == words


@pytest.mark.parametrize("argv", [
    ["hold", "1", "--timeout", "5", "--parallel", "7" * 100_000 + "x"],
    ["hold", "1", "--timeout", "9" * 100_000],
    ["script", "\x1b[2J" * 20_000, "1", "--timeout", "5"],
    ["hold", "1", "--timeout", "5", "--" + "z" * 100_000],
])
def test_argparse_never_echoes_a_whole_argument(argv: list) -> None:  # type: ignore[type-arg]
    code, out, err = cli(argv)
    assert code == 2 and out == ""
    assert len(err) < 700 and "\x1b" not in err and err.count("\n") == 2
