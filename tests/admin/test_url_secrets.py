"""A MariaDB URL's password is never shown (docs/contract.md §9.1.1, §10.2): not by ``config``,
human or JSON, and not in any error or log line of a command given that URL, wherever it came
from (a flag, the environment, the config file) and whatever characters the password holds
(``/``, ``@``, ``?``, ``#``... end the URL's parts early, so a mask that reads the URL as a URL
shows the rest).  The password is made of a marker between such characters: any piece of it that
leaks shows the marker."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_dsl.ledger.mariadb_config import shown_url
from tests.cli_run import cli
from tests.fakes import write_fake

MARK = "Q7k"
SEPARATORS = ["/", "@", "?", "#", ":", "=", "&", "%", ";", "+", "[", "]", "!"]
passwords = st.lists(st.sampled_from([MARK, *SEPARATORS]), min_size=1, max_size=8).map(
    lambda parts: MARK + "".join(parts)
)
FORMS = [
    "mariadb://slurm:{}@db1:3306/slurm_dsl",
    "mariadb://:{}@db1/slurm_dsl",
    "mysql://slurm:{}@db1/slurm_dsl?option_file=/etc/x.cnf",
    "mariadb://db1/slurm_dsl?password={}",
    "mariadb://db1/slurm_dsl?option_file=/etc/x.cnf&password={}",
    "mariadb://db1/slurm_dsl?user=slurm&password={}#frag",
    "mariadb://{}@db1/slurm_dsl",
]
urls = st.builds(lambda form, pw: form.format(pw), st.sampled_from(FORMS), passwords)


@given(urls)
def test_the_mask_never_shows_a_piece_of_the_password(url: str) -> None:
    assert MARK not in shown_url(url) and MARK not in shown_url(url, query=True)


@pytest.mark.parametrize(("url", "shown"), [
    ("mariadb://slurm:s3cret@db1:3306/slurm_dsl", "mariadb://***@db1:3306/slurm_dsl"),
    ("mariadb://slurm:se/cr@et@db1/l", "mariadb://***@db1/l"),
    ("mariadb://slurm:se?cr@db1/l", "mariadb://***"),
    ("mariadb://db1/l?password=s3cret", "mariadb://db1/l?***"),
    ("mariadb://db1/l?option_file=/etc/x.cnf", "mariadb://db1/l?option_file=/etc/x.cnf"),
    ("mariadb://db1/l", "mariadb://db1/l"),
])
def test_what_config_shows_of_a_url(url: str, shown: str) -> None:
    assert shown_url(url, query=True) == shown


COMMANDS: List[List[str]] = [
    ["config"],
    ["config", "--json"],
    ["-vv", "hold", "5", "--timeout", "5"],
    ["requeue", "5", "6", "--timeout", "5", "--json"],
    ["history", "5"],
    ["ledger", "status", "--json"],
    ["sweep", "--json"],
    ["settle", "5"],
]


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(url=urls, where=st.sampled_from(["flag", "env", "file"]))
def test_no_command_shows_the_password_wherever_the_url_came_from(
    url: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        fake = write_fake(Path(tmp) / "bin", {}, default="echo 'Slurmctld(primary) at vm is UP'")
        config = Path(tmp) / "slurm-dsl.conf"
        config.write_text(f"[slurm-dsl]\nledger = {url}\n" if where == "file" else "[slurm-dsl]\n")
        config.chmod(0o644)
        with monkeypatch.context() as mp:
            mp.delenv("SLURM_DSL_LEDGER", raising=False)
            if where == "env":
                mp.setenv("SLURM_DSL_LEDGER", url)
            for argv in COMMANDS:
                given_ledger = ["--ledger", url] if where == "flag" else []
                code, out, err = cli([*argv, *given_ledger, "--config", str(config), "--scontrol", str(fake)])
                assert MARK not in out + err, (argv, out, err)
                assert code != 0 or argv[0] == "config", (argv, out, err)
        # The migrations' two ends are URLs too.
        code, out, err = cli(["ledger", "migrate", "--from", url, "--to", str(Path(tmp) / "l.sqlite3"),
                              "--config", str(config)])
        assert code == 1 and MARK not in out + err, (out, err)


@pytest.mark.parametrize("url", [form.format(MARK + "/" + MARK + "?" + MARK + "@" + MARK) for form in FORMS])
def test_doctor_does_not_show_it_either(url: str, bin_dir: Path) -> None:
    fake = write_fake(bin_dir, {}, default="echo 'Slurmctld(primary) at vm is UP'")
    code, out, err = cli(["doctor", "--json", "--ledger", url, "--scontrol", str(fake)])
    assert code == 1 and '"check": "ledger' in out and MARK not in out + err, out + err


def test_a_mistyped_scheme_in_the_config_file_is_refused_without_its_password(tmp_path: Path) -> None:
    config = tmp_path / "slurm-dsl.conf"
    config.write_text(f"[slurm-dsl]\nledger = maria://slurm:{MARK}/{MARK}@db1/l\n")
    code, out, err = cli(["config", "--config", str(config)])
    assert (code, out) == (2, "") and "line 2: ledger must be an absolute path" in err and MARK not in err, err


def test_the_library_s_reading_does_not_show_it_either(monkeypatch: pytest.MonkeyPatch) -> None:
    import slurm_dsl

    monkeypatch.setenv("SLURM_DSL_LEDGER", FORMS[0].format(MARK + "/" + MARK))
    configured = slurm_dsl.configuration()
    assert configured.ledger.startswith("mariadb://") and MARK not in repr(configured)
