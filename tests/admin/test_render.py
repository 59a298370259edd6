"""The command line in three parts (issue 17 item 3): ``options`` defines ``--json`` once for
every subcommand that has it, ``render`` writes every text shown and acts on nothing, and ``cli``
writes only what ``render`` returns.  The sweep's lines are checked byte for byte against the
report written out by hand here (docs/contract.md §10: `JOBID DONE WHY`, then the summary)."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path
from typing import Dict, Iterator, Set, Tuple

from slurm_dsl.admin import render
from slurm_dsl.admin.parser import build_parser
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.run.sweep import Done, SweepReport, Swept

ADMIN = Path(__file__).resolve().parents[2] / "slurm_dsl" / "admin"
WITH_JSON = {"hold", "release", "requeue", "restore", "open", "requeuehold", "sweep", "settle", "doctor", "read",
             "history", "ledger status", "ledger prune", "ledger migrate", "config"}


def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[Tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield prefix + name, sub
                yield from subcommands(sub, prefix + name + " ")


def test_json_is_defined_once_and_every_subcommand_that_prints_values_has_it() -> None:
    defined = [path.name for path in sorted(ADMIN.rglob("*.py")) for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.Call) and node.args
               and isinstance(node.args[0], ast.Constant) and node.args[0].value == "--json"]
    assert defined == ["options.py"]
    having: Set[str] = set()
    helps: Dict[str, str] = {}
    for name, sub in subcommands(build_parser()):
        for action in sub._actions:
            if "--json" in action.option_strings:
                having.add(name)
                helps[name] = action.help or ""
    assert having == WITH_JSON
    assert all(text.startswith("one JSON object") for text in helps.values()), helps


def test_cli_writes_no_json_nor_text_of_its_own() -> None:
    """Every ``json.dumps`` is render's; the command functions only write what render returns."""
    commands = sorted(f"commands/{path.name}" for path in (ADMIN / "commands").glob("*.py"))
    assert "commands/ops.py" in commands
    modules = ("cli.py", "parser.py", "options.py", "view.py", "doctor.py", *commands)
    for module in modules:
        tree = ast.parse((ADMIN / module).read_text())
        names = {alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                 for alias in node.names}
        assert "json" not in names, module


def test_render_imports_only_what_has_no_effect() -> None:
    """render is pure: at run time it imports json, typing and the core, nothing that acts."""
    tree = ast.parse((ADMIN / "render.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.If):  # ``if TYPE_CHECKING:``: types only
            continue
        if isinstance(node, ast.Import):
            assert {a.name for a in node.names} <= {"json"}
        elif isinstance(node, ast.ImportFrom):
            core = node.level == 2 and (node.module or "").startswith("core")
            assert node.module in ("__future__", "typing") or core, node.module


def report() -> SweepReport:
    hostile = "gone\x1b]52;c;aGk=\x07: slurmctld no longer knows the job"
    return SweepReport(
        swept=[Swept("12", Done.CLEARED, hostile), Swept("1300", Done.LOOKUP_FAILED, "squeue said no")],
        lookup_error="unreachable",
        orphans=[JobInfo("77", "PENDING\x1b[2J", True, 0, 1, "None")],
        started=100.0,
        finished=160.0,  # the ledger's clock, stepped meanwhile: shown, never subtracted
        took=0.25,
        dry_run=True,
    )


def test_the_sweeps_lines_as_the_command_line_prints_them() -> None:
    counts = ", ".join(f"1 {d}" for d in ("cleared", "lookup_failed"))
    assert render.sweep_text(report(), "squeue", 3, as_json=False) == (
        "        12  cleared        gone\\x1b]52;c;aGk=\\x07: slurmctld no longer knows the job\n"
        "      1300  lookup_failed  squeue said no\n"
        "        77  orphan         shows Requeue=1 (PENDING\\x1b[2J), not tracked by the ledger\n"
        f"sweep (dry run): {counts}; 3 object(s) not clear (lookup: squeue)\n"
    )


def test_the_sweeps_json_lines_each_with_a_kind() -> None:
    rows = [json.loads(line) for line in render.sweep_text(report(), "pyslurm", 0, as_json=True).splitlines()]
    assert [r["kind"] for r in rows] == ["job", "job", "orphan", "summary"]
    assert rows[0] == {"kind": "job", "job_id": "12", "done": "cleared", "restore": None,
                       "why": "gone\x1b]52;c;aGk=\x07: slurmctld no longer knows the job"}
    assert rows[2] == {"kind": "orphan", "job_id": "77", "orphan": True, "state": "PENDING\x1b[2J"}
    summary = rows[3]
    assert summary["summary"] == {d.value: int(d in (Done.CLEARED, Done.LOOKUP_FAILED)) for d in Done}
    assert (summary["lookup"], summary["lookup_error"], summary["orphans"], summary["fixed_orphans"]) == (
        "pyslurm", "unreachable", 1, [])
    assert (summary["not_clear"], summary["dry_run"], summary["seconds"]) == (0, True, 0.25)
    assert all(line == json.dumps(json.loads(line), sort_keys=True)
               for line in render.sweep_text(report(), "pyslurm", 0, as_json=True).splitlines())


def test_a_summary_folds_rows_as_the_issue_words_it() -> None:
    """Issue 45 item 6's own example, the ids and counts written out by hand."""
    from slurm_dsl.core.model import Call, CallOutcome, Op, Outcome, Reason, Result

    pending = Call(1, 1, "1", b"", CallOutcome.REJECTED, "Job is pending execution")
    rows = [Outcome(Op.HOLD, str(1000 + i), Result.OK, None) for i in range(4213)]
    rows += [Outcome(Op.HOLD, str(i), Result.REJECTED, None, None, (pending,)) for i in range(112, 100, -1)]
    rows += [Outcome(Op.HOLD, j, Result.UNKNOWN, None, Reason.TIMED_OUT) for j in ("2017", "2001", "2005")]
    assert render.summary_line(rows) == (
        "ok 4,213 \u00b7 rejected 12 (Job is pending execution: 101-112)"
        " \u00b7 unknown 3 ([timed_out]: 2001,2005,2017)")


def test_a_long_list_of_ids_is_cut_with_how_many_more() -> None:
    ids = [str(n) for n in range(1, 40, 2)] + ["7_3", "7_1"]  # 20 ranges of one, two array tasks
    assert render.folded(ids) == "1,3,5,7,9,11,13,15 and 14 more"
    assert render.folded(["5", "4", "3", "9", "7_1"]) == "3-5,9,7_1"
