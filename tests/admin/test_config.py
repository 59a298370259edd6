"""The config file: a strict reader, the checks of the file itself, and the precedence of flag,
environment, file and default (docs/contract.md §10.2).

Expected answers come from the contract's words through a naive model written here: a file built
line by line from known pieces, and "flag, then environment, then file, then built-in default".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl.run import config
from slurm_dsl.run.config import SETTINGS, ConfigFileError, parse, read, resolve

PATH = "/etc/slurm-dsl/slurm-dsl.conf"
GOOD = {
    "ledger": "/var/lib/slurm-dsl/ledger.sqlite3",
    "scontrol": "/usr/bin/scontrol",
    "squeue": "/usr/bin/squeue",
    "lookup": "squeue",
    "timeout": "30",
    "settle_delay": "10",
    "rate": "200",
    "redo_lost": "yes",
    "metrics_file": "/var/lib/prometheus/node-exporter/slurm_dsl.prom",
    "log_level": "info",
    "service_account": "slurm",
}


def test_a_whole_file() -> None:
    text = (
        "# slurm-dsl's settings\n\n; another comment\n[slurm-dsl]\n"
        + "".join(f"  {k} =  {v}  \n" for k, v in GOOD.items())
    ).encode()
    got = parse(text, PATH)
    assert {k: v for k, (v, _) in got.items()} == GOOD
    assert got["ledger"][1] == 5 and got["log_level"][1] == 14


def test_every_setting_has_a_good_example_here() -> None:
    assert set(GOOD) == {s.key for s in SETTINGS}


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("[slurm-dsl]\nledgr = /x\n", 2, "unknown key 'ledgr'"),
        ("[slurm-dsl]\ntimeout = 5\ntimeout = 6\n", 3, "timeout given twice (first on line 2)"),
        ("timeout = 5\n[slurm-dsl]\n", 1, "comes before the [slurm-dsl] section"),
        ("[main]\n", 1, "unknown section [main]"),
        ("[slurm-dsl\n", 1, "a section header must be [slurm-dsl]"),
        ("[slurm-dsl]\n[slurm-dsl]\n", 2, "[slurm-dsl] given twice"),
        ("[slurm-dsl]\njust words\n", 2, "expected key = value"),
        ("[slurm-dsl]\n= 5\n", 2, "expected key = value"),
        ("[slurm-dsl]\ntimeout = 0\n", 2, "timeout must be a number of seconds from 0.001"),
        ("[slurm-dsl]\ntimeout = nan\n", 2, "timeout must be a number of seconds"),
        ("[slurm-dsl]\ntimeout = soon\n", 2, "timeout must be a number of seconds"),
        ("[slurm-dsl]\nsettle_delay = 1.5\n", 2, "settle_delay must be a number of seconds from 2"),
        # core.numbers' ASCII rule: float() takes these, a job id would not.
        ("[slurm-dsl]\ntimeout = 1_0\n", 2, "timeout must be a number of seconds from 0.001 to 86400, in ASCII"),
        ("[slurm-dsl]\ntimeout = \u0661\u0660\n", 2, "timeout must be a number of seconds"),
        ("[slurm-dsl]\nsettle_delay = \uff15\n", 2, "settle_delay must be a number of seconds from 2"),
        ("[slurm-dsl]\ntimeout = infinity\n", 2, "timeout must be a number of seconds"),
        ("[slurm-dsl]\nlookup = slurmrestd\n", 2, "lookup must be one of auto, squeue, pyslurm"),
        ("[slurm-dsl]\nscontrol = scontrol\n", 2, "scontrol must be an absolute path"),
        ("[slurm-dsl]\nledger = ledger.sqlite3\n", 2, "ledger must be an absolute path, sqlite:/PATH or a mariadb://"),
        ("[slurm-dsl]\nlog_level = loud\n", 2, "log_level must be one of error, warning, info, debug"),
        ("[slurm-dsl]\nservice_account = slurm user\n", 2, "service_account must be an account name"),
        ("[slurm-dsl]\nservice_account = -slurm\n", 2, "service_account must be an account name"),
        ("[slurm-dsl]\nmetrics_file =\n", 2, "metrics_file must be an absolute path, not ''"),
        ("[slurm-dsl]\nlookup = a\x00b\n", 2, "a NUL byte"),
    ],
)
def test_a_bad_line_is_named_by_file_line_and_key(text: str, line: int, words: str) -> None:
    with pytest.raises(ConfigFileError) as err:
        parse(text.encode(), PATH)
    assert str(err.value).startswith(f"{PATH}, line {line}: ")
    assert words in str(err.value)
    assert not err.value.unreadable


def test_not_utf8_and_too_long() -> None:
    with pytest.raises(ConfigFileError, match=r", line 3: not UTF-8"):
        parse(b"[slurm-dsl]\n\nlookup = \xff\n", PATH)
    with pytest.raises(ConfigFileError, match="longer than"):
        parse(b"#" * (config.MAX_CONFIG + 1), PATH)


def test_a_hostile_value_is_shown_escaped() -> None:
    with pytest.raises(ConfigFileError) as err:
        parse(b"[slurm-dsl]\nlookup = \x1b[31mred\n", PATH)
    assert "\x1b" not in str(err.value)


# -- a naive model: a file built from pieces whose meaning is known ---------------------------

PIECES = st.sampled_from(["", "# c", "; c", "   ", "\t# indented"])


@st.composite
def files(draw: st.DrawFn) -> Tuple[bytes, Dict[str, Tuple[str, int]]]:
    lines: List[str] = [draw(PIECES) for _ in range(draw(st.integers(0, 3)))]
    lines.append(draw(st.sampled_from(["[slurm-dsl]", " [ slurm-dsl ] "])))
    expected: Dict[str, Tuple[str, int]] = {}
    for key in draw(st.permutations(list(GOOD))):
        if draw(st.booleans()):
            continue
        lines += [draw(PIECES) for _ in range(draw(st.integers(0, 2)))]
        pad = draw(st.sampled_from(["", " ", "\t"]))
        lines.append(f"{pad}{key}{pad}={pad}{GOOD[key]}{pad}")
        expected[key] = (GOOD[key], len(lines))
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    return ending.join(lines).encode(), expected


@given(files())
def test_parse_reads_what_was_written(case: Tuple[bytes, Dict[str, Tuple[str, int]]]) -> None:
    text, expected = case
    assert parse(text, PATH) == expected


LAYER = st.sampled_from([None, "v"])


@given(st.lists(st.tuples(LAYER, LAYER, LAYER), min_size=len(SETTINGS), max_size=len(SETTINGS)))
def test_flag_then_environment_then_file_then_default(layers: List[Tuple[Optional[str], ...]]) -> None:
    flags: Dict[str, Optional[str]] = {}
    env: Dict[str, str] = {}
    file: Dict[str, Tuple[str, int]] = {}
    for s, (flag, from_env, from_file) in zip(SETTINGS, layers):
        if flag:
            flags[s.key] = f"flag-{s.key}"
        if from_env and s.env:
            env[s.env] = f"env-{s.key}"
        if from_file:
            file[s.key] = (f"file-{s.key}", 7)
    got = resolve(flags, env, file, PATH)
    for s in SETTINGS:
        want: Tuple[Optional[str], str, str]
        if s.key in flags:
            want = (f"flag-{s.key}", "flag", "--" + s.key.replace("_", "-"))
        elif s.env and s.env in env:
            want = (f"env-{s.key}", "env", "$" + s.env)
        elif s.key in file:
            want = (f"file-{s.key}", "file", f"{PATH}:7")
        else:
            want = (s.default, "default", "built in")
        e = got[s.key]
        assert (e.value, e.source, e.origin) == want


# -- the file itself ---------------------------------------------------------------------------


def write(path: Path, text: str = "[slurm-dsl]\nlookup = squeue\n", mode: int = 0o644) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_read_gives_the_settings(tmp_path: Path) -> None:
    assert read(str(write(tmp_path / "c.conf")), required=True) == {"lookup": ("squeue", 2)}


def test_a_missing_default_file_is_no_error_but_a_named_one_is(tmp_path: Path) -> None:
    assert read(str(tmp_path / "none.conf"), required=False) == {}
    with pytest.raises(ConfigFileError, match="no config file at") as err:
        read(str(tmp_path / "none.conf"), required=True)
    assert err.value.unreadable


def test_a_symlink_is_refused(tmp_path: Path) -> None:
    target = write(tmp_path / "real.conf")
    (tmp_path / "link.conf").symlink_to(target)
    with pytest.raises(ConfigFileError, match="a symlink: refused") as err:
        read(str(tmp_path / "link.conf"), required=True)
    assert err.value.unreadable


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666])
def test_a_file_others_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    with pytest.raises(ConfigFileError, match=r"writable by group or others .* chmod go-w"):
        read(str(write(tmp_path / "c.conf", mode=mode)), required=True)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d.conf").mkdir()
    with pytest.raises(ConfigFileError, match="not a regular file"):
        read(str(tmp_path / "d.conf"), required=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file to another account")
def test_a_file_of_another_account_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "c.conf")
    os.chown(path, 65534, 65534)
    with pytest.raises(ConfigFileError, match="belongs to uid 65534, neither root nor this account"):
        read(str(path), required=True)


def test_which_file(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.config_path("/x.conf", {}) == ("/x.conf", True)
    assert config.config_path(None, {"SLURM_DSL_CONFIG": "/y.conf"}) == ("/y.conf", True)
    assert config.config_path(None, {}) == (config.DEFAULT_CONFIG, False)
