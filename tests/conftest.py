"""Shared fixtures: every test gets its own ledger file, never the system's, and (outside
tests/integration) a squeue that knows no jobs for the operations' array check,
``--lookup squeue`` for sweeps and no slurm-dsl-jobinfo, so that unit tests never ask a real slurmctld and pass
whether or not a real pyslurm is installed; and a state directory whose job_state a save wrote
after everything the test does (``_saved_state``).

``ledger_location`` runs a test once per ledger backend: an SQLite file, and a fresh database on
the lab's MariaDB (tests/ledger_backends.py).  Without a usable MariaDB server its parameter
skips, except under CI=true, where that is a failure; SLURM_DSL_TEST_MARIADB=off skips it
knowingly, even under CI.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest

import tests.examples  # noqa: F401  (loads the Hypothesis profile of this run's major)

if TYPE_CHECKING:
    from tests.ledger_backends import MariaDbServer


@pytest.fixture(autouse=True)
def _private_ledger(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path_factory.mktemp("ledger") / "ledger.sqlite3"
    monkeypatch.setenv("SLURM_DSL_LEDGER", str(path))
    return path


@pytest.fixture(autouse=True)
def _no_slurm_for_the_array_check(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    from tests.fakes import write_empty_squeue

    path = write_empty_squeue(tmp_path_factory.mktemp("squeue"))
    monkeypatch.setenv("SLURM_DSL_SQUEUE", str(path))
    # And sweeps look jobs up with squeue, whether or not a real pyslurm is installed here, and
    # whether or not the package's slurm-dsl-jobinfo is (tests/integration use the lab's build).
    monkeypatch.setenv("SLURM_DSL_LOOKUP", "squeue")
    monkeypatch.setenv("SLURM_DSL_JOBINFO", "")
    return path


@pytest.fixture(autouse=True)
def _saved_state(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Outside tests/integration, slurmctld's state directory is one of the test's own (with a
    job_state, for the readers), and slurmctld saves between any two looks at it
    (``tests.fakes.SavesAtEveryLook``): whatever a unit test's sweep clears is known saved
    (docs/contract.md §13), unless the test looks at the real files (``real_saves``) and saves
    itself (``tests.fakes.write_job_state``).  tests/integration use the lab's own."""
    from tests.fakes import SavesAtEveryLook, write_job_state

    directory = tmp_path_factory.mktemp("statesave")
    write_job_state(directory, int(time.time()))
    monkeypatch.setenv("SLURM_DSL_STATE_SAVE_LOCATION", str(directory))
    if request.node.get_closest_marker("integration") is None:
        monkeypatch.setattr("slurm_dsl.lookups.saves.look_at_save", SavesAtEveryLook())
    return directory


@pytest.fixture
def real_saves(monkeypatch: pytest.MonkeyPatch) -> None:
    """The looks at slurmctld's saves see the real files again: a save is a ``write_job_state``."""
    from tests.fakes import REAL_LOOK_AT_SAVE

    monkeypatch.setattr("slurm_dsl.lookups.saves.look_at_save", REAL_LOOK_AT_SAVE)


ONE_CONTROLLER = "ClusterName=unit\nSlurmctldHost=localhost\n"
TWO_CONTROLLERS = "ClusterName=unit\nSlurmctldHost=ctl-a\nSlurmctldHost=ctl-b\n"


@pytest.fixture(autouse=True)
def _one_controller(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside tests/integration, slurm.conf ($SLURM_CONF) names one controller, so no hand-back
    can hold a request back (docs/contract.md §13.6): a unit test's settle delay is the one it
    gives, whatever slurm.conf this machine has, unless the test writes another (``TWO_CONTROLLERS``).
    tests/integration use the lab's own."""
    if request.node.get_closest_marker("integration") is not None:
        return
    path = tmp_path_factory.mktemp("slurmconf") / "slurm.conf"
    path.write_text(ONE_CONTROLLER)
    monkeypatch.setenv("SLURM_CONF", str(path))


@pytest.fixture(autouse=True)
def _no_site_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test in this process reads the machine's /etc/slurm-dsl/slurm-dsl.conf: the default
    config file is one that does not exist, and $SLURM_DSL_CONFIG is unset."""
    monkeypatch.setattr("slurm_dsl.run.config.DEFAULT_CONFIG", str(tmp_path_factory.mktemp("etc") / "none.conf"))
    monkeypatch.delenv("SLURM_DSL_CONFIG", raising=False)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory put first on PATH, for the fake scontrol; checked empty of processes after."""
    from tests.fakes import alive_in_group

    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}:{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_DSL_SCONTROL", raising=False)
    yield d
    assert alive_in_group(str(d)) is None, "a process outlived its call"


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[MariaDbServer]:
    """The MariaDB server of the ledger's tests, found once per session (skip, or fail under CI)."""
    from tests.ledger_backends import MariaDbServer

    if os.environ.get("SLURM_DSL_TEST_MARIADB", "").lower() == "off":
        pytest.skip("SLURM_DSL_TEST_MARIADB=off: the MariaDB ledger is not tested here")
    server, why = MariaDbServer.find()
    if server is None:
        message = (
            f"no MariaDB for the ledger's tests: {why}. contrib/lab/up starts one;"
            " SLURM_DSL_TEST_MARIADB=off skips these tests knowingly"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message} (CI=true: they must run)", pytrace=False)
        pytest.skip(message)
    yield server
    for name in sorted(server.created):  # a database some test could not drop
        server.drop(name)


@pytest.fixture
def mariadb_location(mariadb_server: MariaDbServer) -> Iterator[str]:
    """The URL of a fresh, empty MariaDB database, dropped afterwards."""
    with mariadb_server.database() as url:
        yield url


@pytest.fixture(params=["sqlite", "mariadb"])
def ledger_location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a test's ledger is, once per backend: an SQLite file that does not exist yet, or
    the URL of a fresh, empty MariaDB database (``mariadb://localhost/DB?option_file=CNF``)."""
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.sqlite3")
        return
    yield request.getfixturevalue("mariadb_location")


class Hung:
    """A directory served by a FUSE file system (bindfs over ``source``) whose server can be
    frozen (``freeze``: SIGSTOP) and let go (``thaw``): every access below ``path`` then waits, as
    on an NFS mount whose server stopped answering (what a primary/backup pair shares)."""

    def __init__(self, source: Path, path: Path, pid: int) -> None:
        self.source, self.path, self.pid = source, path, pid

    def freeze(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)


@pytest.fixture
def hung_directory(tmp_path: Path) -> Iterator[Hung]:
    """A ``Hung`` directory over an empty one; skipped where bindfs or FUSE cannot be used (as
    root), which under CI=true is a failure; on the host's major only (the kernel's FUSE is the
    same under every major's chroot)."""
    import shutil

    from tests.examples import full

    if not full():
        pytest.skip("a hung file system is tried on the host's major")
    why = "" if os.geteuid() == 0 else "not root"
    why = why or ("" if shutil.which("bindfs") else "no bindfs (Debian package bindfs)")
    why = why or ("" if os.path.exists("/dev/fuse") else "no /dev/fuse")
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot make a hung file system: {why} (CI=true: it must run)", pytrace=False)
        pytest.skip(f"cannot make a hung file system: {why}")
    source, path = tmp_path / "served", tmp_path / "mounted"
    source.mkdir()
    path.mkdir()
    # -f: in the foreground, so that its pid is the server's; the mount is there once the
    # mount table says so.
    server = subprocess.Popen(["bindfs", "-f", "--no-allow-other", str(source), str(path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not os.path.ismount(path):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"bindfs did not mount {path}: {server.stderr.read() if server.stderr else ''!r}")
            time.sleep(0.02)
        yield Hung(source, path, server.pid)
    finally:
        os.kill(server.pid, signal.SIGCONT)
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)
        server.terminate()
        server.wait(30)


# -- the simulator's schedules (tests/sim/test_schedules.py) ---------------------------------------

def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--sim-seed", type=int, default=None,
                     help="the first seed of the simulator's schedules (default: a fresh one, printed)")
    parser.addoption("--sim-steps", type=int, default=60, help="steps per simulated schedule")


@pytest.fixture(scope="session")
def sim_seed(request: pytest.FixtureRequest) -> int:
    given = request.config.getoption("--sim-seed")
    seed = int.from_bytes(os.urandom(3), "big") if given is None else int(given)
    print(f"\nsimulator: first seed {seed} (replay: --sim-seed {seed})")
    return seed


@pytest.fixture(scope="session")
def sim_steps(request: pytest.FixtureRequest) -> int:
    return int(request.config.getoption("--sim-steps"))
