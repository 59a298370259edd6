"""SqueueLookup through slurm-dsl-jobinfo (contrib/jobinfo; docs/lookups.md §4): one process for
all the ids, with how many threads, how its answer is read, every failure, and squeue asked
instead where the program cannot be run.

The program is a canned ``run`` here; tests/integration/test_lookup_live.py runs the real one
against the lab and checks its records against squeue's, byte for byte.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import InvalidInput, LookupFailed
from slurm_dsl.host.process import Completed
from slurm_dsl.lookups import plan
from slurm_dsl.lookups.squeue import JOBINFO, JOBINFO_SHARE, SqueueLookup, find_jobinfo

from .test_squeue import GONE, KNOWN, line

HELPER = "/usr/libexec/slurm-dsl/slurm-dsl-jobinfo"
# What slurm-dsl-jobinfo prints on stderr when slurmctld cannot be asked (contrib/jobinfo/jobinfo.c:
# "slurm_load_job error for job <id>: " and slurm_strerror's text, as squeue's DOWN has it).
HELPER_DOWN = b"slurm_load_job error for job 11: Unable to contact slurm controller (connect failure)\n"
NOT_LOADED = b"/usr/libexec/slurm-dsl/slurm-dsl-jobinfo: error while loading shared libraries: libslurm.so.38: cannot open shared object file: No such file or directory\n"  # noqa: E501


class Fake:
    """A canned ``run`` for both programs: slurm-dsl-jobinfo answers ``helper(ids, nonce)``,
    squeue as a listing of ``KNOWN`` would (``-j <one id>`` of an unknown id: GONE)."""

    def __init__(self, helper: Optional[Any] = None, records: Optional[Dict[str, Tuple[str, ...]]] = None) -> None:
        self.records = KNOWN if records is None else records
        self.helper = helper or self.knows
        self.helper_calls: List[Tuple[str, ...]] = []  # (threads, *ids) of each call
        self.squeue_calls: List[Tuple[str, ...]] = []

    def knows(self, ids: Sequence[str], nonce: str) -> Completed:
        out = b"".join(line(j, *self.records[j], nonce=nonce) for j in ids if j in self.records)
        return Completed((), 0, out, b"", False, False)

    def __call__(self, argv: Sequence[str], **kwargs: Any) -> Completed:
        argv = tuple(argv)
        if argv[0] == HELPER:
            assert argv[1] == "-t" and re.fullmatch(r"[1-9][0-9]?", argv[2])
            assert re.fullmatch(r"[0-9a-f]{32}", argv[3])
            self.helper_calls.append((argv[2], *argv[4:]))
            return self.helper(list(argv[4:]), argv[3])
        if argv[0].endswith("/sdiag"):
            return Completed(argv, 127, b"", b"", False, False, started=False)
        self.squeue_calls.append(argv)
        nonce = re.search(r"[0-9a-f]{32}\Z", argv[argv.index("-O") + 1])
        assert nonce is not None
        wanted = argv[argv.index("-j") + 1].split(",") if "-j" in argv else list(self.records)
        if len(wanted) == 1 and wanted[0] not in self.records:
            return Completed(argv, 1, b"", GONE, False, False)
        out = b"".join(line(j, *self.records[j], nonce=nonce.group(0)) for j in wanted if j in self.records)
        return Completed(argv, 0, out, b"", False, False)


def lookup(fake: Fake, held: Optional[int] = 100_000, **kwargs: Any) -> SqueueLookup:
    """The lookup with the helper, knowing slurmctld holds ``held`` jobs (single calls cheaper)."""
    it = SqueueLookup("/usr/bin/squeue", 7.5, run=fake, jobinfo=HELPER, **kwargs)
    it.jobs_held = held
    return it


def test_one_id_is_one_helper_process_and_no_squeue() -> None:
    fake = Fake()
    assert lookup(fake).jobs(["11"]) == {"11": JobInfo("11", "RUNNING", True, 0, 4294901753, "None")}
    assert fake.helper_calls == [("1", "11")]
    assert fake.squeue_calls == []


def test_an_id_absent_from_an_answer_that_exited_0_is_gone() -> None:
    fake = Fake()
    assert lookup(fake).jobs(["999999", "10"]) == {
        "999999": None,
        "10": JobInfo("10", "PENDING", False, 0, 0, "JobHeldUser"),
    }
    assert fake.helper_calls == [("1", "999999", "10")]


@pytest.mark.parametrize(
    ("count", "threads"),
    [(1, 1), (2 * JOBINFO_SHARE - 1, 1), (2 * JOBINFO_SHARE, 2), (3 * JOBINFO_SHARE + 1, 3),
     (plan.JOBINFO_COSTS.parallel * JOBINFO_SHARE, plan.JOBINFO_COSTS.parallel), (300, plan.JOBINFO_COSTS.parallel)],
)
def test_every_id_goes_to_one_process_with_a_thread_per_share_of_ids(count: int, threads: int) -> None:
    """One thread per JOBINFO_SHARE ids, at most plan.JOBINFO_COSTS.parallel; each id asked once."""
    ids = [str(n) for n in range(100, 100 + count)]
    fake = Fake(records={})
    it = lookup(fake)
    assert it.jobs(ids) == {job: None for job in ids}
    assert fake.helper_calls == [(str(threads), *ids)]
    assert fake.squeue_calls == []


@pytest.mark.parametrize(
    ("completed", "message"),
    [
        (Completed((), 1, b"", HELPER_DOWN, False, False), "slurmctld unreachable"),
        (Completed((), 1, b"", b"slurm_load_job error for job 11: Socket timed out on send/recv operation\n",
                   False, False), "slurm-dsl-jobinfo exited 1: slurm_load_job error for job 11: Socket timed out"),
        (Completed((), 2, b"", b"slurm-dsl-jobinfo: a job id must be a number from 1 to 4294967294\n",
                   False, False), "slurm-dsl-jobinfo exited 2"),
        (Completed((), -9, b"", b"", False, False), "slurm-dsl-jobinfo exited -9: no message"),
        (Completed((), 0, b"", b"", True, False), "did not answer within"),
        (Completed((), 0, b"x" * 10, b"", False, True), "printed more than"),
        (Completed((), 0, b"", b"", False, False, pipes_held=True), "still held open"),
        (Completed((), 0, b"11|11|N/A|RUNNING|1|0|4294901753|None|0123456789abcdef0123456789abcdef\n", b"", False,
                   False), "nonce"),
    ],
)
def test_a_helper_that_could_not_ask_fails_the_whole_lookup(completed: Completed, message: str) -> None:
    """Never a partial answer, never "gone", never squeue asked instead: whatever it printed."""
    fake = Fake(lambda ids, nonce: completed)
    with pytest.raises(LookupFailed, match=re.escape(message)):
        lookup(fake).jobs(["11", "10"])
    assert fake.squeue_calls == []


@pytest.mark.parametrize(("status", "stderr"), [(127, NOT_LOADED), (126, b"Permission denied\n")])
def test_a_helper_that_cannot_be_run_is_set_aside_and_squeue_asks(
    status: int, stderr: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    fake = Fake(lambda ids, nonce: Completed((), status, b"", stderr, False, False))
    it = lookup(fake)
    with caplog.at_level(logging.WARNING, logger="slurm_dsl"):
        assert it.jobs(["11", "999999"]) == {
            "11": JobInfo("11", "RUNNING", True, 0, 4294901753, "None"),
            "999999": None,
        }
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"{HELPER} could not be run (status {status}: {stderr.decode().strip()}); asking squeue instead"
    ]
    assert len(fake.helper_calls) == 1 and fake.squeue_calls
    fake.squeue_calls.clear()
    assert it.jobs(["10"]) == {"10": JobInfo("10", "PENDING", False, 0, 0, "JobHeldUser")}
    assert len(fake.helper_calls) == 1, "set aside for the lookup's later calls"
    assert fake.squeue_calls and fake.squeue_calls[0][-4:-2] == ("-j", "10")


def test_squeue_still_answers_what_the_helper_does_not_ask() -> None:
    """A listing stays squeue's (many ids at few jobs); ``many=0`` (a listing asked for) and
    ``parallel=0`` (never single calls) never run the helper."""
    ids = [str(n) for n in range(100, 400)]
    fake = Fake(records={})
    it = lookup(fake, held=10)  # a listing is cheaper than 300 single calls at 10 jobs
    assert it.jobs(ids) == {job: None for job in ids}
    assert fake.helper_calls == [] and len(fake.squeue_calls) == 1
    for kwargs in ({"many": 0}, {"parallel": 0}):
        fake = Fake()
        assert lookup(fake, **kwargs).jobs(["11"])["11"] is not None
        assert fake.helper_calls == [], kwargs


def test_many_ids_at_many_jobs_go_to_the_helper() -> None:
    ids = [str(n) for n in range(100, 400)]
    fake = Fake(records={})
    it = lookup(fake)
    assert it.jobs(ids) == {job: None for job in ids}
    assert fake.squeue_calls == [] and [call[0] for call in fake.helper_calls] == [str(plan.JOBINFO_COSTS.parallel)]


def test_find_jobinfo_reads_the_environment_then_the_installed_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert find_jobinfo({"SLURM_DSL_JOBINFO": ""}) is None
    assert find_jobinfo({"SLURM_DSL_JOBINFO": "/opt/x/jobinfo"}) == "/opt/x/jobinfo"
    with pytest.raises(InvalidInput, match="absolute path"):
        find_jobinfo({"SLURM_DSL_JOBINFO": "jobinfo"})
    monkeypatch.setattr("os.path.isfile", lambda path: path == JOBINFO)
    monkeypatch.setattr("os.access", lambda path, mode: path == JOBINFO)
    assert find_jobinfo({}) == JOBINFO
    monkeypatch.setattr("os.access", lambda path, mode: False)
    assert find_jobinfo({}) is None


def test_the_unit_tests_never_find_an_installed_helper() -> None:
    """tests/conftest.py sets SLURM_DSL_JOBINFO empty: a lookup built with no helper named asks
    squeue alone here, whether or not the package is installed on the machine."""
    assert SqueueLookup().jobinfo is None
