"""The config file, wired into every command: ``--config``, ``$SLURM_DSL_CONFIG``, the default
file, the precedence flag > environment > file > built-in default as the commands see it, the
errors of a bad file, and ``slurm-dsl config`` (docs/contract.md §10.2).

End to end through ``slurm_dsl.admin.cli``: what a command did (which ledger it wrote, which
lookup the sweep used, whether scontrol ran) is the evidence, never the resolver's own answer.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path
from typing import Dict, List

import pytest

from slurm_dsl.admin.cli import main
from slurm_dsl.run import config
from slurm_dsl.run.deadlines import DEFAULT_TIMEOUT
from tests.cli_run import cli
from tests.fakes import calls_made, write_fake
from tests.ledger_backends import timeouts_given

KEYS = ["ledger", "scontrol", "squeue", "lookup", "timeout", "settle_delay", "rate", "redo_lost", "metrics_file",
        "log_level", "service_account"]


def conf(path: Path, *lines: str, mode: int = 0o644) -> Path:
    path.write_text("[slurm-dsl]\n" + "".join(line + "\n" for line in lines))
    path.chmod(mode)
    return path


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    return write_fake(tmp_path / "bin", {"hold": "exit 0"})


def settings_of(out: str) -> Dict[str, Dict[str, str]]:
    report = json.loads(out)
    return {s["key"]: s for s in report["settings"]}


# --- ledger: which file did the hold write? ---------------------------------------------------

def test_the_ledger_flag_beats_the_environment_beats_the_file(
    tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledgers = {name: tmp_path / f"{name}.sqlite3" for name in ("flag", "env", "file")}
    path = conf(tmp_path / "c.conf", f"ledger = {ledgers['file']}", "timeout = 5")
    monkeypatch.setenv("SLURM_DSL_CONFIG", str(path))
    hold = ["hold", "1", "--scontrol", str(fake)]

    monkeypatch.setenv("SLURM_DSL_LEDGER", str(ledgers["env"]))
    assert cli([*hold, "--ledger", str(ledgers["flag"])]).code == 0
    assert [p.exists() for p in ledgers.values()] == [True, False, False]

    assert cli(hold).code == 0
    assert [p.exists() for p in ledgers.values()] == [True, True, False]

    monkeypatch.delenv("SLURM_DSL_LEDGER")
    assert cli(hold).code == 0
    assert [p.exists() for p in ledgers.values()] == [True, True, True]


def test_with_no_ledger_anywhere_it_is_the_built_in_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_DSL_LEDGER")
    code, out, _ = cli(["config", "--json"])
    assert code == 0
    assert settings_of(out)["ledger"] == {"key": "ledger", "value": "/var/lib/slurm-dsl/ledger.sqlite3",
                                          "source": "default", "origin": "built in"}


# --- lookup: which lookup did the sweep use? --------------------------------------------------
# pyslurm is not importable here (checked), so a sweep told to use it fails, and one told to use
# squeue (the empty fake of conftest) succeeds: the lookup the sweep took is visible.

@pytest.fixture
def no_pyslurm() -> None:
    try:
        import pyslurm  # noqa: F401
    except ImportError:
        return
    pytest.skip("pyslurm is importable here: a sweep told to use it would not fail")


def sweep_lookup(argv: List[str]) -> str:
    code, out, err = cli(["sweep", "--json", *argv])
    if code != 0:
        assert code == 1 and "pyslurm" in err, err
        return "pyslurm"
    return str(json.loads(out.splitlines()[-1])["lookup"])


def test_the_lookup_flag_beats_the_environment_beats_the_file_beats_auto(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_pyslurm: None
) -> None:
    path = conf(tmp_path / "c.conf", "lookup = pyslurm")
    monkeypatch.setenv("SLURM_DSL_LOOKUP", "pyslurm")
    assert sweep_lookup(["--config", str(path), "--lookup", "squeue"]) == "squeue"
    monkeypatch.setenv("SLURM_DSL_LOOKUP", "squeue")
    assert sweep_lookup(["--config", str(path)]) == "squeue"
    monkeypatch.delenv("SLURM_DSL_LOOKUP")
    assert sweep_lookup(["--config", str(path)]) == "pyslurm"
    squeue = conf(tmp_path / "s.conf", "lookup = squeue")
    assert sweep_lookup(["--config", str(squeue)]) == "squeue"
    # Nothing anywhere: auto, which finds no pyslurm and takes squeue.
    assert sweep_lookup([]) == "squeue"
    assert settings_of(cli(["config", "--json"]).out)["lookup"]["source"] == "default"


def test_config_is_accepted_before_and_after_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_pyslurm: None
) -> None:
    monkeypatch.delenv("SLURM_DSL_LOOKUP")
    path = conf(tmp_path / "c.conf", "lookup = pyslurm")
    assert sweep_lookup([]) == "squeue"
    code, _, err = cli(["--config", str(path), "sweep"])
    assert code == 1 and "pyslurm" in err
    code, _, err = cli(["sweep", "--config", str(path)])
    assert code == 1 and "pyslurm" in err


# --- timeout ----------------------------------------------------------------------------------

def test_the_file_s_timeout_lets_hold_run_without_timeout(tmp_path: Path, fake: Path) -> None:
    path = conf(tmp_path / "c.conf", "timeout = 5")
    code, out, err = cli(["hold", "1", "--scontrol", str(fake), "--config", str(path), "--json"])
    assert (code, json.loads(out)["result"]) == (0, "ok"), err
    assert calls_made(fake) == ["hold 1"]


def test_with_no_timeout_anywhere_the_first_command_runs_within_the_built_in_deadline(
    tmp_path: Path, fake: Path
) -> None:
    """Issue 43, item 4: ``slurm-dsl hold JOBID`` on a fresh install (no --timeout, no config file
    timeout) was a usage error; it runs, within ``DEFAULT_TIMEOUT``, which the ledger's row shows:
    its ``ends_by`` is the deadline + the kill grace + the guard margin after its start."""
    ledger = tmp_path / "l.sqlite3"
    code, out, err = cli(["hold", "1", "--scontrol", str(fake), "--ledger", str(ledger), "--json"])
    assert (code, json.loads(out)["result"]) == (0, "ok"), err
    assert calls_made(fake) == ["hold 1"]
    (given,) = timeouts_given(str(ledger))
    assert DEFAULT_TIMEOUT - 2 < given <= DEFAULT_TIMEOUT
    # --help and the config file's --help say it.
    for argv, says in ((["hold", "--help"], f"else {DEFAULT_TIMEOUT:g} s"),
                       (["config", "--help"], f"timeout = {DEFAULT_TIMEOUT:g}\n")):
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown), pytest.raises(SystemExit):
            main(argv)
        assert says in " ".join(shown.getvalue().split(" ")), argv


# --- a bad file: nothing runs -------------------------------------------------------------------

def test_a_bad_line_is_exit_2_naming_file_line_and_key_and_nothing_runs(tmp_path: Path, fake: Path) -> None:
    path = conf(tmp_path / "c.conf", "timeout = 5", "lookup = sideways")
    ledger = tmp_path / "l.sqlite3"
    code, out, err = cli(["hold", "1", "--scontrol", str(fake), "--config", str(path), "--ledger", str(ledger)])
    assert code == 2 and out == ""
    assert f"{path}, line 3: lookup must be one of" in err and "'sideways'" in err
    assert calls_made(fake) == [] and not ledger.exists()


def test_an_unknown_key_is_exit_2(tmp_path: Path, fake: Path) -> None:
    path = conf(tmp_path / "c.conf", "timout = 5")
    code, _, err = cli(["hold", "1", "--timeout", "5", "--scontrol", str(fake), "--config", str(path)])
    assert code == 2 and f"{path}, line 2: unknown key 'timout'" in err
    assert calls_made(fake) == []


def refused_files(tmp_path: Path) -> Dict[str, Path]:
    real = conf(tmp_path / "real.conf", "timeout = 5")
    link = tmp_path / "link.conf"
    link.symlink_to(real)
    return {
        "a symlink: refused": link,
        "writable by group or others": conf(tmp_path / "g.conf", "timeout = 5", mode=0o664),
        "no config file at": tmp_path / "missing.conf",
    }


@pytest.mark.parametrize("why", ["a symlink: refused", "writable by group or others", "no config file at"])
def test_an_unreadable_or_refused_file_is_exit_1_and_nothing_runs(
    tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    path = refused_files(tmp_path)[why]
    for argv, env in ((["--config", str(path)], None), ([], str(path))):
        if env is not None:
            monkeypatch.setenv("SLURM_DSL_CONFIG", env)
        code, out, err = cli(["hold", "1", "--timeout", "5", "--scontrol", str(fake), *argv])
        assert (code, out) == (1, "") and why in err and str(path) in err
        assert calls_made(fake) == []


def test_the_default_file_is_read_when_there_is_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = conf(tmp_path / "default.conf", "settle_delay = 3")
    monkeypatch.setattr(config, "DEFAULT_CONFIG", str(path))
    code, out, _ = cli(["config", "--json"])
    assert code == 0
    assert settings_of(out)["settle_delay"] == {"key": "settle_delay", "value": "3", "source": "file",
                                                "origin": f"{path}:2"}
    assert json.loads(out)["read"] is True


# --- slurm-dsl config ---------------------------------------------------------------------------

def test_config_json_lists_every_setting_with_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = conf(tmp_path / "c.conf", "# a comment", "ledger = /srv/file.sqlite3", "timeout = 30",
                "metrics_file = /srv/m.prom", "log_level = error")
    monkeypatch.setenv("SLURM_DSL_LEDGER", "/srv/env.sqlite3")
    monkeypatch.setenv("SLURM_DSL_SCONTROL", "/srv/scontrol")
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    code, out, err = cli(["config", "--json", "--config", str(path), "--lookup", "pyslurm", "-v"])
    assert code == 0, err
    report = json.loads(out)
    assert (report["kind"], report["file"], report["read"]) == ("config", str(path), True)
    assert [s["key"] for s in report["settings"]] == KEYS == [s.key for s in config.SETTINGS]
    got = {s["key"]: (s["value"], s["source"], s["origin"]) for s in report["settings"]}
    assert got == {
        "ledger": ("/srv/env.sqlite3", "env", "$SLURM_DSL_LEDGER"),
        "scontrol": ("/srv/scontrol", "env", "$SLURM_DSL_SCONTROL"),
        "squeue": (None, "default", "built in"),
        "lookup": ("pyslurm", "flag", "--lookup"),
        "timeout": ("30", "file", f"{path}:4"),
        "settle_delay": ("10", "default", "built in"),
        "rate": ("500", "default", "built in"),
        "redo_lost": ("no", "default", "built in"),
        "metrics_file": ("/srv/m.prom", "file", f"{path}:5"),
        "log_level": ("warning", "flag", "-v"),  # the file's error, raised one level
        "service_account": (None, "default", "built in"),
    }


def test_config_text_names_the_file_or_that_there_was_none(tmp_path: Path) -> None:
    code, out, _ = cli(["config"])
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == KEYS
    assert lines[KEYS.index("timeout")].split() == ["timeout", f"{DEFAULT_TIMEOUT:g}", "built", "in"]
    assert lines[-1].startswith("config file: none (") and "does not exist" in lines[-1]
    path = conf(tmp_path / "c.conf", "timeout = 7")
    out = cli(["config", "--config", str(path)]).out
    assert out.splitlines()[-1] == f"config file: {path}"
    assert f"{path}:2" in out.splitlines()[KEYS.index("timeout")]


def test_config_never_shows_a_url_s_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_DSL_LEDGER", "mariadb://slurm:s3cret@db1:3306/slurm_dsl")
    for argv in (["config"], ["config", "--json"]):
        out = cli(argv).out
        assert "s3cret" not in out and "mariadb://***@db1:3306/slurm_dsl" in out


def test_a_bad_file_is_an_error_for_config_too(tmp_path: Path) -> None:
    path = conf(tmp_path / "c.conf", "settle_delay = 1")
    code, out, err = cli(["config", "--config", str(path)])
    assert code == 2 and out == "" and f"{path}, line 2: settle_delay must be" in err


def test_config_help_teaches_an_example_file_that_reads(tmp_path: Path) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["config", "--help"])
    text = out.getvalue()
    example = text[text.index("  [slurm-dsl]"):text.index("\n\n", text.index("  [slurm-dsl]"))]
    lines = [line[2:] for line in example.splitlines()]
    assert {key for key, _ in config.parse("\n".join(lines).encode(), "help").items()} == set(KEYS)


def test_a_file_value_reaches_the_sweep_as_its_settle_delay_and_metrics_file(tmp_path: Path) -> None:
    metrics = tmp_path / "m.prom"
    path = conf(tmp_path / "c.conf", f"metrics_file = {metrics}", "settle_delay = 4")
    code, _, err = cli(["sweep", "--config", str(path)])
    assert code == 0, err
    assert metrics.read_text().startswith("#")


def test_the_file_s_log_level_is_the_base_that_v_raises(tmp_path: Path, fake: Path) -> None:
    # A hold that is ok logs at info: not shown at warning, shown at info (the file's, or -v).
    quiet = conf(tmp_path / "q.conf", "timeout = 5")
    loud = conf(tmp_path / "l.conf", "timeout = 5", "log_level = info")
    hold = ["hold", "1", "--scontrol", str(fake)]
    assert "hold" not in cli([*hold, "--config", str(quiet)]).err
    assert "ok" in cli([*hold, "--config", str(loud)]).err
    assert "ok" in cli([*hold, "--config", str(quiet), "-v"]).err
    assert os.environ.get("SLURM_DSL_CONFIG") is None


# --- the shipped example ------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "contrib" / "slurm-dsl.conf"


def test_the_shipped_file_sets_nothing_and_shows_every_key_with_its_default() -> None:
    text = EXAMPLE.read_bytes()
    assert config.parse(text, str(EXAMPLE)) == {}
    shown = [line[1:] for line in text.decode().splitlines() if line.startswith("#") and " = " in line]
    uncommented = config.parse(("[slurm-dsl]\n" + "\n".join(shown)).encode(), "example")
    assert list(uncommented) == KEYS
    defaults = {s.key: s.default for s in config.SETTINGS if s.default is not None}
    assert {k: v for k, (v, _) in uncommented.items() if k in defaults} == defaults
    assert uncommented["metrics_file"][0] == "/var/lib/prometheus/node-exporter/slurm_dsl.prom"


def test_a_flag_s_seconds_are_taken_as_given_and_shown_as_given(tmp_path: Path) -> None:
    code, out, _ = cli(["config", "--json", "--timeout", "2.1234567", "--settle-delay", "3"])
    assert code == 0
    got = settings_of(out)
    assert (got["timeout"]["value"], got["settle_delay"]["value"]) == ("2.1234567", "3")
