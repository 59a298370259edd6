"""Every citation of the docs points at a real section, and nothing cites a place outside the repository.

Rule 1: code, tests, contrib and the README cite facts as ``docs/<file>.md §N`` (or ``§N.M``, or a
list such as ``§1-§3, §6``); each must name a file in docs/ and, for every number, a heading of
that file that starts with the number.  The docs cite each other as ``[x.md](x.md) §N``, with the
same rule.
Rule 2: the contract and the measured facts once lived outside the repository; no file outside
docs/ may cite those places (their names, or a bare "SPEC §7" or "ground truth §2") any more.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Iterator, List, Pattern, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# Scanned: the repository's own text files outside docs/; not caches, build output or this file.
SKIP_DIRS = {".git", ".hypothesis", ".mypy_cache", ".pytest_cache", ".ruff_cache", "__pycache__", "build", "dist"}
TEXT_SUFFIXES = {"", ".py", ".md", ".lua", ".sh", ".toml", ".cfg", ".ini", ".service", ".timer", ".txt"}

# A run of section numbers after a file name: "§7", "§1-§3, §6", "§9 and §10", "§1.4".
_SECTIONS = r"(?P<sections>(?:\s*(?:,|-|–|and)?\s*§\d+(?:\.\d+)*)+)"
CITATION = re.compile(r"docs/(?P<file>[A-Za-z0-9_.-]+\.md)" + _SECTIONS)
LINK = re.compile(r"\]\((?P<file>[A-Za-z0-9_.-]+\.md)\)" + _SECTIONS)
NUMBER = re.compile(r"§(\d+(?:\.\d+)*)")
HEADING = re.compile(r"^#{1,6}[ \t]+(\d+(?:\.\d+)*)\.?(?:[ \t]|$)", re.MULTILINE)

FORBIDDEN: List[Tuple[str, Pattern[str]]] = [
    ("the specification by name", re.compile(r"\bSPEC\b")),
    ("a path under shared/", re.compile(r"\bshared/")),
    ("a ground-truth section", re.compile(r"ground[ -]truth[^§\n]{0,24}§", re.IGNORECASE)),
    ("a ground-truth file", re.compile(r"slurm-ground-truth", re.IGNORECASE)),
    ("the old pyslurm notes", re.compile(r"pyslurm-api\.md")),
    ("the old lab notes", re.compile(r"slurm-lab\.md")),
    ("a bulk section without its file", re.compile(r"(?<![.\w])bulk §")),
    ("a 24.11/26.05 section without its file", re.compile(r"24\.11/26\.05(?: file)? §")),
]


def repo_text_files() -> Iterator[Path]:
    """Every text file of the repository outside docs/ (and other than this one)."""
    this = Path(__file__).resolve()
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts):
            continue
        if rel.parts[0] == "docs" or not path.is_file() or path.resolve() == this:
            continue
        if path.suffix in TEXT_SUFFIXES:
            yield path


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace")


def headings() -> Dict[str, Set[str]]:
    """The section numbers of each doc, from its headings (``## 9. ...``, ``### 1.4 ...``)."""
    return {path.name: set(HEADING.findall(read(path))) for path in sorted(DOCS.glob("*.md"))}


def citations(text: str, pattern: Pattern[str]) -> Iterator[Tuple[int, str, str]]:
    """(line, file, section number) for every number cited after a file name."""
    for match in pattern.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        for number in NUMBER.findall(match.group("sections")):
            yield line, match.group("file"), number


def broken(where: str, text: str, pattern: Pattern[str], known: Dict[str, Set[str]]) -> Iterator[str]:
    for line, name, number in citations(text, pattern):
        if name not in known:
            yield f"{where}:{line}: docs/{name} does not exist"
        elif number not in known[name]:
            yield f"{where}:{line}: docs/{name} has no section {number}"


def test_every_citation_in_the_repository_points_at_a_section() -> None:
    known = headings()
    found = 0
    problems: List[str] = []
    for path in repo_text_files():
        text = read(path)
        found += sum(1 for _ in citations(text, CITATION))
        problems += broken(str(path.relative_to(ROOT)), text, CITATION, known)
    assert problems == []
    assert found > 50, "the citation pattern found almost nothing: has the form changed?"


def test_the_docs_cite_each_other_correctly() -> None:
    known = headings()
    problems: List[str] = []
    for path in sorted(DOCS.glob("*.md")):
        text = read(path)
        problems += broken(f"docs/{path.name}", text, LINK, known)
        problems += broken(f"docs/{path.name}", text, CITATION, known)
    assert problems == []


def test_nothing_cites_a_place_outside_the_repository() -> None:
    problems: List[str] = []
    for path in repo_text_files():
        for number, line in enumerate(read(path).splitlines(), 1):
            for what, pattern in FORBIDDEN:
                if pattern.search(line):
                    problems.append(f"{path.relative_to(ROOT)}:{number}: {what}: {line.strip()[:120]}")
    assert problems == []


def test_the_contract_keeps_its_sections() -> None:
    assert {str(n) for n in range(1, 13)} <= headings()["contract.md"]


def test_the_index_lists_every_doc() -> None:
    index = read(DOCS / "README.md")
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.name != "README.md" and f"]({p.name})" not in index]
    assert missing == []


def test_the_patterns_read_the_forms_in_use() -> None:
    text = "see docs/slurm-behaviour.md §1-§3, §6 and docs/contract.md §9.4; [pyslurm.md](pyslurm.md) §2"
    assert list(citations(text, CITATION)) == [
        (1, "slurm-behaviour.md", "1"),
        (1, "slurm-behaviour.md", "3"),
        (1, "slurm-behaviour.md", "6"),
        (1, "contract.md", "9.4"),
    ]
    assert list(citations(text, LINK)) == [(1, "pyslurm.md", "2")]
    assert HEADING.findall("## 1. Rules\n### 1.4 Arrays\n## 10. CLI\n#### 2.1\n# Title\n") == ["1", "1.4", "10", "2.1"]
    assert [what for what, p in FORBIDDEN if p.search("SPECIAL_EXIT, docs/slurm-bulk.md §3.2")] == []


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_meaning_of_timeout_is_one_sentence_everywhere() -> None:
    """``--timeout`` means one thing (docs/contract.md §10.0), written once in TIMEOUT_HELP and carried
    word for word by the README, the contract and every operation's --help."""
    import contextlib
    import io

    import pytest

    from slurm_dsl.admin.cli import main
    from slurm_dsl.core.model import Op
    from slurm_dsl.run.deadlines import TIMEOUT_HELP

    sentence = _words(TIMEOUT_HELP)
    for name in ("README.md", "docs/contract.md"):
        assert sentence in _words((ROOT / name).read_text(encoding="utf-8")), name
    for op in Op:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            main([op.value, "--help"])
        assert sentence in _words(out.getvalue()), op.value


def test_the_readme_names_the_supported_slurm_majors_as_testing_md_does() -> None:
    """The README's table of supported majors (issue 31, item 10) and docs/testing.md §2's, where
    the exact versions are: the same Slurm majors on the same Debian and Python, each with the
    command that tests it."""

    def rows(text: str, after: str) -> List[List[str]]:
        table = next(block for block in text[text.index(after):].split("\n\n") if block.startswith("|"))
        return [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]

    testing = {(r[0], ".".join(r[1].split(".")[:2]), ".".join(r[3].split()[0].split(".")[:2]))
               for r in rows(read(DOCS / "testing.md"), "## 2. Where it is tested")}
    readme = read(ROOT / "README.md")
    supported = rows(readme, "## Supported Slurm majors")
    assert {(r[1], r[0], r[2]) for r in supported} == testing
    assert {"22.05", "24.11", "26.05"} <= {r[0] for r in supported}
    majors = {"12 (bookworm)": "`contrib/test`", "13 (trixie)": "`contrib/test --majors trixie`",
              "sid": "`contrib/test --majors sid`"}
    assert {r[1]: r[3].split(":")[0] for r in supported} == majors
    assert "`contrib/test --majors all`" in readme[readme.index("## Supported Slurm majors"):]


def test_the_default_deadline_is_the_code_s_wherever_the_docs_say_it() -> None:
    """The built-in deadline (issue 43) is ``deadlines.DEFAULT_TIMEOUT``; the settings table of
    docs/contract.md §10.2, the choice that explains it and the README's opening say its value."""
    from slurm_dsl.run.deadlines import DEFAULT_TIMEOUT

    said = f"{DEFAULT_TIMEOUT:g} s"
    for name, words in (("docs/contract.md", f"else the built-in default, {said} (`deadlines.DEFAULT_TIMEOUT`"),
                        ("docs/choices.md", f"A command given no deadline has one: {said}"),
                        ("README.md", f"one deadline ({said} unless you give another)")):
        assert words in _words(read(ROOT / name)), name
