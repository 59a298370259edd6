"""Which scontrol and squeue run (slurm_dsl.host.binaries): the PATH search is shutil.which's."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable, List

import pytest

from slurm_dsl.core.model import InvalidInput
from slurm_dsl.host import binaries
from slurm_dsl.host.binaries import DEFAULT_SCONTROL, find_scontrol, find_squeue
from slurm_dsl.run.config import configure


def _tool(folder: Path, name: str, mode: int = 0o755) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(mode)
    return path


@pytest.fixture
def layout(tmp_path: Path) -> List[str]:
    """PATH entries: one with a non-executable scontrol, one with a directory named scontrol,
    one with the executable ones, and one that does not exist."""
    _tool(tmp_path / "noexec", "scontrol", 0o644)
    (tmp_path / "isdir" / "scontrol").mkdir(parents=True)
    _tool(tmp_path / "good", "scontrol")
    _tool(tmp_path / "good", "squeue")
    return [str(tmp_path / d) for d in ("missing", "noexec", "isdir", "good")]


@pytest.mark.parametrize("order", [[0, 1, 2, 3], [3, 0], [1, 2], [2, 1, 0], []])
@pytest.mark.parametrize("name", ["scontrol", "squeue", "no-such-tool"])
def test_the_path_search_answers_as_shutil_which(
    layout: List[str], order: List[int], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", os.pathsep.join(layout[i] for i in order))
    assert binaries._on_path(name) == shutil.which(name)


def test_an_empty_path_entry_is_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tool(tmp_path, "scontrol")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", os.pathsep + "/nonexistent")
    assert binaries._on_path("scontrol") == shutil.which("scontrol") == "scontrol"


def test_an_empty_path_finds_nothing_and_no_path_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    assert binaries._on_path("sh") is None
    monkeypatch.delenv("PATH")
    assert binaries._on_path("sh") == shutil.which("sh", path=os.defpath)


def test_scontrol_comes_from_the_configuration_then_path(
    layout: List[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLURM_DSL_SCONTROL", raising=False)
    monkeypatch.setenv("PATH", layout[3])
    assert find_scontrol() == os.path.join(layout[3], "scontrol")
    other = _tool(tmp_path / "env", "scontrol")
    # The environment is the configuration's to read (run/config.py), not find_scontrol's.
    monkeypatch.setenv("SLURM_DSL_SCONTROL", str(other))
    assert find_scontrol() == os.path.join(layout[3], "scontrol")
    assert configure().scontrol_path == str(other)
    explicit = _tool(tmp_path / "explicit", "scontrol")
    assert find_scontrol(str(explicit)) == str(explicit)
    assert configure({"scontrol": str(explicit)}).scontrol_path == str(explicit)
    monkeypatch.delenv("SLURM_DSL_SCONTROL")
    monkeypatch.setenv("PATH", layout[0])
    assert find_scontrol() == DEFAULT_SCONTROL == configure().scontrol_path


@pytest.mark.parametrize("find", [find_scontrol, find_squeue])
def test_an_empty_path_is_refused_not_taken_as_none(find: Callable[[str], str]) -> None:
    with pytest.raises(InvalidInput, match="path is empty"):
        find("")


def test_squeue_is_the_one_beside_the_scontrol_in_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scontrol = _tool(tmp_path / "slurm" / "bin", "scontrol")
    squeue = _tool(tmp_path / "slurm" / "bin", "squeue")
    _tool(tmp_path / "first", "squeue")
    monkeypatch.delenv("SLURM_DSL_SQUEUE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "first"))
    assert find_squeue(scontrol=str(scontrol)) == str(squeue)
    assert find_squeue() == str(tmp_path / "first" / "squeue")
