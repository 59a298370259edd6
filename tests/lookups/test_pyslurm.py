"""pyslurm_lookup.py against tests/fake_pyslurm, a fake of exactly the surface in docs/pyslurm.md.

No pyslurm on PyPI builds against Debian's Slurm, so the fake stands in: both API
generations, the documented errno values (2017 gone; 1800 controller down) and
attribute types.  The first tests pin the fake to the document, so that the
adapter's tests say something about the real module.
"""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator, List, Optional

import pytest

from slurm_dsl.core.jobinfo import JobInfo, Lookup
from slurm_dsl.core.model import LookupFailed
from slurm_dsl.lookups import choose as lookup_choice
from slurm_dsl.lookups.pyslurm import ModernPyslurmLookup, OldPyslurmLookup, load_pyslurm_lookup
from slurm_dsl.lookups.squeue import SqueueLookup

FAKE_DIR = Path(__file__).resolve().parents[1] / "fake_pyslurm"
SLURM_22_05 = (22, 5)

Loader = Callable[..., Any]  # the fake module; Any, since tests set its switches


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Loader]:
    """Import the fake pyslurm afresh with the given API, version and import failure."""

    def load(api: str = "modern", version: str = "22.5.3", fail: str = "") -> Any:
        monkeypatch.setenv("FAKE_PYSLURM_API", api)
        monkeypatch.setenv("FAKE_PYSLURM_VERSION", version)
        monkeypatch.setenv("FAKE_PYSLURM_IMPORT", fail)
        monkeypatch.syspath_prepend(str(FAKE_DIR))
        sys.modules.pop("pyslurm", None)
        return importlib.import_module("pyslurm")

    yield load
    sys.modules.pop("pyslurm", None)


def logged(caplog: pytest.LogCaptureFixture) -> List[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "slurm_dsl"]


def usable(slurm: Any = SLURM_22_05) -> Lookup:
    found = load_pyslurm_lookup(slurm)
    assert found is not None
    return found


# --- the fake is the documented surface ---------------------------------------------


def test_fake_modern_surface_matches_the_document(fake: Loader) -> None:
    mod = fake()
    assert mod.version() == "22.5.3" and mod.slurm_api_version() == (22, 5, 8) and mod.slurm_ping(0) == 0
    assert issubclass(mod.RPCError, mod.PyslurmError) and issubclass(mod.PyslurmError, Exception)
    mod.add_job(5, requeue=True, restarts=2)
    job = mod.Job.load(5)
    assert (job.state, job.state_reason, job.is_requeueable, job.requeue_count) == (
        "RUNNING",
        "None",
        True,
        2,
    )
    assert isinstance(job.priority, int) and job.array_id is None
    with pytest.raises(TypeError, match="an integer is required"):
        mod.Job.load("5")
    with pytest.raises(mod.RPCError) as gone:
        mod.Job.load(999999)
    assert (gone.value.errno, str(gone.value)) == (2017, "Invalid job id specified")
    mod.add_job(6)
    with pytest.raises(mod.RPCError) as disabled:
        mod.Job(6).requeue()
    assert (disabled.value.errno, str(disabled.value)) == (2037, "Requested operation is presently disabled")
    mod.add_job(7, state="COMPLETED")
    with pytest.raises(mod.RPCError) as finished:
        mod.Job(7).hold()
    assert (finished.value.errno, str(finished.value)) == (2084, "Job has already finished")
    mod.CONTROLLER_UP = False
    with pytest.raises(mod.RPCError) as down:
        mod.Job.load(5)
    assert (down.value.errno, str(down.value)) == (
        1800,
        "Unable to contact slurm controller (connect failure)",
    )
    assert hasattr(mod, "job")  # 22.5.3 still ships the old API too


def test_fake_old_surface_matches_the_document(fake: Loader) -> None:
    mod = fake("old", "21.8.1")
    assert not hasattr(mod, "Job") and not hasattr(mod, "Jobs") and not hasattr(mod, "RPCError")
    mod.add_job(183, state="PENDING", array_job_id=183, array_task_str="1-3")
    mod.add_job(185, array_job_id=185, array_task_id=3)
    mod.add_job(186, array_job_id=185, array_task_id=1)
    mod.add_job(187, array_job_id=185, array_task_id=2)
    mod.add_job(200, requeue=True)
    assert [d["job_id"] for d in mod.job().find_id(185)] == [185, 186, 187]
    assert [d["job_id"] for d in mod.job().find_id("185_2")] == [187]
    assert [d["requeue"] for d in mod.job().find_id("200")] == [True]
    for missing in (999999, "999999", "183_2"):
        with pytest.raises(ValueError) as gone:
            mod.job().find_id(missing)
        assert type(gone.value) is ValueError and gone.value.args == ("Invalid job id specified", 2017)
    with pytest.raises(ValueError) as disabled:
        mod.slurm_requeue(185, 0)
    assert disabled.value.args == ("Requested operation is presently disabled", 2037)
    mod.CONTROLLER_UP = False
    with pytest.raises(ValueError) as down:
        mod.job().get()
    assert down.value.args == ("Unable to contact slurm controller (connect failure)", 1800)


# --- choosing pyslurm ------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "slurm", "api", "kind"),
    [
        ("22.5.3", (22, 5), "modern", ModernPyslurmLookup),
        ("22.5.0", (22, 5), "old", OldPyslurmLookup),
        ("23.2.1", (23, 2), "modern", ModernPyslurmLookup),
        ("24.11.0", (24, 11), "modern", ModernPyslurmLookup),
    ],
)
def test_a_matching_pyslurm_is_used(
    fake: Loader, caplog: pytest.LogCaptureFixture, version: str, slurm: Any, api: str, kind: type
) -> None:
    fake(api, version)
    with caplog.at_level(logging.DEBUG, logger="slurm_dsl"):
        assert isinstance(load_pyslurm_lookup(slurm), kind)
    assert logged(caplog) == []


@pytest.mark.parametrize(
    ("version", "slurm"),
    [
        ("25.11.2", (22, 5)),  # what PyPI carries, on Debian 12
        ("25.11.2", (24, 11)),  # ... and on Debian 13
        ("22.5.3", (24, 11)),
        ("24.5.1", (24, 11)),
        ("22.5.3", (22, 11)),
    ],
)
def test_a_mismatched_pyslurm_is_one_warning_and_none(
    fake: Loader, caplog: pytest.LogCaptureFixture, version: str, slurm: Any
) -> None:
    fake(version=version)
    with caplog.at_level(logging.DEBUG, logger="slurm_dsl"):
        assert load_pyslurm_lookup(slurm) is None
    (record,) = logged(caplog)
    assert record.levelno == logging.WARNING
    assert version in record.getMessage() and "using squeue" in record.getMessage()


@pytest.mark.parametrize(("version", "slurm", "used"), [("25.11.2", (25, 11), True), ("25.11.2", (24, 11), False)])
def test_pyslurm_25_11_is_told_by_its_dunder_version(
    fake: Loader, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    version: str, slurm: Any, used: bool,
) -> None:
    """In pyslurm 25.11, pyslurm.version is a module and __version__ names the release
    (docs/slurm-25.11.md §2): matched by it, and refused with both versions named."""
    mod = fake(version="1.0.0")
    monkeypatch.setattr(mod, "version", ModuleType("pyslurm.version"))
    monkeypatch.setattr(mod, "__version__", version, raising=False)
    with caplog.at_level(logging.DEBUG, logger="slurm_dsl"):
        found = load_pyslurm_lookup(slurm)
    if used:
        assert isinstance(found, ModernPyslurmLookup) and logged(caplog) == []
    else:
        (record,) = logged(caplog)
        assert found is None and record.levelno == logging.WARNING
        assert "pyslurm 25.11.2 is built for Slurm 25.11, but Slurm 24.11 is running" in record.getMessage()


def test_a_slurm_conf_pyslurm_cannot_read_is_refused_before_the_import(
    fake: Loader, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """import pyslurm with an unreadable $SLURM_CONF waits 60 s in libslurm, then ends the
    process (docs/slurm-25.11.md §2): refused with the path and why, pyslurm never imported."""
    fake()
    sys.modules.pop("pyslurm", None)
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    with caplog.at_level(logging.DEBUG, logger="slurm_dsl"):
        assert load_pyslurm_lookup(SLURM_22_05) is None
    (record,) = logged(caplog)
    assert record.levelno == logging.WARNING and "pyslurm" not in sys.modules
    assert f"pyslurm not imported: SLURM_CONF={tmp_path / 'slurm.conf'} cannot be read (" in record.getMessage()
    (tmp_path / "slurm.conf").write_text("ClusterName=lab\n")
    assert isinstance(load_pyslurm_lookup(SLURM_22_05), ModernPyslurmLookup)


@pytest.mark.parametrize("fail", ["ImportError", "RuntimeError"])
def test_a_pyslurm_that_raises_on_import_is_one_warning_and_none(
    fake: Loader, caplog: pytest.LogCaptureFixture, fail: str
) -> None:
    with pytest.raises((ImportError, RuntimeError)):
        fake(fail=fail)
    with caplog.at_level(logging.DEBUG, logger="slurm_dsl"):
        assert load_pyslurm_lookup(SLURM_22_05) is None
    (record,) = logged(caplog)
    assert record.levelno == logging.WARNING and "using squeue" in record.getMessage()


def test_no_pyslurm_is_one_info_line_and_none(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # import pyslurm -> ModuleNotFoundError
    with caplog.at_level(logging.DEBUG, logger="slurm_dsl"):
        assert load_pyslurm_lookup(SLURM_22_05) is None
    (record,) = logged(caplog)
    assert record.levelno == logging.INFO and "not installed" in record.getMessage()


@pytest.mark.parametrize("version", [None, "", "22", "v22.5.3", 22.5])
def test_an_unreadable_pyslurm_version_is_one_warning_and_none(
    fake: Loader, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, version: object
) -> None:
    mod = fake()
    monkeypatch.setattr(mod, "version", lambda: version)
    with caplog.at_level(logging.DEBUG, logger="slurm_dsl"):
        assert load_pyslurm_lookup(SLURM_22_05) is None
    assert len(logged(caplog)) == 1


def test_a_pyslurm_version_that_raises_is_one_warning_and_none(
    fake: Loader, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    mod = fake()

    def broken() -> str:
        raise OSError("libslurm.so.38: undefined symbol")

    monkeypatch.setattr(mod, "version", broken)
    with caplog.at_level(logging.DEBUG, logger="slurm_dsl"):
        assert load_pyslurm_lookup(SLURM_22_05) is None
    assert len(logged(caplog)) == 1


def test_a_pyslurm_without_either_api_is_one_warning_and_none(
    fake: Loader, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    mod = fake("old")
    monkeypatch.delattr(mod, "job")
    with caplog.at_level(logging.DEBUG, logger="slurm_dsl"):
        assert load_pyslurm_lookup(SLURM_22_05) is None
    assert len(logged(caplog)) == 1


def test_default_lookup_prefers_a_usable_pyslurm(fake: Loader, monkeypatch: pytest.MonkeyPatch) -> None:
    fake()
    monkeypatch.setattr(lookup_choice, "slurm_version", lambda *a, **k: SLURM_22_05)
    assert isinstance(lookup_choice.default_lookup(), ModernPyslurmLookup)


def test_default_lookup_falls_back_on_a_mismatch(fake: Loader, monkeypatch: pytest.MonkeyPatch) -> None:
    fake(version="25.11.2")
    monkeypatch.setattr(lookup_choice, "slurm_version", lambda *a, **k: SLURM_22_05)
    assert isinstance(lookup_choice.default_lookup(), SqueueLookup)


# --- modern API --------------------------------------------------------------------


def lab_jobs(mod: ModuleType) -> None:
    mod.add_job(11, requeue=True, priority=4294901753)
    mod.add_job(10, state="PENDING", reason="JobHeldUser", priority=0)
    mod.add_job(8, state="COMPLETED", restarts=1)


def test_modern_few_ids_load_each_job(fake: Loader) -> None:
    mod = fake()
    lab_jobs(mod)
    answer = usable().jobs(["11", "999999", "10", "11"])
    assert answer == {
        "11": JobInfo("11", "RUNNING", True, 0, 4294901753, "None"),
        "999999": None,
        "10": JobInfo("10", "PENDING", False, 0, 0, "JobHeldUser"),
    }
    assert mod.RPCS == ["load_job"] * 3


def test_modern_many_ids_load_all_jobs_once(fake: Loader) -> None:
    mod = fake()
    lab_jobs(mod)
    ids = [str(n) for n in range(1, 60)]
    answer = usable().jobs(ids)
    assert mod.RPCS == ["load_jobs"]
    assert list(answer) == ids
    assert answer["8"] == JobInfo("8", "COMPLETED", False, 1, 4294901657, "None")
    assert answer["8"] is not None and answer["8"].finished
    assert answer["9"] is None


def test_no_ids_ask_nothing(fake: Loader) -> None:
    mod = fake()
    assert usable().jobs([]) == {}
    assert mod.RPCS == []


def test_a_bad_id_is_a_value_error_before_any_rpc(fake: Loader) -> None:
    mod = fake()
    with pytest.raises(ValueError):
        usable().jobs(["11", "7_1"])
    assert mod.RPCS == []


@pytest.mark.parametrize("count", [1, 3, 60])
def test_modern_controller_down_is_lookup_failed_never_gone(fake: Loader, count: int) -> None:
    mod = fake()
    lab_jobs(mod)
    mod.CONTROLLER_UP = False
    with pytest.raises(LookupFailed, match="errno 1800"):
        usable().jobs([str(n) for n in range(1, count + 1)])


@pytest.mark.parametrize(
    "error",
    [
        lambda mod: mod.RPCError(msg="RPC was successful but got no job data, this should never happen"),
        lambda mod: mod.RPCError(errno=2084, msg="Job has already finished"),
        lambda mod: mod.PyslurmError("something"),
        lambda mod: MemoryError("xmalloc failed for job_info_t"),
        lambda mod: ValueError("Invalid job id specified", 2017),  # the old API's form, from the new API
    ],
)
def test_modern_any_other_error_is_lookup_failed(
    fake: Loader, monkeypatch: pytest.MonkeyPatch, error: Callable[[ModuleType], Exception]
) -> None:
    mod = fake()
    lab_jobs(mod)

    def fail(*args: Any) -> Any:
        raise error(mod)

    monkeypatch.setattr(mod.Job, "load", staticmethod(fail))
    monkeypatch.setattr(mod.Jobs, "load", staticmethod(fail))
    for ids in (["11"], [str(n) for n in range(1, 60)]):
        with pytest.raises(LookupFailed):
            usable().jobs(ids)


@pytest.mark.parametrize(
    "fields",
    [
        {"requeue": 1},  # documented as bool
        {"requeue": None},
        {"restarts": "0"},
        {"restarts": -1},
        {"priority": None},  # pyslurm's u32_parse gives None for NO_VAL
        {"priority": True},
        {"state": ""},
        {"state": None},
        {"reason": 5},
    ],
)
def test_modern_a_value_of_the_wrong_type_is_lookup_failed(fake: Loader, fields: Any) -> None:
    mod = fake()
    mod.add_job(11, **fields)
    for ids in (["11"], [str(n) for n in range(1, 60)]):
        with pytest.raises(LookupFailed, match="job 11"):
            usable().jobs(ids)


def test_modern_a_record_for_another_id_is_lookup_failed(
    fake: Loader, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = fake()
    lab_jobs(mod)
    real = mod.Job.load
    monkeypatch.setattr(mod.Job, "load", staticmethod(lambda job_id: real(10)))
    with pytest.raises(LookupFailed, match="id 10"):
        usable().jobs(["11"])


def test_modern_a_job_listed_twice_is_lookup_failed(fake: Loader, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake()
    lab_jobs(mod)
    monkeypatch.setattr(mod.Jobs, "values", lambda self: [mod.Job.load(11), mod.Job.load(11)])
    with pytest.raises(LookupFailed, match="twice"):
        usable().jobs([str(n) for n in range(1, 60)])


def test_modern_a_job_without_an_id_is_lookup_failed(fake: Loader, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake()
    lab_jobs(mod)

    def no_id(self: Any) -> int:
        raise AttributeError("id")

    monkeypatch.setattr(mod.Job, "id", property(no_id))
    for ids in (["11"], [str(n) for n in range(1, 60)]):
        with pytest.raises(LookupFailed):
            usable().jobs(ids)


def test_modern_an_empty_reason_reads_as_empty(fake: Loader) -> None:
    mod = fake()
    mod.add_job(11, reason=None)
    info = usable().jobs(["11"])["11"]
    assert info is not None and info.reason == ""


# --- old API -------------------------------------------------------------------------


def test_old_few_ids_find_each_job(fake: Loader) -> None:
    mod = fake("old", "21.8.1")
    lab_jobs(mod)
    answer = usable((21, 8)).jobs(["11", "999999", "10"])
    assert answer == {
        "11": JobInfo("11", "RUNNING", True, 0, 4294901753, "None"),
        "999999": None,
        "10": JobInfo("10", "PENDING", False, 0, 0, "JobHeldUser"),
    }
    assert mod.RPCS == ["load_job"] * 3


def test_old_an_array_master_id_reads_its_own_record(fake: Loader) -> None:
    mod = fake("old", "21.8.1")
    mod.add_job(185, array_job_id=185, array_task_id=3, state="PENDING")
    mod.add_job(186, array_job_id=185, array_task_id=1, requeue=True)
    answer = usable((21, 8)).jobs(["185", "186"])
    assert answer["185"] == JobInfo("185", "PENDING", False, 0, 4294901657, "None", array_job_id="185", array_tasks=2)
    assert answer["186"] is not None and answer["186"].requeue


def test_old_many_ids_get_all_jobs_once(fake: Loader) -> None:
    mod = fake("old", "21.8.1")
    lab_jobs(mod)
    answer = usable((21, 8)).jobs([str(n) for n in range(1, 60)])
    assert mod.RPCS == ["load_jobs"]
    assert answer["11"] == JobInfo("11", "RUNNING", True, 0, 4294901753, "None")
    assert answer["12"] is None


@pytest.mark.parametrize("count", [1, 3, 60])
def test_old_controller_down_is_lookup_failed_never_gone(fake: Loader, count: int) -> None:
    mod = fake("old", "21.8.1")
    lab_jobs(mod)
    mod.CONTROLLER_UP = False
    with pytest.raises(LookupFailed, match="errno 1800"):
        usable((21, 8)).jobs([str(n) for n in range(1, count + 1)])


@pytest.mark.parametrize(
    "error",
    [
        ValueError("Job has already finished", 2084),
        ValueError("Invalid job id specified"),  # no errno: not the documented form
        ValueError("Invalid job id specified", "2017"),
        KeyError("job_state"),
        RuntimeError("boom"),
    ],
)
def test_old_any_other_error_is_lookup_failed(
    fake: Loader, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    mod = fake("old", "21.8.1")
    lab_jobs(mod)

    def fail(*args: Any) -> Any:
        raise error

    monkeypatch.setattr(mod.job, "find_id", fail)
    monkeypatch.setattr(mod.job, "get", fail)
    for ids in (["11"], [str(n) for n in range(1, 60)]):
        with pytest.raises(LookupFailed):
            usable((21, 8)).jobs(ids)


@pytest.mark.parametrize(
    "answer",
    [
        [],  # no record for the id
        [{"job_id": 10}],  # another job's record
        [{"job_id": 11, "job_state": "RUNNING"}],  # keys missing
        "not a list",
    ],
)
def test_old_an_unreadable_find_id_answer_is_lookup_failed(
    fake: Loader, monkeypatch: pytest.MonkeyPatch, answer: object
) -> None:
    mod = fake("old", "21.8.1")
    monkeypatch.setattr(mod.job, "find_id", lambda self, jobid: answer)
    with pytest.raises(LookupFailed):
        usable((21, 8)).jobs(["11"])


def test_old_an_unreadable_get_answer_is_lookup_failed(fake: Loader, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake("old", "21.8.1")
    monkeypatch.setattr(mod.job, "get", lambda self: [("11", {})])
    with pytest.raises(LookupFailed):
        usable((21, 8)).jobs([str(n) for n in range(1, 60)])


def test_old_a_value_of_the_wrong_type_is_lookup_failed(fake: Loader) -> None:
    mod = fake("old", "21.8.1")
    mod.add_job(11, requeue=1)
    with pytest.raises(LookupFailed, match="requeue flag 1"):
        usable((21, 8)).jobs(["11"])


def test_both_adapters_are_lookups(fake: Loader) -> None:
    mod = fake()
    lookups: List[Optional[Lookup]] = [ModernPyslurmLookup(mod), OldPyslurmLookup(mod)]
    assert all(x is not None for x in lookups)


# --- what a real pyslurm 22.5.3 showed, and the adapter's answer to it ----------------------


def test_fake_matches_the_real_builds_quirks(fake: Loader) -> None:
    mod = fake()
    mod.add_job(1)
    mod.add_job(5, name=b"caf\xe9")  # a job name that is not UTF-8
    jobs = mod.Jobs.load()
    assert 5 in jobs and "5" not in jobs  # int keys
    assert mod.Job.load(5.0).id == 5 and mod.Job.load(True).id == 1
    for bad in (-1, 2**32):
        with pytest.raises(OverflowError):
            mod.Job.load(bad)
    assert mod.RPCError().args == (0, "Success") and mod.RPCError().errno == 0
    with pytest.raises(UnicodeDecodeError):
        mod.Job.load(5).name  # noqa: B018
    with pytest.raises(UnicodeDecodeError):
        mod.Job.load(5).to_dict()
    mod.CONTROLLER_SILENT = True
    with pytest.raises(mod.RPCError) as silent:
        mod.Job.load(5)
    assert silent.value.errno == 5004


@pytest.mark.parametrize("count", [1, 4, 5, 60])
def test_a_controller_that_never_answers_is_lookup_failed_never_gone(fake: Loader, count: int) -> None:
    mod = fake()
    lab_jobs(mod)
    mod.CONTROLLER_SILENT = True
    with pytest.raises(LookupFailed, match="errno 5004"):
        usable().jobs([str(n) for n in range(1, count + 1)])


def test_an_error_without_an_errno_is_lookup_failed(fake: Loader, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake()

    def fails(job_id: int) -> Any:
        raise mod.RPCError()  # (0, 'Success'): pyslurm's own default

    monkeypatch.setattr(mod.Job, "load", staticmethod(fails))
    with pytest.raises(LookupFailed, match="errno 0"):
        usable().jobs(["11"])


def test_a_job_name_that_is_not_utf8_does_not_stop_a_lookup(fake: Loader) -> None:
    mod = fake()
    mod.add_job(12, name=b"\xff\xfe", requeue=True)
    for ids in (["12"], [str(n) for n in range(1, 20)]):
        answer = usable().jobs(ids)
        assert answer["12"] is not None and answer["12"].requeue


def test_a_handful_of_ids_load_each_more_load_all_once(fake: Loader) -> None:
    mod = fake()
    lab_jobs(mod)
    usable().jobs(["11", "10", "8", "999999"])
    assert mod.RPCS == ["load_job"] * 4
    mod.RPCS.clear()
    answer = usable().jobs(["11", "10", "8", "999999", "7"])
    assert mod.RPCS == ["load_jobs"] and answer["7"] is None and answer["11"] is not None


def test_modern_an_arrays_own_id_says_how_many_tasks_it_reaches(fake: Loader) -> None:
    mod = fake()
    mod.add_job(165, array_job_id=165, array_task_id=None, state="PENDING")  # the remainder: tasks 1, 3
    mod.add_job(166, array_job_id=165, array_task_id=2, state="PENDING")  # split off
    mod.add_job(170, array_job_id=170, array_task_id=4)  # an array's last task, alone
    mod.add_job(171, array_job_id=None)
    answer = usable().jobs(["165", "166", "170", "171"])
    assert mod.RPCS == ["load_job"] * 4 + ["load_jobs"]  # the count needs every record
    assert answer["165"] == JobInfo("165", "PENDING", False, 0, 4294901657, "None", array_job_id="165", array_tasks=3)
    assert answer["166"] is not None and (answer["166"].array_job_id, answer["166"].whole_array) == ("165", False)
    assert answer["170"] is not None and not answer["170"].whole_array
    assert answer["171"] is not None and answer["171"].array_job_id is None


def test_make_lookup_is_the_admins_choice(fake: Loader, monkeypatch: pytest.MonkeyPatch) -> None:
    from slurm_dsl.core.model import ConfigError

    fake()
    monkeypatch.setattr(lookup_choice, "slurm_version", lambda *a, **k: SLURM_22_05)
    assert isinstance(lookup_choice.make_lookup("squeue"), SqueueLookup)  # even with a usable pyslurm
    assert isinstance(lookup_choice.make_lookup("pyslurm"), ModernPyslurmLookup)
    assert isinstance(lookup_choice.make_lookup("auto"), ModernPyslurmLookup)
    fake(version="24.11.1")
    with pytest.raises(ConfigError, match=r"built for Slurm 24\.11, but Slurm 22\.05 is running"):
        lookup_choice.make_lookup("pyslurm")
    assert isinstance(lookup_choice.make_lookup("auto"), SqueueLookup)
    monkeypatch.setitem(sys.modules, "pyslurm", None)
    with pytest.raises(ConfigError, match="not installed"):
        lookup_choice.make_lookup("pyslurm")
    with pytest.raises(ConfigError, match="unknown lookup"):
        lookup_choice.make_lookup("scontrol")


@pytest.mark.parametrize("api", ["modern", "old"])
def test_once_every_job_was_loaded_the_count_chooses_how_to_load(fake: Loader, api: str) -> None:
    """docs/lookups.md: with 3 jobs held a load of every job costs less than 5 single loads; with
    20,000 held, 40 single loads (~150 ms) cost less than one load of every job (~260 ms)."""
    mod = fake(api)
    lab_jobs(mod)
    look = usable()
    assert look.jobs_held is None  # type: ignore[attr-defined]
    look.jobs([str(n) for n in range(1, 60)])
    assert look.jobs_held == 3  # type: ignore[attr-defined]
    mod.RPCS.clear()
    look.jobs(["11", "10", "8"])  # 3 ids, 3 jobs held: one load of every job
    assert mod.RPCS == [mod.RPCS[0]] and len(mod.RPCS) == 1
    look.jobs_held = 20_000  # type: ignore[attr-defined]
    mod.RPCS.clear()
    answer = look.jobs([str(n) for n in range(1, 41)])
    assert len(mod.RPCS) == 40 and len(set(mod.RPCS)) == 1 and answer["11"] is not None and answer["9"] is None
